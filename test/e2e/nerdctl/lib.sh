# shellcheck shell=bash
# Sourced by run.sh for modes all, run and control: runs containerd and
# drives nerdctl through the phases. Uses NBIN (nerdctl), CBIN
# (containerd, ctr, the runc shim) and PLUGINS from run.sh's build_bins or
# build_stock_bins, and the helpers of test/e2e/lib/common.sh.

# nerdctl's default network, "bridge", on a subnet of the harness's; and
# a network of ours whose chain ends with the fault plugin.
BRIDGE=nerdctl0
SUBNET=${E2E_SUBNET:-10.99.6.0/24}
GATEWAY=${SUBNET%.*}.1
HNET=ocicni-e2enh
HBRIDGE=${E2E_HEAL_BRIDGE:-cni-e2enh0}
HSUBNET=${E2E_HEAL_SUBNET:-10.99.7.0/24}
NET=bridge # common.sh's net_leftovers counts $NET's and $HNET's
CNI_CACHE=/var/lib/cni # nerdctl passes no cache dir: libcni's default
NS=e2e                 # nerdctl's namespace: its hooks' IDs are "$NS-<container ID>"
IMAGE=localhost/ocicni-busybox:e2e
NRUN=${NRUN:-30}
NRM=${NRM:-10}
PHASES=(run runrm heal kill addfail)
ALL_IDS=() # every container's hook ID ("$NS-<id>"), for the counts and the cleanup
CTRD_PID=
CONTROL=${CONTROL:-}
declare -A RESULT=() # phase -> "leftovers by kind" (the table's row)
# shellcheck disable=SC2034 # read by common.sh's assert_clean
LEFTOVER_KINDS="reservations, veths, cache entries, order records, iptables rules, containers"

check_phases() {
	local p
	for p in "$@"; do
		[[ " ${PHASES[*]} " == *" $p "* ]] || die "unknown phase '$p' (phases: ${PHASES[*]})"
	done
}

nerd() {
	"$NBIN/nerdctl" --address "$W/containerd.sock" --namespace "$NS" --data-root "$W/nerdctl" \
		--cni-path "$W/cni-bin" --cni-netconfpath "$W/cni" --snapshotter native \
		--bridge-ip "$GATEWAY/${SUBNET#*/}" "$@"
}

start_containerd() {
	log "starting containerd${CONTROL:+ (stock)}"
	PATH=$CBIN:$PATH "$CBIN/containerd" --config "$W/config.toml" >>"$W/containerd.log" 2>&1 &
	CTRD_PID=$!
	wait_daemon "$CTRD_PID" "$W/containerd.log" containerd ctr_up
	log "containerd (pid $CTRD_PID) is ready"
}

ctr_up() { "$CBIN/ctr" --address "$W/containerd.sock" version >/dev/null 2>&1; }

stop_containerd() { stop_pid CTRD_PID "$@"; }

# write_configs: containerd with its CRI plugin on an empty CNI conf dir:
# the face's containerd then runs one long-lived engine on the node's
# cache dir, which adopts the DEL retries that nerdctl's hooks leave. It
# runs them with its own plugin dirs: on a node both use /opt/cni/bin,
# here both use $W/cni-bin.
write_configs() {
	mkdir -p "$W"/{cni,cni-bin,ctrd-cni,ipam,nerdctl,root,state,runc,tmp}
	cat >"$W/config.toml" <<EOF
version = 3
root = "$W/root"
state = "$W/state"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$W/containerd.sock"

[ttrpc]
  address = "$W/containerd.sock.ttrpc"

[plugins]
  [plugins.'io.containerd.transfer.v1.local']
    [[plugins.'io.containerd.transfer.v1.local'.unpack_config]]
      platform = "linux/$(go env GOARCH)"
      snapshotter = "native"
  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["$W/cni-bin"]
      conf_dir = "$W/ctrd-cni"
  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
EOF
	# nerdctl takes one plugin dir: the reference plugins are linked in.
	ln -s "$PLUGINS"/* "$W/cni-bin/"
	write_fault_plugin "$W/cni-bin/faultplug" "$W/del.fault" "injected DEL fault" "$W/add.fault"
	cat >"$W/cni/$HNET.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$HNET",
  "nerdctlID": "$(printf '%s' "$HNET" | sha256sum | cut -c1-64)",
  "nerdctlLabels": {},
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$HBRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$W/ipam",
        "ranges": [[{"subnet": "$HSUBNET"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    { "type": "faultplug" }
  ]
}
EOF
}

# make_image: a one-layer OCI image of Debian's busybox-static (sh, ping,
# sleep, true as its applets; oci_image), loaded with
# nerdctl load; there is no registry.
make_image() {
	local r=$W/image-root a
	mkdir -p "$r/bin" "$r/etc" "$r/tmp" "$r/proc" "$r/sys" "$r/dev"
	cp /bin/busybox "$r/bin/busybox"
	for a in sh ping sleep true cat ip; do ln -s busybox "$r/bin/$a"; done
	oci_image "$r" "$IMAGE" '{"Cmd":["/bin/sh"],"Env":["PATH=/bin"]}' "$W/image.tar"
	nerd load -i "$W/image.tar" >>"$W/nerdctl.log" 2>&1 || { tail -5 "$W/nerdctl.log" >&2; die "nerdctl load of the image failed"; }
	nerd image inspect "$IMAGE" >/dev/null 2>&1 || die "nerdctl does not list $IMAGE"
	log "image $IMAGE loaded (busybox $(/bin/busybox | head -1 | awk '{print $2}'))"
}

# run_ctr args...: nerdctl run -d args, the container's full ID recorded;
# prints it.
run_ctr() {
	local id
	id=$(nerd run -d "$@" 2>>"$W/nerdctl.log") || { tail -1 "$W/nerdctl.log" >&2; return 1; }
	[[ $id =~ ^[0-9a-f]{64}$ ]] || { echo "nerdctl run printed '$id'" >&2; return 1; }
	printf '%s\n' "$id" >>"$W/ids"
	printf '%s\n' "$id"
}

# ctr_ip id: the container's IP on its first network.
ctr_ip() { nerd inspect "$1" | jq -r '.[0].NetworkSettings.IPAddress // empty'; }

# hook_ids: every container's hook ID so far.
hook_ids() { [[ -f $W/ids ]] && sed "s/^/$NS-/" "$W/ids" || true; }

# leftover_kinds: what is left, by kind, as "r v c o i m k": host-local
# reservations of both networks, veths on both bridges, libcni cache
# entries and order records of every container run, iptables rules that
# name one (filter table: i; nat table, the bridge plugin's masquerade:
# m), containers runc still has; each kind is logged when not zero. The
# control counts no order records: stock go-cni writes none.
leftover_kinds() {
	local r=0 v=0 c=0 o=0 i=0 m=0 k=0 n id br d
	for d in "$W/ipam/$HNET" "$CNI_CACHE/networks/bridge"; do
		n=$({ find "$d" -type f ! -name 'last_reserved_ip.*' ! -name lock 2>/dev/null || true; } | wc -l)
		((n == 0)) || log "leftover reservations in $d: $n"
		r=$((r + n))
	done
	for br in "$BRIDGE" "$HBRIDGE"; do
		n=$({ veths_on "$br" || true; } | wc -l)
		((n == 0)) || log "leftover veths on $br: $n"
		v=$((v + n))
	done
	while read -r id; do
		[[ -n $id ]] || continue
		n=$({ find "$CNI_CACHE/results" -name "*-$id-*" 2>/dev/null || true; } | wc -l)
		c=$((c + n))
		[[ -z $CONTROL && -e $CNI_CACHE/ocicni/attachments/$id ]] && o=$((o + 1))
		n=$({ iptables-save -t filter 2>/dev/null || true; } | grep -c -- "$id" || true)
		i=$((i + n))
		n=$({ iptables-save -t nat 2>/dev/null || true; } | grep -c -- "$id" || true)
		m=$((m + n))
	done < <(hook_ids)
	((c == 0)) || log "leftover cache entries: $c"
	((o == 0)) || log "leftover order records: $o"
	((i == 0)) || log "leftover iptables filter rules: $i"
	((m == 0)) || log "leftover iptables nat (masquerade) rules: $m"
	k=$({ runc --root "$W/runc/$NS" list -q 2>/dev/null || true; } | wc -l)
	((k == 0)) || log "leftover runc containers: $k"
	echo "$r $v $c $o $i $m $k"
}

# settle phase [masq-ok]: counts what the phase left; the face fails on
# any (with masq-ok, masquerade rules are the bridge plugin's: a DEL
# with no netns, which is all a DEL after the container's exit can pass,
# skips their removal; containernetworking/plugins#1078), the control
# records it for the table. Both then remove it for the next phase.
settle() {
	local r v c o i m k total
	read -r r v c o i m k < <(leftover_kinds)
	total=$((r + v + c + o + i + k))
	[[ ${2:-} == masq-ok ]] || total=$((total + m))
	RESULT[$1]="$r $v $c $o $i $m $k"
	if [[ -n $CONTROL ]]; then
		printf '%s %s\n' "$1" "${RESULT[$1]}" >>"$W/control.results"
		scrub
		return 0
	fi
	printf '%s %s\n' "$1" "${RESULT[$1]}" >>"${FACE_RESULTS:-/dev/null}"
	((total == 0)) || die "$1: $total leftovers"
	if ((m > 0)); then
		log "$1: zero leftovers but the bridge plugin's $m masquerade rules ($LEFTOVER_KINDS)"
		scrub
	else
		log "$1: zero leftovers ($LEFTOVER_KINDS)"
	fi
}

# scrub: removes what a control phase left, so that the next phase's
# count is its own.
scrub() {
	local id
	nerd rm -f $(nerd ps -aq 2>/dev/null) >/dev/null 2>&1 || true
	while read -r id; do
		[[ -n $id ]] || continue
		rm -f "$CNI_CACHE"/results/*"-$id-"* "$CNI_CACHE/ocicni/attachments/$id" "$CNI_CACHE/ocicni/locks/$id"
		iptables-save | grep -q -- "$id" && remove_rules "$id"
	done < <(hook_ids)
	for br in "$BRIDGE" "$HBRIDGE"; do
		for v in $(veths_on "$br" || true); do ip link del "$v" 2>/dev/null; done
	done
	find "$W/ipam/$HNET" "$CNI_CACHE/networks/bridge" -type f ! -name 'last_reserved_ip.*' ! -name lock -delete 2>/dev/null || true
}

cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	[[ -n ${W:-} && -d $W ]] || exit "$rc"
	log "cleanup (exit status $rc)"
	((rc == 0)) || { tail -20 "$W/nerdctl.log" >&2; tail -20 "$W/containerd.log" >&2; }
	nerd rm -f $(nerd ps -aq 2>/dev/null) >/dev/null 2>&1
	stop_containerd KILL
	pkill -KILL -f "containerd-shim-runc-v2 .*-address $W/containerd.sock" 2>/dev/null
	kill_runc_containers runc "$W/runc/$NS"
	scrub
	awk -v w="$W" '$2 ~ "^"w {print $2}' /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done
	ip link del "$BRIDGE" 2>/dev/null
	ip link del "$HBRIDGE" 2>/dev/null
	remove_bridge_rules "$BRIDGE" "$HBRIDGE"
	[[ -n ${E2E_KEEP:-} ]] || rm -rf "$W"
	((rc == 0)) || log "FAILED (see the log lines above)"
	exit "$rc"
}

# wait_clean phase secs: until the phase left nothing (a retry runs in
# the background), secs at most; the face fails after them.
wait_clean() {
	local end=$((SECONDS + $2)) r v c o i m k
	while ((SECONDS < end)); do
		read -r r v c o i m k < <(leftover_kinds 2>/dev/null)
		(((r + v + c + o + i + k) == 0)) && return 0
		sleep 1
	done
	return 0 # settle counts and judges
}

# phase_run: NRUN containers started at once on the default network, each
# pinging its gateway from inside, then nerdctl rm -f of all at once.
phase_run() {
	local i ids=() pids=() nips r v c o
	log "phase run: $NRUN containers at once, each pings $GATEWAY, then rm -f of all"
	: >"$W/run.ids"
	for i in $(seq 1 "$NRUN"); do
		(run_ctr --name "run-$i" "$IMAGE" sleep 3600 >>"$W/run.ids") &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do wait "${pids[$i]}" || die "run: nerdctl run of run-$((i + 1)) failed"; done
	mapfile -t ids <"$W/run.ids"
	((${#ids[@]} == NRUN)) || die "run: ${#ids[@]} containers, not $NRUN"
	for id in "${ids[@]}"; do
		nerd exec "$id" ping -c1 -W3 "$GATEWAY" >/dev/null 2>&1 || die "run: container ${id:0:12} cannot ping $GATEWAY"
	done
	nips=$(for id in "${ids[@]}"; do ctr_ip "$id"; done | sort -u | grep -c .)
	((nips == NRUN)) || die "run: $nips distinct IPs for $NRUN containers"
	log "run: $NRUN containers, $nips distinct IPs, each reached its gateway"
	# The counts see what the containers hold, so that their zero after
	# means something.
	read -r r v c o _ _ _ < <(leftover_kinds 2>/dev/null)
	((r >= NRUN && v >= NRUN && c >= NRUN)) || die "run: counted $r reservations, $v veths, $c cache entries for $NRUN containers"
	[[ -n $CONTROL ]] || ((o >= NRUN)) || die "run: counted $o order records for $NRUN containers"
	pids=()
	for id in "${ids[@]}"; do
		nerd rm -f "$id" >/dev/null 2>>"$W/nerdctl.log" &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do wait "${pids[$i]}" || die "run: rm -f of ${ids[$i]:0:12} failed"; done
	settle run
}

# phase_runrm: NRM containers with --rm, one after another, each pinging
# its gateway: hooks in quick succession.
phase_runrm() {
	local i
	log "phase runrm: $NRM run --rm, one after another"
	for i in $(seq 1 "$NRM"); do
		nerd run --rm --name "rm-$i" "$IMAGE" ping -c1 -W3 "$GATEWAY" >>"$W/nerdctl.log" 2>&1 ||
			die "runrm: run --rm $i failed"
	done
	settle runrm
}

# phase_heal: a container on the fault network; its DEL fails at
# postStop (rm -f) while the fault is on; once it clears, nothing is
# called again, and the network is released within 90 s.
phase_heal() {
	local id
	log "phase heal: DEL fails at postStop until the fault clears; no call follows"
	id=$(run_ctr --name heal --network "$HNET" "$IMAGE" sleep 3600) || die "heal: nerdctl run failed"
	[[ -n $(ctr_ip "$id") ]] || die "heal: no IP"
	touch "$W/del.fault"
	nerd rm -f "$id" >>"$W/nerdctl.log" 2>&1 || log "heal: rm -f returned an error (the DEL failed)"
	grep -q "DEL $NS-$id error-11" "$W/faultplug.log" || die "heal: the DEL did not fail"
	sleep 3 # the fault holds a while: a retry in this time fails too
	rm -f "$W/del.fault"
	log "heal: fault cleared; waiting, with no call, for the network to be released"
	wait_clean heal 90
	settle heal masq-ok
}

# phase_kill: three containers; kill -9 of one's process, then of
# containerd, a restart, and rm -f of all.
phase_kill() {
	local ids=() i pid
	log "phase kill: kill -9 of a container's process and of containerd, restart, rm -f"
	for i in 1 2 3; do
		ids+=("$(run_ctr --name "kill-$i" "$IMAGE" sleep 3600)") || die "kill: nerdctl run failed"
	done
	pid=$(nerd inspect "${ids[0]}" | jq -r '.[0].State.Pid')
	[[ $pid =~ ^[0-9]+$ ]] || die "kill: no pid for ${ids[0]}"
	kill -KILL "$pid"
	stop_containerd KILL
	start_containerd
	for id in "${ids[@]}"; do nerd rm -f "$id" >>"$W/nerdctl.log" 2>&1 || die "kill: rm -f ${id:0:12} failed"; done
	settle kill
}

# phase_addfail: ADD fails after IPAM on the fault network; nerdctl's
# deferred Remove must release it.
phase_addfail() {
	log "phase addfail: ADD fails after IPAM; the hook's deferred Remove"
	touch "$W/add.fault"
	if nerd run -d --name addfail --network "$HNET" "$IMAGE" sleep 3600 >>"$W/nerdctl.log" 2>&1; then
		rm -f "$W/add.fault"
		die "addfail: nerdctl run succeeded with the ADD fault on"
	fi
	rm -f "$W/add.fault"
	# The hook's ID is in the fault plugin's log: recorded for the counts.
	sed -n "s/^[^ ]* ADD $NS-\([0-9a-f]\{64\}\) error-11\$/\1/p" "$W/faultplug.log" | sort -u >>"$W/ids"
	grep -q "ADD $NS-[0-9a-f]* error-11" "$W/faultplug.log" || die "addfail: the ADD did not fail"
	nerd rm -f addfail >>"$W/nerdctl.log" 2>&1 || true
	settle addfail
}

# run_e2e [phase...]: the phases named (default: all) with the binaries
# of build_bins (or, with CONTROL set, build_stock_bins).
run_e2e() {
	local p phases=("$@")
	((${#phases[@]} > 0)) || phases=("${PHASES[@]}")
	[[ $(id -u) -eq 0 ]] || die "run as root"
	command -v jq >/dev/null || install_debs jq
	command -v runc >/dev/null || install_debs runc
	command -v iptables >/dev/null || install_debs iptables
	[[ -x /bin/busybox ]] || install_debs busybox-static
	W=$(mktemp -d /tmp/ocicni-e2e-nerd.XXXXXX)
	trap cleanup EXIT
	trap 'exit 130' INT TERM
	check_host_free
	write_configs
	start_containerd
	make_image
	for p in "${phases[@]}"; do
		if [[ -n $CONTROL ]]; then
			(PHASE=$p "phase_$p") || log "control: phase $p failed: $(cat "$W/phase.fail" 2>/dev/null)"
			grep -q "^$p " "$W/control.results" 2>/dev/null || settle "$p"
		else
			"phase_$p"
		fi
	done
	[[ -z $CONTROL ]] || cp "$W/control.results" "${CONTROL_RESULTS:-/dev/null}"
	log "${CONTROL:+control: }phases ${phases[*]} done"
}

# print_table: the face's and the control's leftovers by phase, from
# FACE_RESULTS and CONTROL_RESULTS ("phase r v c o i k" lines).
print_table() {
	local p f c
	printf '\n| Phase | face: r v c o i m k | stock: r v c o i m k |\n|---|---|---|\n'
	for p in "${PHASES[@]}"; do
		f=$(sed -n "s/^$p //p" "$FACE_RESULTS" | head -1)
		c=$(sed -n "s/^$p //p" "$CONTROL_RESULTS" | head -1)
		printf '| %s | %s | %s |\n' "$p" "${f:--}" "${c:--}"
	done
	printf '\nr reservations, v veths, c cache entries, o order records (face only), i iptables filter rules, m iptables nat (masquerade) rules, k runc containers\n'
}
