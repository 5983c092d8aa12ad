# shellcheck shell=bash
# Sourced by run.sh: runs crio built against our pkg/ocicni and drives it
# with crictl. Uses BIN, PLUGINS, CRICTL_BIN from run.sh's build_all, and
# the pod, network and leftover helpers of test/e2e/lib/common.sh.

NET=ocicni-e2e
BRIDGE=${E2E_BRIDGE:-cni-e2e0}
SUBNET=${E2E_SUBNET:-10.99.0.0/24}
CNI_CACHE=/var/lib/cni # CRI-O calls InitCNI, which has no cache dir option
# The heal phase's network: bridge + host-local + the faultdel script plugin.
# Its name does not start with "$NET-", so the two networks' cache entries
# are counted apart.
HNET=ocicni-heal
HBRIDGE=${E2E_HEAL_BRIDGE:-cni-e2eh0}
HSUBNET=${E2E_HEAL_SUBNET:-10.99.1.0/24}
PAUSE_IMAGE=localhost/ocicni-pause:e2e
PODS_RUN=0
IPS_CHECKED=0
KILLS=0
LEFTOVERS=0
# shellcheck disable=SC2034 # ALL_IDS and LEFTOVER_KINDS: read by common.sh
{
	ALL_IDS=()
	LEFTOVER_KINDS="reservations, veths, cache entries, order records"
}

# crictl's stderr (config and cgroup_parent warnings) goes to crictl.log,
# shown with crio.log on failure.
crictl() {
	"$CRICTL_BIN" --config "$W/crictl.yaml" --runtime-endpoint "unix://$W/crio.sock" \
		--image-endpoint "unix://$W/crio.sock" --timeout 60s "$@" 2>>"$W/crictl.log"
}

cleanup() {
	local rc=$?
	cleanup_begin "$rc" crio.log 20
	stop_crio KILL
	# Containers that conmon and runc started.
	kill_runc_containers /usr/sbin/runc "$W/runc"
	local pid
	for pid in $(pgrep -f "conmon .*$W" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
	critest_host_undo
	remove_net_state
	cleanup_end "$rc"
}

start_crio() {
	log "starting crio"
	"$BIN/crio" --config "$W/crio.conf" --config-dir "$W/crio.conf.d" --log-level info \
		>>"$W/crio.log" 2>&1 &
	CRIO_PID=$!
	wait_daemon "$CRIO_PID" "$W/crio.log" crio network_ready
	log "crio (pid $CRIO_PID) is ready, network ready"
}

stop_crio() { stop_pid CRIO_PID "$@"; }

write_configs() {
	mkdir -p "$W"/{crio.conf.d,cni,ipam,logs,ns,exits,attach,runc,bin,lib,run,pods}
	cat >"$W/crio.conf" <<EOF
[crio]
root = "$W/root"
runroot = "$W/runroot"
storage_driver = "vfs"
log_dir = "$W/logs"
version_file = "$W/run/version"
version_file_persist = "$W/lib/version"
clean_shutdown_file = "$W/lib/clean.shutdown"

[crio.api]
listen = "$W/crio.sock"
stream_address = "127.0.0.1"
stream_port = "0"

[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
drop_infra_ctr = false
pinns_path = "$BIN/pinns"
namespaces_dir = "$W/ns"
container_exits_dir = "$W/exits"
container_attach_socket_dir = "$W/attach"
hooks_dir = []

[crio.runtime.runtimes.runc]
runtime_path = "$RUNC"
runtime_type = "oci"
runtime_root = "$W/runc"
monitor_path = "$CONMON"
monitor_cgroup = "pod"

[crio.image]
pause_image = "$PAUSE_IMAGE"
pause_image_auth_file = ""
pause_command = "/pause"
signature_policy = "$W/policy.json"

[crio.network]
cni_default_network = "$NET"
network_dir = "$W/cni"
plugin_dirs = ["$PLUGINS"]

[crio.metrics]
enable_metrics = false

[crio.nri]
enable_nri = false
EOF
	echo '{"default":[{"type":"insecureAcceptAnything"}]}' >"$W/policy.json"
	: >"$W/crictl.yaml"
	write_conflist "$W/cni/10-$NET.conflist" "$NET" "$BRIDGE" "$SUBNET"
}

# make_runc: the runtime CRI-O calls. runc cannot set oomScoreAdj -998 (the
# infra container's) without CAP_SYS_RESOURCE; when this process cannot
# lower its own oom_score_adj, a wrapper drops process.oomScoreAdj from the
# bundle's config.json before calling the real runc.
make_runc() {
	local real
	real=$(command -v runc)
	if (echo -998 >/proc/self/oom_score_adj) 2>/dev/null; then
		RUNC=$real
		log "runc: $real (oom_score_adj -998 allowed)"
		return
	fi
	RUNC=$W/bin/runc
	cat >"$RUNC" <<EOF
#!/bin/bash
# Drops process.oomScoreAdj from the bundle: oom_score_adj -998 needs
# CAP_SYS_RESOURCE, which this environment lacks.
bundle=
prev=
for a in "\$@"; do
	case \$prev in --bundle|-b) bundle=\$a ;; esac
	case \$a in --bundle=*) bundle=\${a#--bundle=} ;; esac
	prev=\$a
done
if [[ -n \$bundle && -f \$bundle/config.json ]] && grep -q oomScoreAdj "\$bundle/config.json"; then
	jq -c 'del(.process.oomScoreAdj)' "\$bundle/config.json" >"\$bundle/config.json.e2e" &&
		mv "\$bundle/config.json.e2e" "\$bundle/config.json"
fi
exec $real "\$@"
EOF
	chmod +x "$RUNC"
	log "runc: wrapper $RUNC drops process.oomScoreAdj (oom_score_adj -998 not allowed here)"
}

# make_pause_image: a static pause binary committed as a local image into
# the containers-storage that crio will use; there is no registry.
make_pause_image() {
	command -v buildah >/dev/null || install_debs buildah
	local b="buildah --root $W/root --runroot $W/runroot --storage-driver vfs" c
	build_pause "$W/pause"
	c=$($b from scratch) || die "buildah from scratch failed"
	$b copy "$c" "$W/pause" /pause >/dev/null &&
		$b config --cmd /pause "$c" &&
		$b commit -q "$c" "$PAUSE_IMAGE" >/dev/null &&
		$b rm "$c" >/dev/null || die "buildah commit of the pause image failed"
	log "pause image $PAUSE_IMAGE committed to $W/root (vfs)"
}

# count_leftovers: of both networks (the heal network's are 0 before its
# phase), by net_leftovers, summed.
count_leftovers() {
	local r v c o
	read -r r v c o < <(net_leftovers)
	echo $((r + v + c + o))
}

# phase_crash: SIGKILL crio with pods running. Live pods keep their
# network across the restart; pods whose infra container died while crio
# was down are stale and get torn down by stopp/rmp after the restart; an
# attachment of a container CRI-O never knew is collected by CRI-O's GC at
# startup (CNIManager.doGC -> our GCWithContext).
phase_crash() {
	local id i
	log "phase crash: 4 live + 2 stale pods, SIGKILL crio"
	crash_pods
	make_unknown_attachment
	stop_crio KILL
	KILLS=$((KILLS + 1))
	log "crio killed with SIGKILL; killing the infra containers of the 2 stale pods"
	for id in "${CRASH_STALE[@]}"; do
		/usr/sbin/runc --root "$W/runc" kill "$id" KILL 2>/dev/null || die "runc kill $id failed"
	done
	sleep 1
	start_crio
	# GC at startup runs once the plugin is ready; give it a moment.
	for i in $(seq 1 40); do
		[[ ! -e $CNI_CACHE/results/$NET-$STALE_ID-eth0 ]] && break
		sleep 0.5
	done
	[[ ! -e $CNI_CACHE/results/$NET-$STALE_ID-eth0 ]] ||
		die "crash: CRI-O's GC at startup left the unknown container's attachment"
	[[ ! -e $CNI_CACHE/ocicni/attachments/$STALE_ID ]] || die "crash: GC left the unknown container's order record"
	log "crash: CRI-O's startup GC collected the attachment of an unknown container"
	crash_check
}

# make_unknown_attachment: ADD through libcni's cache layout for a
# container ID CRI-O does not know, as if a sandbox had been lost: a real
# netns, veth, reservation, cache entry and order record.
make_unknown_attachment() {
	STALE_ID=$(head -c 32 /dev/urandom | sha256sum | cut -c1-64)
	ip netns add "e2e-unknown-$$"
	"$OCICNITOOL" add --conf-dir "$W/cni" --bin-dir "$PLUGINS" --network "$NET" \
		"e2e-unknown-$$" "$STALE_ID" >/dev/null ||
		die "ocicnitool add for the unknown container failed"
	ip netns del "e2e-unknown-$$" # the netns goes; the cache entry stays
	[[ -e $CNI_CACHE/results/$NET-$STALE_ID-eth0 ]] || die "no cache entry for the unknown container"
}

# phase_cached_config: remove the network's conflist, stopp a pod: teardown
# must use the config cached at ADD, releasing the reservation.
phase_cached_config() {
	local id ip
	log "phase cached-config: stopp with the conflist removed"
	run_pod "cached-1"
	id=$POD_ID
	check_pod_ip "$id"
	ip=$(pod_ip "$id")
	[[ -e $W/ipam/$NET/$ip ]] || die "cached-config: no reservation for $ip"
	mv "$W/cni/10-$NET.conflist" "$W/10-$NET.conflist.away"
	sleep 1
	crictl stopp "$id" >/dev/null || die "cached-config: stopp without the conflist failed: $(crictl_err)"
	[[ ! -e $W/ipam/$NET/$ip ]] || die "cached-config: reservation $ip not released without the conflist"
	log "cached-config: reservation $ip released from the cached config"
	mv "$W/10-$NET.conflist.away" "$W/cni/10-$NET.conflist"
	crictl rmp "$id" >/dev/null || die "crictl rmp $id failed: $(crictl_err)"
	assert_clean "cached-config"
}

# set_default_network NAME: restarts crio (TERM) with NAME as
# cni_default_network; CRI-O attaches a pod to its default network only.
set_default_network() {
	stop_crio TERM
	sed -i "s|^cni_default_network = .*|cni_default_network = \"$1\"|" "$W/crio.conf"
	start_crio
}

# write_heal_network: the heal phase's conflist (bridge + host-local, then
# faultdel) and the faultdel plugin (write_fault_plugin) in its own plugin
# dir $W/cni-bin. faultdel passes prevResult through on ADD; its DEL fails
# with code 11 ("busy") while $W/heal.fault exists. It logs one line per
# call to $W/faultdel.log: "<unix time> <command> <container id> <outcome>".
write_heal_network() {
	mkdir -p "$W/cni-bin"
	write_fault_plugin "$W/cni-bin/faultdel" "$W/heal.fault" busy
	write_conflist "$W/cni/20-$HNET.conflist" "$HNET" "$HBRIDGE" "$HSUBNET" faultdel
	grep -q "\"$W/cni-bin\"" "$W/crio.conf" ||
		sed -i "s|^plugin_dirs = \[\(.*\)\]|plugin_dirs = [\1, \"$W/cni-bin\"]|" "$W/crio.conf"
	grep -q "\"$W/cni-bin\"" "$W/crio.conf" || die "heal: could not add $W/cni-bin to plugin_dirs"
}

# heal_fail msg: dies with the heal phase's evidence.
heal_fail() {
	log "heal: crio.log (last 40 lines):"
	tail -40 "$W/crio.log" >&2
	log "heal: faultdel calls ($W/faultdel.log):"
	cat "$W/faultdel.log" >&2 2>/dev/null
	log "heal: order record $CNI_CACHE/ocicni/attachments/${HEAL_ID:-?}:"
	cat "$CNI_CACHE/ocicni/attachments/${HEAL_ID:-?}" >&2 2>/dev/null || echo "(none)" >&2
	echo >&2
	log "heal: left (1 = there): reservation, veth, cache entry, order record: $(heal_state)"
	die "heal: $*"
}

# heal_state: what is left of the heal pod's attachment, as "r v c o"
# (reservation, veth, cache entry, order record; 1 = still there).
heal_state() {
	local r=0 v=0 c=0 o=0
	[[ -e $W/ipam/$HNET/${HEAL_IP:-none} ]] && r=1
	[[ -n ${HEAL_VETH:-} ]] && ip link show "$HEAL_VETH" >/dev/null 2>&1 && v=1
	[[ -e $CNI_CACHE/results/$HNET-${HEAL_ID:-none}-eth0 ]] && c=1
	[[ -e $CNI_CACHE/ocicni/attachments/${HEAL_ID:-none} ]] && o=1
	echo "$r $v $c $o"
}

# phase_heal: a DEL that fails while a fault lasts is finished by the
# library's background retries (healing), with no further CRI call.
# crio's default network becomes $HNET (a restart); a pod runs; with the
# fault file present `crictl stopp` is tried E2E_HEAL_STOPS (3) times
# (CRI-O v1.34 returns the error while the pinned netns cannot be removed;
# should it report success after a failed teardown, no more stopp is made
# either); the fault is cleared; then, without any crictl call, the
# reservation, the veth, the libcni cache entry and the order record must
# go within E2E_HEAL_WAIT (60) seconds, with the same crio still running.
phase_heal() {
	local stops=${E2E_HEAL_STOPS:-3} wait=${E2E_HEAL_WAIT:-60} i rc fails=0 outcome pid err
	local t_fault t_last t_clear t_healed healed_in state ndel
	log "phase heal: a DEL that fails while a fault lasts, finished in the background"
	write_heal_network
	set_default_network "$HNET"
	pid=$CRIO_PID
	run_pod "heal-1"
	HEAL_ID=$POD_ID
	check_pod_ip "$HEAL_ID" "$HSUBNET"
	HEAL_IP=$(pod_ip "$HEAL_ID")
	[[ -e $W/ipam/$HNET/$HEAL_IP ]] || heal_fail "no host-local reservation for $HEAL_IP"
	HEAL_VETH=$(veths_on "$HBRIDGE")
	[[ -n $HEAL_VETH && $HEAL_VETH != *$'\n'* ]] || heal_fail "not exactly one veth on $HBRIDGE: '$HEAL_VETH'"
	[[ -e $CNI_CACHE/results/$HNET-$HEAL_ID-eth0 ]] || heal_fail "no libcni cache entry $HNET-$HEAL_ID-eth0"
	[[ -e $CNI_CACHE/ocicni/attachments/$HEAL_ID ]] || heal_fail "no order record for $HEAL_ID"
	grep -q " ADD $HEAL_ID ok\$" "$W/faultdel.log" || heal_fail "faultdel logged no ADD of the pod"
	log "heal: pod ${HEAL_ID:0:12} has $HEAL_IP, veth $HEAL_VETH on $HBRIDGE, cache entry and order record"

	touch "$W/heal.fault"
	t_fault=$(date +%s.%N)
	for i in $(seq 1 "$stops"); do
		rc=0
		crictl stopp "$HEAL_ID" >/dev/null || rc=$?
		t_last=$(date +%s.%N)
		if ((rc != 0)); then
			fails=$((fails + 1))
			err=$(tail -1 "$W/crictl.log")
			log "heal: stopp $i/$stops failed as it must (exit $rc): ${err#*desc = }"
			((i == stops)) || sleep 1
			continue
		fi
		# CRI-O v1.34 reports success when it could remove the netns path
		# after a failed teardown, and never calls again.
		grep -q " DEL $HEAL_ID error-11\$" "$W/faultdel.log" ||
			heal_fail "stopp $i succeeded but no DEL of the pod has failed"
		break
	done
	if ((fails == stops)); then
		outcome="stopp failed $fails times"
	else
		outcome="stopp failed $fails times, then succeeded after a failed teardown (CRI-O removed the netns path)"
	fi
	log "heal: $outcome; failed DELs so far: $(grep -c " DEL $HEAL_ID error-11\$" "$W/faultdel.log")"
	grep -q '"heal"' "$CNI_CACHE/ocicni/attachments/$HEAL_ID" 2>/dev/null ||
		heal_fail "the order record holds no pending retry after the failed teardown"
	log "heal: order record: $(jq -c '[.attachments[] | select(.heal) | {network, heal: (.heal | {attempts, next})}]' \
		"$CNI_CACHE/ocicni/attachments/$HEAL_ID" 2>/dev/null)"
	if [[ ${E2E_HEAL_RM_CACHE:-0} == 1 ]]; then
		rm -f "$CNI_CACHE"/results/*"$HEAL_ID"* # as newer CRI-O does after a failed teardown (#9372)
		log "heal: removed the libcni cache entry by hand (E2E_HEAL_RM_CACHE=1)"
	fi

	# From here on, no crictl call until the attachment is gone.
	rm -f "$W/heal.fault"
	t_clear=$(date +%s.%N)
	log "heal: fault cleared; no CRI call now; waiting up to ${wait}s"
	state=$(heal_state)
	for i in $(seq 1 $((wait * 4))); do
		[[ $state == "0 0 0 0" ]] && break
		kill -0 "$pid" 2>/dev/null || heal_fail "crio (pid $pid) exited while healing"
		sleep 0.25
		state=$(heal_state)
	done
	t_healed=$(date +%s.%N)
	healed_in=$(awk -v a="$t_clear" -v b="$t_healed" 'BEGIN {printf "%.1f", b - a}')
	[[ $state == "0 0 0 0" ]] || heal_fail "not healed ${wait}s after the fault cleared"
	[[ $CRIO_PID == "$pid" ]] && kill -0 "$pid" 2>/dev/null || heal_fail "crio (pid $pid) is not running"
	ndel=$(awk -v t="$t_last" -v id="$HEAL_ID" '$2 == "DEL" && $3 == id && $4 == "ok" && $1 > t' "$W/faultdel.log" | wc -l)
	((ndel > 0)) || heal_fail "healed, but faultdel logged no successful DEL after the last crictl call"
	HEAL_OUTCOME="$outcome; healed ${healed_in}s after the fault cleared by $ndel DEL(s) after the last crictl call"
	log "heal: $HEAL_OUTCOME; crio (pid $pid) still running"
	log "heal: DELs of the pod, in s after the fault was set (cleared at +$(awk -v a="$t_fault" -v b="$t_clear" \
		'BEGIN {printf "%.1f", b - a}')): $(awk -v t="$t_fault" -v id="$HEAL_ID" \
		'$2 == "DEL" && $3 == id {printf "%s+%.1f %s", sep, $1 - t, $4; sep = ", "}' "$W/faultdel.log")"
	grep 'Background DEL retry finished a teardown' "$W/crio.log" | tail -1 >&2 || true

	crictl rmp -f "$HEAL_ID" >/dev/null || heal_fail "crictl rmp -f $HEAL_ID failed"
	ip link del "$HBRIDGE" 2>/dev/null || true
	assert_clean "heal"
}

# phase_critest: cri-tools' critest, focused on the tests that touch pod
# networking (CRITEST_FOCUS; "." runs the whole suite), one at a time,
# against this crio. Every test must pass, and leave nothing behind.
phase_critest() {
	log "phase critest: critest $CRITEST_VERSION, the tests of pod networking"
	local rc=0
	run_critest "unix://$W/crio.sock" || rc=$?
	critest_phase_result "$rc" || die "critest failed (its log: $W/critest.log)"
	assert_clean "critest"
}

# phase_critest_bench: critest's pod benchmark (run_critest_bench)
# against this crio; not among the default phases (run.sh critest-bench).
phase_critest_bench() {
	log "phase critest_bench: critest $CRITEST_VERSION -benchmark, the PodSandbox lifecycle"
	command -v jq >/dev/null || install_debs jq
	run_critest_bench "unix://$W/crio.sock"
	assert_clean "critest_bench"
}

# run_e2e phase...: setup, crio, then the phases named (churn, crash,
# cached_config, critest, heal; critest_bench), in order.
run_e2e() {
	[[ $(id -u) == 0 ]] || die "run as root"
	(($# > 0)) || set -- churn crash cached_config critest heal
	W=$(mktemp -d /tmp/ocicni-e2e-crio.XXXXXX)
	trap cleanup EXIT
	trap 'exit 130' INT TERM
	command -v conmon >/dev/null || install_debs conmon
	command -v runc >/dev/null || install_debs runc
	command -v jq >/dev/null || install_debs jq
	CONMON=$(command -v conmon)
	OCICNITOOL=$E2E_CACHE/bin-$(keyhash)/ocicnitool
	(cd "$REPO" && go build -o "$OCICNITOOL" ./cmd/ocicnitool) || die "building ocicnitool failed"
	check_host_free
	mkdir -p "$W/bin"
	make_runc
	write_configs
	make_pause_image
	if [[ " $* " == *" critest "* ]]; then
		build_critest
		critest_images --root "$W/root" --runroot "$W/runroot" --storage-driver vfs
	fi
	start_crio
	local phase
	for phase in "$@"; do "phase_$phase"; done
	stop_crio TERM
	[[ -z ${HEAL_OUTCOME:-} ]] || log "heal: $HEAL_OUTCOME"
	log "figures: pods run $PODS_RUN, IPs checked $IPS_CHECKED, kills $KILLS, leftovers $LEFTOVERS, total $(($(date +%s) - T0))s"
	((LEFTOVERS == 0)) || die "leftovers"
	log "PASS"
}
