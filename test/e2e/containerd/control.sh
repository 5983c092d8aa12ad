# shellcheck shell=bash
# Sourced by run.sh for modes all and control, after lib.sh: the control
# run. Stock containerd (BIN from build_stock_bins, go-cni $STOCK_GOCNI)
# goes through the face's phases with the same configs, plugins, runc,
# pause image and crictl. A phase runs in a subshell, so that its first
# failure (die) ends only that phase; after each phase what is left is
# counted by kind, containerd's own stopp/rmp is tried, the rest is removed
# by hand, and containerd is restarted when it does not run a pod; then the
# next phase starts clean. At the end one table compares the face (from
# FACE_RESULTS, mode all) with the control.

# What a phase's subshell changes that the run needs after it.
CARRY=(PODS_RUN IPS_CHECKED KILLS STARTS CTRD_PID ALL_IDS HEAL_OUTCOME ADDFAIL_OUTCOME)
# Per phase: why it failed ("" = passed), seconds, "r v c o n" left after
# it, the same after the cleanup's stopp/rmp and whether that needed a
# containerd restart, the cleanup's notes, the face's line.
declare -A CTL_WHY=() CTL_SECS=() CTL_LEFT=() CTL_AFTER=() CTL_AFTER_RESTART=() CTL_NOTES=() FACE_ROW=()
PROBES=0
SWEPT=0
RESTARTS=0

# phase_exit: the EXIT trap of a phase's subshell. Waits for the phase's
# background crictl calls (not for a containerd the phase started), then
# writes the carried variables to $W/carry.sh, as globals.
phase_exit() {
	local rc=$? p
	for p in $(jobs -p); do
		[[ $p == "${CTRD_PID:-}" ]] || wait "$p" 2>/dev/null || true
	done
	declare -p "${CARRY[@]}" | sed 's/^declare /declare -g /' >"$W/carry.sh"
	exit "$rc"
}

# run_phase phase: phase_<phase> in a subshell with errexit on (not
# `( ... ) || rc=$?`, which would turn errexit off inside); sets
# PHASE_WHY: "" when it passed, else die's message, else the command that
# failed under errexit.
run_phase() {
	local phase=$1 rc
	rm -f "$W/phase.fail" "$W/phase.err" "$W/carry.sh"
	set +e
	(
		set -e
		# shellcheck disable=SC2034 # read by die (run.sh)
		PHASE=$phase
		trap phase_exit EXIT
		trap 'printf "%s:%s: %s: exit status %s\n" "${BASH_SOURCE[0]##*/}" "$LINENO" "$BASH_COMMAND" "$?" >"$W/phase.err"' ERR
		"phase_$phase"
	)
	rc=$?
	set -e
	[[ -f $W/carry.sh ]] || die "$phase: its subshell left no state (exit status $rc)"
	# shellcheck source=/dev/null
	. "$W/carry.sh"
	PHASE_WHY=
	((rc != 0)) || return 0
	if [[ -s $W/phase.fail ]]; then
		PHASE_WHY=$(<"$W/phase.fail")
	elif [[ -s $W/phase.err ]]; then
		PHASE_WHY="a command failed: $(<"$W/phase.err")"
		log "recorded for $phase: $PHASE_WHY"
	else
		PHASE_WHY="exit status $rc"
	fi
	PHASE_WHY=${PHASE_WHY#"$phase: "}
}

# network_ready_within secs: crictl info reports NetworkReady in time.
network_ready_within() {
	for _ in $(seq 1 $(($1 * 2))); do
		crictl info 2>/dev/null | jq -e '.status.conditions[] | select(.type=="NetworkReady") | .status == true' >/dev/null &&
			return 0
		sleep 0.5
	done
	return 1
}

# restart_containerd why: a note, a SIGTERM stop and a start (which ends
# the run when containerd does not get ready: a harness error).
restart_containerd() {
	log "restarting containerd: $1"
	RESTARTS=$((RESTARTS + 1))
	stop_containerd TERM
	start_containerd
}

# cri_sweep: crictl stopp + rmp of every sandbox containerd lists; fails
# when one is still listed (SWEEP_ERR: the first error).
cri_sweep() {
	local id ids
	SWEEP_ERR=
	ids=$(crictl pods -q) || {
		SWEEP_ERR="crictl pods: $(crictl_err)"
		return 1
	}
	for id in $ids; do
		SWEPT=$((SWEPT + 1))
		if ! crictl stopp "$id" >/dev/null || ! crictl rmp "$id" >/dev/null; then
			[[ -n $SWEEP_ERR ]] || SWEEP_ERR=$(crictl_err)
			log "cleanup: stopp/rmp of ${id:0:12} failed: $(crictl_err)"
		fi
	done
	ids=$(crictl pods -q) || {
		SWEEP_ERR="crictl pods: $(crictl_err)"
		return 1
	}
	[[ -z $ids ]]
}

# remove_by_hand: reservations and cache entries of both networks, veths
# on both bridges, pinned netns (only once containerd lists no sandbox).
remove_by_hand() {
	local net br l f
	for net in "$NET" "$HNET"; do
		find "$W/ipam/$net" -type f ! -name 'last_reserved_ip.*' ! -name lock -delete 2>/dev/null || true
		find "$CNI_CACHE/results" -name "$net-*" -delete 2>/dev/null || true
	done
	for br in "$BRIDGE" "$HBRIDGE"; do
		for l in $(veths_on "$br"); do
			ip link del "$l" || true
		done
	done
	while read -r f; do
		[[ -n $f ]] || continue
		umount "$f" 2>/dev/null || true
		rm -f "$f" || true
	done < <(find "$W/state" -path '*/netns/*' 2>/dev/null)
}

# probe_main: containerd runs a pod on the main network and tears it down
# (right after a fault phase it may still hold the fault network for a
# moment): 20 tries, 0.5 s apart; PROBE_ERR says why not.
probe_main() {
	local id ip
	PROBE_ERR=
	for _ in $(seq 1 20); do
		PROBES=$((PROBES + 1))
		id=$(crictl runp "$(pod_config "probe-$PROBES" "uid-probe-$PROBES")") || {
			PROBE_ERR="runp: $(crictl_err)"
			return 1
		}
		ALL_IDS+=("$id")
		ip=$(pod_ip "$id") || true
		if ! crictl stopp "$id" >/dev/null || ! crictl rmp "$id" >/dev/null; then
			PROBE_ERR="stopp/rmp: $(crictl_err)"
			return 1
		fi
		[[ $ip != "${SUBNET%.*}."* ]] || return 0
		sleep 0.5
	done
	PROBE_ERR="no probe pod got an address in $SUBNET"
	return 1
}

# control_clean phase: after a phase, passed or not. Clears the faults;
# puts the main conflist back if no conflist is in place (noconf), else
# leaves the phase's network for the teardown; restarts containerd if it
# exited or NetworkReady stays false 30 s; stopp + rmp of every sandbox it
# still lists (restarting it once if that fails); records what is left
# then (CTL_AFTER: what no CRI call removes); removes that by hand;
# restores the main network and requires a probe pod to run on it
# (restarting containerd once if not). Anything left after that, or a
# containerd that does not recover, is a harness error.
control_clean() {
	local phase=$1 notes=() n attempt
	rm -f "$W/add.fault" "$W/del.fault"
	if ! compgen -G "$W/cni/*.conflist" >/dev/null; then
		if [[ -e $W/10-$NET.conflist.away ]]; then
			mv "$W/10-$NET.conflist.away" "$W/cni/10-$NET.conflist"
		else
			write_conflist "$W/cni/10-$NET.conflist" "$NET" "$BRIDGE" "$SUBNET"
		fi
	fi
	local restarts=$RESTARTS
	if ! ctrd_alive; then
		notes+=("containerd had exited: restarted")
		CTRD_PID=
		RESTARTS=$((RESTARTS + 1))
		start_containerd
	fi
	if ! network_ready_within 30; then
		notes+=("NetworkReady still false 30s after the conflist was back: containerd restarted")
		restart_containerd "NetworkReady false"
	fi
	n=$(crictl pods -q 2>/dev/null | wc -l) || n=0
	if ! cri_sweep; then
		notes+=("stopp/rmp of what was left failed ($(shorten "$SWEEP_ERR" 80)): containerd restarted")
		restart_containerd "stopp/rmp failed"
		cri_sweep || die "$phase: containerd still lists sandboxes after stopp/rmp and a restart: $SWEEP_ERR"
	fi
	((n == 0)) || notes+=("$n sandbox(es) left by the phase: stopp + rmp")
	CTL_AFTER[$phase]=$(leftover_kinds)
	CTL_AFTER_RESTART[$phase]=
	((RESTARTS == restarts)) || CTL_AFTER_RESTART[$phase]=1
	remove_by_hand
	for attempt in 1 2; do
		rm -f "$W/cni/10-$HNET.conflist"
		[[ ! -e $W/10-$NET.conflist.away ]] || mv "$W/10-$NET.conflist.away" "$W/cni/10-$NET.conflist"
		[[ -e $W/cni/10-$NET.conflist ]] || write_conflist "$W/cni/10-$NET.conflist" "$NET" "$BRIDGE" "$SUBNET"
		probe_main && break
		((attempt == 1)) || die "$phase: containerd runs no pod on $NET after a restart: $PROBE_ERR"
		notes+=("a probe pod failed ($(shorten "$PROBE_ERR" 80)): containerd restarted")
		restart_containerd "probe pod failed: $PROBE_ERR"
		cri_sweep || die "$phase: containerd still lists sandboxes after a restart: $SWEEP_ERR"
		remove_by_hand
	done
	n=$(count_leftovers)
	((n == 0)) || die "$phase: $n leftovers after the forced cleanup"
	CTL_NOTES[$phase]=$(
		IFS=';'
		echo "${notes[*]}"
	)
	CTL_NOTES[$phase]=${CTL_NOTES[$phase]//;/; }
}

# shorten text [max]: without containerd's ' for sandbox "<id>"', other
# sandbox IDs cut to 12 characters, then at most max (100) characters.
shorten() {
	local s=$1 max=${2:-100}
	s=$(sed -E 's/ for sandbox "[0-9a-f]{64}"//g; s/([0-9a-f]{12})[0-9a-f]{52}/\1/g' <<<"$s")
	((${#s} <= max)) || s="${s:0:max-3}..."
	printf '%s' "$s"
}

# kinds "r v c o n": the non-zero kinds, "0" when none.
kinds() {
	local r v c o n out=()
	read -r r v c o n <<<"$1"
	((r == 0)) || out+=("reservations $r")
	((v == 0)) || out+=("veths $v")
	((c == 0)) || out+=("cache entries $c")
	((o == 0)) || out+=("order records $o")
	((n == 0)) || out+=("netns $n")
	((${#out[@]} > 0)) || out=(0)
	local IFS=,
	printf '%s' "${out[*]}" | sed 's/,/, /g'
}

# print_table phase...: one row per phase: the face's outcome, and the
# control's: what failed, what was left after the phase, what containerd's
# own stopp/rmp left after it.
print_table() {
	local phase why extra
	{
		echo
		echo "| phase | face | control: what failed | control: left after the phase | control: left after a later stopp+rmp |"
		echo "|---|---|---|---|---|"
		for phase; do
			why=${CTL_WHY[$phase]}
			extra=
			case $phase in
			heal) extra=$HEAL_OUTCOME ;;
			addfail) extra=$ADDFAIL_OUTCOME ;;
			esac
			if [[ -z $why ]]; then
				why="passed (${CTL_SECS[$phase]}s)"
			else
				why="$(shorten "$why" 110) (${CTL_SECS[$phase]}s)${extra:+; $(shorten "$extra" 110)}"
			fi
			printf '| %s | %s | %s | %s | %s%s |\n' "$phase" "${FACE_ROW[$phase]:-not run (run.sh all runs both)}" \
				"$why" "$(kinds "${CTL_LEFT[$phase]}")" "$(kinds "${CTL_AFTER[$phase]}")" \
				"${CTL_AFTER_RESTART[$phase]:+ (only after a containerd restart)}"
		done
		echo
		for phase; do
			[[ -z ${CTL_NOTES[$phase]} ]] || echo "control cleanup after $phase: ${CTL_NOTES[$phase]}"
		done
		echo
	} >&2
}

# run_control phase...: the control (default: every phase). Fails only on
# a harness error (die outside a phase) and when heal and addfail, those
# of them run, leave nothing behind in the control.
run_control() {
	# shellcheck disable=SC2153 # PHASES: lib.sh's
	(($# > 0)) || set -- "${PHASES[@]}"
	check_phases "$@"
	local phase t p row ran=() leaked=() r v c o n
	if [[ -n ${FACE_RESULTS:-} && -f $FACE_RESULTS ]]; then
		while IFS=$'\t' read -r p row; do FACE_ROW[$p]=$row; done <"$FACE_RESULTS"
		rm -f "$FACE_RESULTS"
	fi
	# shellcheck disable=SC2034 # read by run.sh's log and by lib.sh
	{
		LOG_TAG="e2e-containerd control"
		CONTROL=1
		STATE_KINDS="r v c"
	}
	log "stock containerd $CONTAINERD_VERSION ($GOCNI $STOCK_GOCNI) through: $*"
	e2e_setup
	for phase; do
		t=$(date +%s)
		run_phase "$phase"
		CTL_SECS[$phase]=$(($(date +%s) - t))
		CTL_WHY[$phase]=$PHASE_WHY
		CTL_LEFT[$phase]=$(leftover_kinds)
		control_clean "$phase"
		log "$phase: ${PHASE_WHY:-passed}; left: $(kinds "${CTL_LEFT[$phase]}"); after a later stopp+rmp: $(kinds "${CTL_AFTER[$phase]}")${CTL_NOTES[$phase]:+; cleanup: ${CTL_NOTES[$phase]}}"
	done
	stop_containerd TERM
	print_table "$@"
	# shellcheck disable=SC2153 # STARTS: lib.sh's
	log "figures: pods run $PODS_RUN, IPs checked $IPS_CHECKED, kills $KILLS, containerd starts $STARTS (restarts by the cleanup $RESTARTS), sandboxes swept $SWEPT, probe pods $PROBES, total $(($(date +%s) - T0))s"
	for p in heal addfail; do
		[[ -n ${CTL_LEFT[$p]:-} ]] || continue
		ran+=("$p")
		read -r r v c o n <<<"${CTL_LEFT[$p]}"
		if ((r + v + c + o + n > 0)); then
			leaked+=("$p")
		else
			log "$p: stock go-cni left nothing behind here"
		fi
	done
	if ((${#ran[@]} == 0)); then
		log "heal and addfail not run: nothing shows that the phases can detect a leak"
	elif ((${#leaked[@]} == 0)); then
		die "the control leaked nowhere in ${ran[*]}: stock go-cni retries no failed DEL, and containerd#12130 leaks after a failed ADD and a failed DEL, so these phases prove nothing"
	else
		log "the control leaked in ${leaked[*]}: the phases detect a leak"
	fi
	log "PASS (as a control: no harness error; its failures and leftovers are the table's)"
}
