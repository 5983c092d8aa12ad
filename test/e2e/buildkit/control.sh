# shellcheck shell=bash
# Sourced by run.sh for modes all, run and control, after lib.sh: the
# phase runner of the face's run and of the control. A phase runs in a
# subshell, so that its first failure (die) ends only that phase; after it
# buildkitd is stopped if the phase left it running, what is left is
# counted by kind, and then removed by hand, so that the next phase starts
# clean. The face's run fails at the first failed phase or leftover; the
# control records both and prints a table beside the face's results.

# What a phase's subshell changes that the run needs after it.
CARRY=(STEPS KILLS STARTS NOTE HEALED_IN)
# Per phase: why it failed ("" = passed), seconds, "r v c o n f" left.
declare -A WHY=() SECS=() LEFT=() FACE_ROW=()

# phase_exit: the EXIT trap of a phase's subshell: waits for its
# background buildctl calls (not for buildkitd), then writes the carried
# variables to $W/carry.sh, as globals.
phase_exit() {
	local rc=$? p
	for p in $(jobs -p); do
		[[ $p == "${BK_PID:-}" ]] || wait "$p" 2>/dev/null || true
	done
	declare -p "${CARRY[@]}" | sed 's/^declare /declare -g /' >"$W/carry.sh"
	exit "$rc"
}

# run_phase phase: phase_<name> in mode <mode>, in a subshell with
# errexit on; sets PHASE_WHY ("" when it passed) and PHASE_LEFT.
run_phase() {
	local phase=$1 rc
	rm -f "$W/phase.fail" "$W/phase.err" "$W/carry.sh" "$W/add.fault" "$W/del.fault"
	mode_vars "${phase%%-*}"
	set +e
	(
		set -e
		PHASE=$phase
		trap phase_exit EXIT
		trap 'printf "%s:%s: %s: exit status %s\n" "${BASH_SOURCE[0]##*/}" "$LINENO" "$BASH_COMMAND" "$?" >"$W/phase.err"' ERR
		"phase_${phase#*-}"
	)
	rc=$?
	set -e
	[[ -f $W/carry.sh ]] || die "$phase: its subshell left no state (exit status $rc)"
	# shellcheck source=/dev/null
	. "$W/carry.sh"
	PHASE_WHY=
	if ((rc != 0)); then
		if [[ -s $W/phase.fail ]]; then
			PHASE_WHY=$(<"$W/phase.fail")
		elif [[ -s $W/phase.err ]]; then
			PHASE_WHY="a command failed: $(<"$W/phase.err")"
		else
			PHASE_WHY="exit status $rc"
		fi
		PHASE_WHY=${PHASE_WHY#"$phase: "}
	fi
	rm -f "$W/add.fault" "$W/del.fault"
	# A phase that failed may have left buildkitd running: a clean stop
	# first, so that what is counted is what a stop leaves.
	if [[ -f $W/buildkitd.pid ]]; then
		BK_PID=$(<"$W/buildkitd.pid")
		if bk_alive; then
			log "$phase: buildkitd still runs after the phase: stopping it (SIGTERM)"
			stop_bk TERM
		fi
		BK_PID=
		rm -f "$W/buildkitd.pid"
	fi
	# The gc phase's foreign sandbox, if a failure left it.
	foreign_remove
	PHASE_LEFT=$(leftover_kinds)
	remove_by_hand
	[[ $(sum_kinds "$(leftover_kinds)") == 0 ]] || die "$phase: leftovers after the forced cleanup: $(kinds "$(leftover_kinds)")"
}

# run_all_phases: every phase of PHASES through run_phase, with WHY, SECS
# and LEFT set per phase.
run_all_phases() {
	local phase t
	for phase in "${PHASES[@]}"; do
		[[ -z $CONTROL || $phase != *-gc ]] || log "$phase: stock go-cni has no GC: only the unpatched restart runs"
		log "phase $phase"
		t=$(date +%s)
		run_phase "$phase"
		SECS[$phase]=$(($(date +%s) - t))
		WHY[$phase]=$PHASE_WHY
		LEFT[$phase]=$PHASE_LEFT
		log "$phase: ${PHASE_WHY:-passed} (${SECS[$phase]}s); left: $(kinds "$PHASE_LEFT")${NOTE[$phase]:+; ${NOTE[$phase]}}"
		[[ -n $CONTROL ]] && continue
		[[ -z $PHASE_WHY ]] || die "$phase: $PHASE_WHY"
		LEFTOVERS=$((LEFTOVERS + $(sum_kinds "$PHASE_LEFT")))
		[[ $(sum_kinds "$PHASE_LEFT") == 0 ]] || die "$phase: leftovers: $(kinds "$PHASE_LEFT")"
		log "$phase: zero leftovers (reservations, veths, cache entries, order records, netns files, iptables rules)"
	done
}

# check_face_statedirs: what the face's engine left in buildkitd's TMPDIR
# after the stops (BuildKit never calls Shutdown); recorded, not fatal.
check_face_statedirs() {
	FACE_DIRS=$(find "$W/tmp" -mindepth 1 -maxdepth 1 | wc -l)
	log "entries left in buildkitd's TMPDIR after $STARTS starts: $FACE_DIRS$( ((FACE_DIRS == 0)) || echo " ($(find "$W/tmp" -mindepth 1 -maxdepth 1 -printf '%f ' | cut -c1-120))")"
}

# run_e2e: the face's phases (PHASES); the first failure or leftover ends
# the run. With FACE_RESULTS set (mode all), one line per phase goes there
# for the control's table.
run_e2e() {
	local phase rows=()
	e2e_setup
	run_all_phases
	check_face_statedirs
	log "phase times: $(for phase in "${PHASES[@]}"; do printf '%s %ss ' "$phase" "${SECS[$phase]}"; done)"
	log "figures: builds $(find "$W/logs" -type f | wc -l), RUN steps checked $STEPS, kills $KILLS, buildkitd starts $STARTS, leftovers $LEFTOVERS, total $(($(date +%s) - T0))s"
	log "PASS"
	[[ -n ${FACE_RESULTS:-} ]] || return 0
	for phase in "${PHASES[@]}"; do
		rows+=("$phase	passed, 0 left (${SECS[$phase]}s)${NOTE[$phase]:+; ${NOTE[$phase]}}")
	done
	printf '%s\n' "${rows[@]}" >"$FACE_RESULTS"
}

# print_table: one row per phase: the face's outcome, and the control's.
print_table() {
	local phase why
	{
		echo
		echo "| phase | face | stock: outcome | stock: left after the phase (buildkitd stopped) |"
		echo "|---|---|---|---|"
		for phase in "${PHASES[@]}"; do
			why=${WHY[$phase]}
			[[ -n $why ]] || why=passed
			why="$why (${SECS[$phase]}s)${NOTE[$phase]:+; ${NOTE[$phase]}}"
			((${#why} <= 220)) || why="${why:0:217}..."
			printf '| %s | %s | %s | %s |\n' "$phase" "${FACE_ROW[$phase]:-not run (run.sh all runs both)}" \
				"$why" "$(kinds "${LEFT[$phase]}")"
		done
		echo
	} >&2
}

# run_control: the control through PHASES. Fails only on a harness error.
run_control() {
	local p row
	if [[ -n ${FACE_RESULTS:-} && -f $FACE_RESULTS ]]; then
		while IFS=$'\t' read -r p row; do FACE_ROW[$p]=$row; done <"$FACE_RESULTS"
		rm -f "$FACE_RESULTS"
	fi
	# shellcheck disable=SC2034 # read by common.sh's log and by lib.sh
	{
		LOG_TAG="e2e-buildkit control"
		CONTROL=1
		# Stock go-cni retries no DEL: the wait only shows that nothing
		# heals in many times the face's healing time.
		HEAL_WAIT=${E2E_CONTROL_HEAL_WAIT:-20}
		STEPS=0 KILLS=0 STARTS=0
		NOTE=()
	}
	log "stock BuildKit $BUILDKIT_VERSION ($GOCNI $STOCK_GOCNI) through: ${PHASES[*]}"
	e2e_setup
	run_all_phases
	print_table
	log "figures: builds $(find "$W/logs" -type f | wc -l), RUN steps checked $STEPS, kills $KILLS, buildkitd starts $STARTS, total $(($(date +%s) - T0))s"
	log "PASS (as a control: no harness error; its failures and leftovers are the table's)"
}
