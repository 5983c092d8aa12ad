# shellcheck shell=bash
# Sourced by run.sh for modes all, run and control: runs containerd (built
# against our pkg/gocni, or stock for the control) and drives it with
# crictl. Uses BIN, PLUGINS and CRICTL_BIN from run.sh's build_bins or
# build_stock_bins, and the pod, network and leftover helpers of
# test/e2e/lib/common.sh.

NET=ocicni-e2ec
BRIDGE=${E2E_BRIDGE:-cni-e2ec0}
SUBNET=${E2E_SUBNET:-10.99.2.0/24}
# The fault phases' network: bridge + host-local + the faultplug script
# plugin, on a bridge and subnet of its own.
HNET=ocicni-e2ech
HBRIDGE=${E2E_HEAL_BRIDGE:-cni-e2ech0}
HSUBNET=${E2E_HEAL_SUBNET:-10.99.3.0/24}
CNI_CACHE=/var/lib/cni # containerd passes no cache dir: libcni's default
PAUSE_IMAGE=localhost/ocicni-pause:e2e
NPODS=${NPODS:-20}
NPAR=${NPAR:-10}
PODS_RUN=0
IPS_CHECKED=0
KILLS=0
LEFTOVERS=0
ALL_IDS=()
# shellcheck disable=SC2034 # read by common.sh's assert_clean
LEFTOVER_KINDS="reservations, veths, cache entries, order records, netns"
PHASE_TIMES=()
STARTS=0
CTRD_PID=
HEAL_OUTCOME=
ADDFAIL_OUTCOME=
PHASES=(single churn parallel crash noconf critest heal addfail)
# CONTROL is set while the control runs (control.sh): stock go-cni writes
# no order records, so the checks of them are skipped, and a failure ends
# only its phase.
CONTROL=

crictl() {
	"$CRICTL_BIN" --runtime-endpoint "unix://$W/containerd.sock" \
		--image-endpoint "unix://$W/containerd.sock" --timeout 60s "$@" 2>>"$W/crictl.log"
}
ctr() { "$BIN/ctr" --address "$W/containerd.sock" -n k8s.io "$@"; }
# ctr_import file: an image archive into the k8s.io namespace, unpacked for
# the native snapshotter; ctr's output goes to ctr.log.
ctr_import() { ctr images import --local --snapshotter native "$1" >>"$W/ctr.log" 2>&1; }
cleanup() {
	local rc=$?
	cleanup_begin "$rc" containerd.log 30
	stop_containerd KILL
	# The shims (one per pod), then the containers runc started.
	# Their sockets under /run/containerd/s are found through the shims'
	# fds before the kill, and removed after it.
	local pid ino f socks=()
	for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $W/containerd.sock" 2>/dev/null); do
		for ino in $(find "/proc/$pid/fd" -lname 'socket:*' -printf '%l\n' 2>/dev/null | tr -dc '0-9\n'); do
			while read -r f; do socks+=("$f"); done < <(awk -v i="$ino" '$7 == i && $8 ~ "^/run/containerd/s/" {print $8}' /proc/net/unix)
		done
		kill -KILL "$pid" 2>/dev/null
	done
	((${#socks[@]} == 0)) || rm -f "${socks[@]}"
	kill_runc_containers runc "$W/runc/k8s.io"
	critest_host_undo
	remove_net_state
	cleanup_end "$rc"
}

start_containerd() {
	log "starting containerd"
	# TMPDIR: the face's private conf dirs (os.MkdirTemp) land in $W/tmp,
	# where they are counted at the end and removed with $W.
	TMPDIR=$W/tmp PATH=$BIN:$PATH "$BIN/containerd" --config "$W/config.toml" >>"$W/containerd.log" 2>&1 &
	CTRD_PID=$!
	# The control's phases run in subshells, which may stop this
	# containerd and start the next: out of the job table, its end is not
	# reported as a job's ("Killed"); stop_containerd polls for it.
	[[ -z $CONTROL ]] || disown "$CTRD_PID"
	STARTS=$((STARTS + 1))
	wait_daemon "$CTRD_PID" "$W/containerd.log" containerd network_ready
	log "containerd (pid $CTRD_PID) is ready, network ready"
}

# stop_containerd [signal]: signals containerd and waits until it is gone.
# A containerd that a control phase's subshell started is not this
# shell's child (wait returns at once): it is polled, 30 s at most, then
# killed.
stop_containerd() {
	local sig=${1:-TERM} i
	[[ -n ${CTRD_PID:-} ]] || return 0
	kill -"$sig" "$CTRD_PID" 2>/dev/null
	wait "$CTRD_PID" 2>/dev/null || true
	for i in $(seq 1 300); do
		ctrd_alive || break
		((i < 300)) || kill -KILL "$CTRD_PID" 2>/dev/null
		sleep 0.1
	done
	CTRD_PID=
}

# ctrd_alive: containerd's process runs (a zombie, not yet reaped by
# init, does not).
ctrd_alive() {
	[[ -n ${CTRD_PID:-} ]] && kill -0 "$CTRD_PID" 2>/dev/null &&
		[[ $(awk '{print $3}' "/proc/$CTRD_PID/stat" 2>/dev/null) != Z ]]
}

# wait_network_ready [false]: until crictl info reports NetworkReady
# (or, with false, not ready), 30 s at most.
wait_network_ready() {
	local want=${1:-true} i
	for i in $(seq 1 60); do
		crictl info 2>/dev/null | jq -e ".status.conditions[] | select(.type==\"NetworkReady\") | .status == $want" >/dev/null &&
			return 0
		sleep 0.5
	done
	die "NetworkReady did not become $want in 30s"
}

write_configs() {
	mkdir -p "$W"/{cni,cni-bin,ipam,pods,root,state,runc,tmp}
	# restrict_oom_score_adj: runc cannot set the sandbox's oom_score_adj
	# -998 without CAP_SYS_RESOURCE, which this environment may lack;
	# containerd then clamps it to its own score instead (no runc wrapper).
	cat >"$W/config.toml" <<EOF
version = 3
root = "$W/root"
state = "$W/state"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.opt", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$W/containerd.sock"

[ttrpc]
  address = "$W/containerd.sock.ttrpc"

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "native"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "$PAUSE_IMAGE"

  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false
    restrict_oom_score_adj = $RESTRICT_OOM
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        snapshotter = "native"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "$RUNC"
          Root = "$W/runc"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["$PLUGINS", "$W/cni-bin"]
      conf_dir = "$W/cni"
      max_conf_num = 1

  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
EOF
	# portmap: containerd passes a pod's host ports to the plugins
	# (critest's host-port test).
	write_conflist "$W/cni/10-$NET.conflist" "$NET" "$BRIDGE" "$SUBNET" \
		'{ "type": "portmap", "capabilities": { "portMappings": true } }'
}

# make_runc: Debian's runc; containerd's restrict_oom_score_adj is set
# when this process cannot lower its own oom_score_adj.
make_runc() {
	RUNC=$(command -v runc)
	if (echo -998 >/proc/self/oom_score_adj) 2>/dev/null; then
		RESTRICT_OOM=false
		log "runc: $RUNC (oom_score_adj -998 allowed)"
	else
		RESTRICT_OOM=true
		log "runc: $RUNC; oom_score_adj -998 not allowed here: restrict_oom_score_adj = true"
	fi
}

# make_pause_image: a static pause binary as a one-layer OCI image
# (oci_image), imported with ctr into
# containerd's k8s.io namespace and unpacked for the native snapshotter;
# there is no registry.
make_pause_image() {
	mkdir -p "$W/pause-root"
	build_pause "$W/pause-root/pause"
	oci_image "$W/pause-root" "$PAUSE_IMAGE" '{"Cmd":["/pause"]}' "$W/pause.tar"
	ctr images import --local --snapshotter native "$W/pause.tar" >>"$W/ctr.log" 2>&1 ||
		{ cat "$W/ctr.log" >&2; die "ctr images import of the pause image failed"; }
	crictl images -q "$PAUSE_IMAGE" | grep -q . || die "the CRI plugin does not list $PAUSE_IMAGE"
	log "pause image $PAUSE_IMAGE imported (manifest sha256:${OCI_MANIFEST:0:12}), unpacked for native"
}

# leftover_kinds: what is left, by kind, as "r v c o n": host-local
# reservations and libcni cache entries of both networks, veths on both
# bridges, order records of every pod run, pinned netns; each kind is
# logged when not zero. The control counts no order records (o is 0):
# stock go-cni writes none.
leftover_kinds() {
	local r v c o n
	read -r r v c o < <(net_leftovers "${CONTROL:+no-orders}")
	n=$(find "$W/state" -path '*/netns/*' 2>/dev/null | wc -l)
	((n == 0)) || log "leftover netns: $(find "$W/state" -path '*/netns/*' | tr '\n' ' ')"
	echo "$r $v $c $o $n"
}

count_leftovers() {
	local r v c o n
	read -r r v c o n < <(leftover_kinds)
	echo $((r + v + c + o + n))
}

# phase_single: one pod, end to end.
phase_single() {
	local id
	log "phase single: runp, IP inside the netns, stopp + rmp"
	run_pod "single-1"
	id=$POD_ID
	check_pod_ip "$id"
	[[ -e $CNI_CACHE/results/$NET-$id-eth0 ]] || die "single: no libcni cache entry $NET-$id-eth0"
	[[ -n $CONTROL || -e $CNI_CACHE/ocicni/attachments/$id ]] || die "single: no order record for $id"
	log "single: pod ${id:0:12} has $(pod_ip "$id") in $(pod_netns "$id"), cache entry$([[ -n $CONTROL ]] || echo " and order record")"
	stop_rm_pod "$id"
	assert_clean "single"
}

# phase_critest: cri-tools' critest, focused on the tests that touch pod
# networking (CRITEST_FOCUS; "." runs the whole suite), one at a time,
# against this containerd, with its images imported first. Every test
# must pass, and leave nothing behind.
phase_critest() {
	log "phase critest: critest $CRITEST_VERSION, the tests of pod networking"
	critest_oci_images ctr_import
	local rc=0
	run_critest "unix://$W/containerd.sock" || rc=$?
	critest_phase_result "$rc" || die "critest: failed (its log: $W/critest.log)"
	assert_clean "critest"
}

# phase_critest_bench: critest's pod benchmark (run_critest_bench)
# against this containerd; not among PHASES (run.sh run critest_bench,
# run.sh control critest_bench).
phase_critest_bench() {
	log "phase critest_bench: critest $CRITEST_VERSION -benchmark, the PodSandbox lifecycle"
	run_critest_bench "unix://$W/containerd.sock"
	assert_clean "critest_bench"
}

# phase_parallel: NPAR runp at once, then NPAR stopp+rmp at once.
phase_parallel() {
	local i id pids=() ids=() nips
	log "phase parallel: $NPAR parallel runp, then parallel stopp+rmp"
	for i in $(seq 1 "$NPAR"); do
		(crictl runp "$(pod_config "par-$i" "uid-par-$i")" >"$W/pods/par-$i.id") &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do wait "${pids[$i]}" || die "parallel: runp par-$((i + 1)) failed: $(crictl_err)"; done
	for i in $(seq 1 "$NPAR"); do
		id=$(<"$W/pods/par-$i.id")
		[[ $id =~ ^[0-9a-f]{64}$ ]] || die "parallel: runp par-$i printed '$id'"
		ids+=("$id")
		ALL_IDS+=("$id")
		PODS_RUN=$((PODS_RUN + 1))
	done
	for id in "${ids[@]}"; do check_pod_ip "$id"; done
	nips=$(for id in "${ids[@]}"; do pod_ip "$id"; done | sort -u | wc -l)
	((nips == NPAR)) || die "parallel: $nips distinct IPs for $NPAR pods"
	pids=()
	for id in "${ids[@]}"; do
		(crictl stopp "$id" >/dev/null && crictl rmp "$id" >/dev/null) &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do wait "${pids[$i]}" || die "parallel: stopp+rmp of ${ids[$i]} failed: $(crictl_err)"; done
	assert_clean "parallel"
}

# phase_crash: SIGKILL containerd with pods running. Live pods keep their
# IPs across the restart; pods whose pause process died while containerd
# was down are torn down by stopp/rmp after the restart.
phase_crash() {
	local id
	log "phase crash: 4 live + 2 stale pods, SIGKILL containerd"
	crash_pods
	stop_containerd KILL
	KILLS=$((KILLS + 1))
	log "containerd killed with SIGKILL; killing the pause processes of the 2 stale pods"
	for id in "${CRASH_STALE[@]}"; do
		runc --root "$W/runc/k8s.io" kill "$id" KILL 2>/dev/null || die "runc kill $id failed"
	done
	sleep 1
	start_containerd
	crash_check 21
}

# phase_noconf: remove the conflist, stopp a pod: teardown must use the
# config cached at ADD, releasing the reservation.
phase_noconf() {
	local id ip
	log "phase noconf: stopp with the conflist removed"
	run_pod "noconf-1"
	id=$POD_ID
	check_pod_ip "$id"
	ip=$(pod_ip "$id")
	[[ -e $W/ipam/$NET/$ip ]] || die "noconf: no reservation for $ip"
	mv "$W/cni/10-$NET.conflist" "$W/10-$NET.conflist.away"
	wait_network_ready false
	crictl stopp "$id" >/dev/null || die "noconf: stopp without the conflist failed: $(crictl_err)"
	[[ ! -e $W/ipam/$NET/$ip ]] || die "noconf: reservation $ip not released without the conflist"
	log "noconf: reservation $ip released from the cached config"
	crictl rmp "$id" >/dev/null || die "crictl rmp $id failed: $(crictl_err)"
	mv "$W/10-$NET.conflist.away" "$W/cni/10-$NET.conflist"
	wait_network_ready true
	assert_clean "noconf"
}

# write_fault_network: the fault phases' conflist (bridge + host-local,
# then faultplug) replaces the main one (max_conf_num 1; containerd
# reloads on the change), and the faultplug plugin (write_fault_plugin)
# in $W/cni-bin. faultplug passes prevResult through on ADD; its ADD fails
# with code 11 while $W/add.fault exists, its DEL while $W/del.fault
# exists. One line per call to $W/faultplug.log: "<unix time> <command>
# <container id> <outcome>".
write_fault_network() {
	write_fault_plugin "$W/cni-bin/faultplug" "$W/del.fault" "del fault" "$W/add.fault"
	mv "$W/cni/10-$NET.conflist" "$W/10-$NET.conflist.away"
	write_conflist "$W/cni/10-$HNET.conflist" "$HNET" "$HBRIDGE" "$HSUBNET" faultplug
	# Wait for containerd's syncer to load it: a probe pod must land in HSUBNET.
	local i ip
	for i in $(seq 1 20); do
		run_pod "fault-probe-$i"
		ip=$(pod_ip "$POD_ID")
		stop_rm_pod "$POD_ID"
		[[ $ip == "${HSUBNET%.*}."* ]] && break
		sleep 0.5
	done
	[[ $ip == "${HSUBNET%.*}."* ]] || die "containerd did not load $HNET"
	log "fault network $HNET loaded (probe pod got $ip)"
}

restore_main_network() {
	rm -f "$W/cni/10-$HNET.conflist"
	mv "$W/10-$NET.conflist.away" "$W/cni/10-$NET.conflist"
	wait_network_ready true
}

# heal_state id ip veth: what is left of a pod's fault-network attachment,
# as "$STATE_KINDS": "r v c o" (reservation, veth, cache entry, order
# record; 1 = there), or "r v c" in the control (no order records).
STATE_KINDS="r v c o"
heal_state() {
	local r=0 v=0 c=0 o=0
	[[ -n $2 && -e $W/ipam/$HNET/$2 ]] && r=1
	[[ -n $3 ]] && ip link show "$3" >/dev/null 2>&1 && v=1
	[[ -e $CNI_CACHE/results/$HNET-$1-eth0 ]] && c=1
	if [[ -n $CONTROL ]]; then
		echo "$r $v $c"
		return
	fi
	[[ -e $CNI_CACHE/ocicni/attachments/$1 ]] && o=1
	echo "$r $v $c $o"
}

# state_all bit: heal_state's answer with every kind at bit.
state_all() { echo "${STATE_KINDS//[a-z]/$1}"; }

# fault_fail id msg: dies with the evidence (in the control, where this is
# the expected outcome, only the plugin's calls for the sandbox).
fault_fail() {
	if [[ -n $CONTROL ]]; then
		log "faultplug calls for ${1:0:12}: $(awk -v id="$1" '$3 == id {printf "%s%s %s", sep, $2, $4; sep = ", "}' "$W/faultplug.log" 2>/dev/null)"
		die "$2"
	fi
	log "containerd.log (last 40 lines):"
	tail -40 "$W/containerd.log" >&2
	log "faultplug calls ($W/faultplug.log):"
	cat "$W/faultplug.log" >&2 2>/dev/null
	log "order record $CNI_CACHE/ocicni/attachments/$1:"
	cat "$CNI_CACHE/ocicni/attachments/$1" >&2 2>/dev/null || echo "(none)" >&2
	echo >&2
	die "$2"
}

# wait_healed id ip veth phase t_last: no CRI call; everything of the
# attachment must go within E2E_HEAL_WAIT (60) s, by a DEL after t_last.
wait_healed() {
	local id=$1 ip=$2 veth=$3 phase=$4 t_last=$5 wait=${E2E_HEAL_WAIT:-60} i state t0 t1 ndel pid=$CTRD_PID none
	none=$(state_all 0)
	t0=$(date +%s.%N)
	state=$(heal_state "$id" "$ip" "$veth")
	for i in $(seq 1 $((wait * 4))); do
		[[ $state == "$none" ]] && break
		kill -0 "$pid" 2>/dev/null || fault_fail "$id" "$phase: containerd (pid $pid) exited while healing"
		sleep 0.25
		state=$(heal_state "$id" "$ip" "$veth")
	done
	t1=$(date +%s.%N)
	[[ $state == "$none" ]] || fault_fail "$id" "$phase: not healed ${wait}s after the fault cleared ($STATE_KINDS: $state)"
	ndel=$(awk -v t="$t_last" -v id="$id" '$2 == "DEL" && $3 == id && $4 == "ok" && $1 > t' "$W/faultplug.log" | wc -l)
	((ndel > 0)) || fault_fail "$id" "$phase: healed, but faultplug logged no successful DEL after the last crictl call"
	HEALED_IN=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
	log "$phase: healed ${HEALED_IN}s after the fault cleared by $ndel DEL(s), no CRI call; DELs: $(awk -v id="$id" \
		'$2 == "DEL" && $3 == id {printf "%s%s", sep, $4; sep = ", "}' "$W/faultplug.log")"
}

# phase_heal: a chained plugin's DEL fails while a file exists; crictl
# stopp is tried E2E_HEAL_STOPS (3) times; the fault is cleared; then,
# without any CRI call, the reservation, veth, cache entry and order
# record must go within 60 s (the engine's background retries).
phase_heal() {
	local stops=${E2E_HEAL_STOPS:-3} i rc fails=0 id ip veth t_last err
	log "phase heal: a DEL that fails while a fault lasts, finished in the background"
	write_fault_network
	run_pod "heal-1"
	id=$POD_ID
	check_pod_ip "$id" "$HSUBNET"
	ip=$(pod_ip "$id")
	veth=$(veths_on "$HBRIDGE")
	[[ -n $veth && $veth != *$'\n'* ]] || fault_fail "$id" "heal: not exactly one veth on $HBRIDGE: '$veth'"
	[[ $(heal_state "$id" "$ip" "$veth") == "$(state_all 1)" ]] ||
		fault_fail "$id" "heal: attachment incomplete ($STATE_KINDS): $(heal_state "$id" "$ip" "$veth")"
	touch "$W/del.fault"
	for i in $(seq 1 "$stops"); do
		rc=0
		crictl stopp "$id" >/dev/null || rc=$?
		t_last=$(date +%s.%N)
		if ((rc != 0)); then
			fails=$((fails + 1))
			err=$(crictl_err)
			log "heal: stopp $i/$stops failed as it must (exit $rc): $err"
			((i == stops)) || sleep 1
			continue
		fi
		grep -q " DEL $id error-11\$" "$W/faultplug.log" || fault_fail "$id" "heal: stopp $i succeeded but no DEL has failed"
		log "heal: stopp $i succeeded after a failed DEL"
		break
	done
	grep -q " DEL $id error-11\$" "$W/faultplug.log" || fault_fail "$id" "heal: no DEL of the pod failed"
	# The pending retry is the engine's; stock go-cni keeps none.
	[[ -n $CONTROL ]] || grep -q '"heal"' "$CNI_CACHE/ocicni/attachments/$id" 2>/dev/null ||
		fault_fail "$id" "heal: the order record holds no pending retry after the failed teardown"
	rm -f "$W/del.fault"
	log "heal: stopp failed $fails/$stops times; fault cleared; no CRI call now"
	HEAL_OUTCOME="stopp failed $fails/$stops times${err:+: $err}"
	wait_healed "$id" "$ip" "$veth" heal "$t_last"
	HEAL_OUTCOME="stopp failed $fails/$stops times; healed in ${HEALED_IN}s"
	crictl stopp "$id" >/dev/null || fault_fail "$id" "heal: stopp after healing failed"
	crictl rmp "$id" >/dev/null || fault_fail "$id" "heal: rmp after healing failed"
	restore_main_network
	assert_clean "heal"
}

# phase_addfail: containerd#12130's sequence: a chained plugin's ADD
# fails after host-local allocated, and the DELs that follow (the face's
# rollback, containerd's own teardown) fail too. runp must fail; once the
# fault is cleared, the attachment must go within 60 s with no CRI call.
phase_addfail() {
	local rc=0 id out t_last ip
	log "phase addfail: failed ADD in the chain, then failing DELs (containerd#12130)"
	write_fault_network
	touch "$W/add.fault" "$W/del.fault"
	out=$(crictl runp "$(pod_config "addfail-1" "uid-addfail-1")") || rc=$?
	t_last=$(date +%s.%N)
	((rc != 0)) || fault_fail "${out:-none}" "addfail: runp succeeded with the ADD fault set"
	ADDFAIL_OUTCOME="runp failed: $(crictl_err)"
	log "addfail: runp failed as it must: $(crictl_err | cut -c1-300)"
	id=$(awk '$2 == "ADD" && $4 == "error-11" {print $3}' "$W/faultplug.log" | tail -1)
	[[ $id =~ ^[0-9a-f]{64}$ ]] || fault_fail none "addfail: faultplug logged no failed ADD"
	ALL_IDS+=("$id")
	grep -q " DEL $id error-11\$" "$W/faultplug.log" || fault_fail "$id" "addfail: no DEL of the sandbox failed"
	ip=$(reservations "$HNET" | head -1)
	log "addfail: sandbox ${id:0:12}: DELs failed $(grep -c " DEL $id error-11\$" "$W/faultplug.log") time(s); left ($STATE_KINDS): $(heal_state "$id" "$ip" "")${ip:+, reservation $ip}"
	crictl pods -q | grep -q . && fault_fail "$id" "addfail: containerd lists a sandbox after the failed runp"
	rm -f "$W/add.fault" "$W/del.fault"
	log "addfail: faults cleared; no CRI call now"
	wait_healed "$id" "$ip" "" addfail "$t_last"
	ADDFAIL_OUTCOME="healed in ${HEALED_IN}s"
	restore_main_network
	assert_clean "addfail"
}

# check_face_confdirs: a pkg/gocni face hands its networks to the engine
# in memory and writes no conf dir, so after the phases (several
# containerd starts and a SIGTERM stop) nothing of it is left in
# containerd's TMPDIR: neither the face dirs that older faces kept under
# $TMPDIR/ocicni-gocni-<uid>/ nor the gocni-* temporary dirs before them.
check_face_confdirs() {
	local n
	n=$(find "$W/tmp" -mindepth 1 -maxdepth 1 \( -name 'ocicni-gocni-*' -o -name 'gocni-*' \) | wc -l)
	FACE_CONFDIRS=$n
	log "face conf dirs left after $STARTS containerd start(s) and a SIGTERM stop: $n"
	((n == 0)) || die "a gocni face wrote a conf dir: $n left after $STARTS starts"
}

# check_phases phase...: each one names a phase.
check_phases() {
	local p
	for p; do
		declare -F "phase_$p" >/dev/null || die "no phase '$p' (phases: ${PHASES[*]})"
	done
}

# e2e_setup: the work dir $W and its cleanup trap, the tools, the configs,
# containerd and the pause image; the same for the face and the control.
e2e_setup() {
	[[ $(id -u) == 0 ]] || die "run as root"
	W=$(mktemp -d /tmp/ocicni-e2e-ctrd.XXXXXX)
	trap cleanup EXIT
	trap 'exit 130' INT TERM
	command -v runc >/dev/null || install_debs runc
	command -v jq >/dev/null || install_debs jq
	command -v nsenter >/dev/null || install_debs util-linux
	command -v ip >/dev/null || install_debs iproute2
	check_host_free
	make_runc
	write_configs
	start_containerd
	make_pause_image
}

# run_e2e phase...: setup, containerd, then the phases named, in order
# (default: all); the first failure or leftover ends the run. With
# FACE_RESULTS set (mode all), one line per phase goes there for the
# control's table: "<phase><TAB><what the face did>".
run_e2e() {
	(($# > 0)) || set -- "${PHASES[@]}"
	check_phases "$@"
	e2e_setup
	local phase t rows=() healed
	for phase in "$@"; do
		t=$(date +%s)
		"phase_$phase"
		t=$(($(date +%s) - t))
		PHASE_TIMES+=("$phase ${t}s")
		healed=
		[[ $phase != heal && $phase != addfail ]] || healed="; healed ${HEALED_IN}s after the fault cleared, no CRI call"
		rows+=("$phase	passed, 0 left (${t}s)$healed")
	done
	stop_containerd TERM
	check_face_confdirs
	[[ -z ${HEAL_OUTCOME:-} ]] || log "heal: $HEAL_OUTCOME"
	[[ -z ${ADDFAIL_OUTCOME:-} ]] || log "addfail: $ADDFAIL_OUTCOME"
	log "phase times: ${PHASE_TIMES[*]}"
	log "figures: pods run $PODS_RUN, IPs checked $IPS_CHECKED, kills $KILLS, leftovers $LEFTOVERS, face conf dirs left ${FACE_CONFDIRS:-0}, total $(($(date +%s) - T0))s"
	((LEFTOVERS == 0)) || die "leftovers"
	log "PASS"
	[[ -z ${FACE_RESULTS:-} ]] || printf '%s\n' "${rows[@]}" >"$FACE_RESULTS"
}
