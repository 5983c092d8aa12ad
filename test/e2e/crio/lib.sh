# shellcheck shell=bash
# Sourced by run.sh: runs crio built against our pkg/ocicni and drives it
# with crictl. Uses BIN, PLUGINS, CRICTL_BIN from run.sh's build_all.

NET=ocicni-e2e
BRIDGE=${E2E_BRIDGE:-cni-e2e0}
SUBNET=${E2E_SUBNET:-10.99.0.0/24}
CNI_CACHE=/var/lib/cni # CRI-O calls InitCNI, which has no cache dir option
PAUSE_IMAGE=localhost/ocicni-pause:e2e
PODS_RUN=0
IPS_CHECKED=0
KILLS=0
LEFTOVERS=0
ALL_IDS=()

# crictl's stderr (config and cgroup_parent warnings) goes to crictl.log,
# shown with crio.log on failure.
crictl() {
	"$CRICTL_BIN" --config "$W/crictl.yaml" --runtime-endpoint "unix://$W/crio.sock" \
		--image-endpoint "unix://$W/crio.sock" --timeout 60s "$@" 2>>"$W/crictl.log"
}

cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	[[ -n ${W:-} && -d $W ]] || exit "$rc"
	log "cleanup (exit status $rc)"
	if ((rc != 0)); then
		log "last lines of crictl.log and crio.log:"
		tail -5 "$W/crictl.log" >&2
		tail -20 "$W/crio.log" >&2
	fi
	stop_crio KILL
	# Containers that conmon and runc started.
	if [[ -d $W/runc ]]; then
		local id
		for id in $(/usr/sbin/runc --root "$W/runc" list -q 2>/dev/null); do
			/usr/sbin/runc --root "$W/runc" kill "$id" KILL 2>/dev/null
			sleep 0.1
			/usr/sbin/runc --root "$W/runc" delete -f "$id" 2>/dev/null
		done
	fi
	local pid
	for pid in $(pgrep -f "conmon .*$W" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
	# Mounts (storage, shm, pinned namespaces), deepest first.
	awk -v w="$W" '$2 ~ "^"w {print $2}' /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done
	ip link del "$BRIDGE" 2>/dev/null
	local id
	for id in "${ALL_IDS[@]}" "${STALE_ID:-}"; do
		[[ -n $id ]] || continue
		rm -f "$CNI_CACHE"/results/*"$id"* "$CNI_CACHE/ocicni/attachments/$id"
	done
	rm -rf "$W"
	if ((rc != 0)); then log "FAILED (see the log lines above)"; fi
	exit "$rc"
}

start_crio() {
	log "starting crio"
	"$BIN/crio" --config "$W/crio.conf" --config-dir "$W/crio.conf.d" --log-level info \
		>>"$W/crio.log" 2>&1 &
	CRIO_PID=$!
	local i
	for i in $(seq 1 120); do
		if crictl info >/dev/null 2>&1 && crictl info 2>/dev/null | jq -e '.status.conditions[] | select(.type=="NetworkReady") | .status' >/dev/null; then
			if crictl info | jq -e '.status.conditions[] | select(.type=="NetworkReady") | .status == true' >/dev/null; then
				log "crio (pid $CRIO_PID) is ready, network ready"
				return 0
			fi
		fi
		kill -0 "$CRIO_PID" 2>/dev/null || { tail -30 "$W/crio.log" >&2; die "crio exited"; }
		sleep 0.5
	done
	tail -30 "$W/crio.log" >&2
	die "crio did not get ready in 60s"
}

stop_crio() {
	local sig=${1:-TERM}
	[[ -n ${CRIO_PID:-} ]] || return 0
	kill -"$sig" "$CRIO_PID" 2>/dev/null
	wait "$CRIO_PID" 2>/dev/null || true
	CRIO_PID=
}

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
	cat >"$W/cni/10-$NET.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$NET",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "dataDir": "$W/ipam",
        "ranges": [[{"subnet": "$SUBNET"}]]
      }
    }
  ]
}
EOF
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
	cat >"$W/pause.c" <<'EOF'
#include <signal.h>
#include <unistd.h>
static void bye(int s) { (void)s; _exit(0); }
int main(void) {
	signal(SIGTERM, bye);
	signal(SIGINT, bye);
	for (;;) pause();
}
EOF
	gcc -static -Os -o "$W/pause" "$W/pause.c" || die "building pause failed"
	c=$($b from scratch) || die "buildah from scratch failed"
	$b copy "$c" "$W/pause" /pause >/dev/null &&
		$b config --cmd /pause "$c" &&
		$b commit -q "$c" "$PAUSE_IMAGE" >/dev/null &&
		$b rm "$c" >/dev/null || die "buildah commit of the pause image failed"
	log "pause image $PAUSE_IMAGE committed to $W/root (vfs)"
}

pod_config() { # name uid -> file
	local f=$W/pods/$1.json
	cat >"$f" <<EOF
{"metadata":{"name":"$1","uid":"$2","namespace":"ocicni-e2e","attempt":0},
 "log_directory":"$W/logs/$1","linux":{"security_context":{"namespace_options":{"network":0}}}}
EOF
	echo "$f"
}

run_pod() { # name -> POD_ID (not in a subshell: it counts and records IDs)
	POD_ID=$(crictl runp "$(pod_config "$1" "uid-$1")") || die "crictl runp $1 failed (see $W/crio.log)"
	[[ $POD_ID =~ ^[0-9a-f]{64}$ ]] || die "crictl runp $1 printed '$POD_ID'"
	ALL_IDS+=("$POD_ID")
	PODS_RUN=$((PODS_RUN + 1))
}

pod_netns() { crictl inspectp "$1" | jq -r '.info.runtimeSpec.linux.namespaces[] | select(.type=="network") | .path'; }

check_pod_ip() { # id
	local ip ns
	ip=$(crictl inspectp "$1" | jq -r '.status.network.ip')
	[[ $ip == "${SUBNET%.*}."* ]] || die "pod $1 has IP '$ip', not one of $SUBNET"
	ns=$(pod_netns "$1")
	[[ -e $ns ]] || die "pod $1: netns '$ns' missing"
	nsenter --net="$ns" ip -4 -o addr show dev eth0 | grep -qw "inet $ip/24" ||
		die "pod $1: $ip not configured in $ns"
	IPS_CHECKED=$((IPS_CHECKED + 1))
}

stop_rm_pod() {
	crictl stopp "$1" >/dev/null || die "crictl stopp $1 failed"
	crictl rmp "$1" >/dev/null || die "crictl rmp $1 failed"
}

count_leftovers() {
	local n=0 k id
	k=$(find "$W/ipam/$NET" -type f ! -name 'last_reserved_ip.*' ! -name lock 2>/dev/null | wc -l)
	((k == 0)) || log "leftover host-local reservations: $(ls "$W/ipam/$NET")"
	n=$((n + k))
	k=$(ip -o link show master "$BRIDGE" 2>/dev/null | wc -l)
	((k == 0)) || log "leftover veths on $BRIDGE: $k"
	n=$((n + k))
	k=$(find "$CNI_CACHE/results" -name "$NET-*" 2>/dev/null | wc -l)
	((k == 0)) || log "leftover libcni cache entries: $k"
	n=$((n + k))
	k=0
	for id in "${ALL_IDS[@]}" "${STALE_ID:-}"; do
		[[ -n $id && -e $CNI_CACHE/ocicni/attachments/$id ]] && k=$((k + 1))
	done
	((k == 0)) || log "leftover order records: $k"
	n=$((n + k))
	echo "$n"
}

assert_clean() { # phase
	local n
	n=$(count_leftovers)
	LEFTOVERS=$((LEFTOVERS + n))
	((n == 0)) || die "$1: $n leftovers"
	log "$1: zero leftovers (reservations, veths, cache entries, order records)"
}

phase_churn() {
	local ids=() i id
	log "phase churn: $NPODS pod sandboxes"
	for i in $(seq 1 "$NPODS"); do
		run_pod "churn-$i"
		ids+=("$POD_ID")
	done
	for id in "${ids[@]}"; do check_pod_ip "$id"; done
	local nips
	nips=$(for id in "${ids[@]}"; do crictl inspectp "$id" | jq -r .status.network.ip; done | sort -u | wc -l)
	((nips == NPODS)) || die "churn: $nips distinct IPs for $NPODS pods"
	for id in "${ids[@]}"; do stop_rm_pod "$id"; done
	assert_clean "churn"
}

# phase_crash: SIGKILL crio with pods running. Live pods keep their
# network across the restart; pods whose infra container died while crio
# was down are stale and get torn down by stopp/rmp after the restart; an
# attachment of a container CRI-O never knew is collected by CRI-O's GC at
# startup (CNIManager.doGC -> our GCWithContext).
phase_crash() {
	local live=() stale=() i id ip before after
	log "phase crash: 4 live + 2 stale pods, SIGKILL crio"
	for i in 1 2 3 4; do
		run_pod "live-$i"
		live+=("$POD_ID")
	done
	for i in 1 2; do
		run_pod "stale-$i"
		stale+=("$POD_ID")
	done
	declare -A ipof
	for id in "${live[@]}" "${stale[@]}"; do
		check_pod_ip "$id"
		ipof[$id]=$(crictl inspectp "$id" | jq -r .status.network.ip)
	done
	make_unknown_attachment
	stop_crio KILL
	KILLS=$((KILLS + 1))
	log "crio killed with SIGKILL; killing the infra containers of the 2 stale pods"
	for id in "${stale[@]}"; do
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
	for id in "${live[@]}"; do
		ip=$(crictl inspectp "$id" | jq -r .status.network.ip)
		[[ $ip == "${ipof[$id]}" ]] || die "crash: live pod $id had ${ipof[$id]}, now '$ip'"
		check_pod_ip "$id"
	done
	log "crash: the 4 live pods kept their IPs and netns addresses"
	for id in "${stale[@]}"; do
		crictl inspectp "$id" | jq -e '.status.state == "SANDBOX_NOTREADY"' >/dev/null ||
			die "crash: stale pod $id is not NOTREADY after restart"
	done
	before=$(ip -o link show master "$BRIDGE" | wc -l)
	for id in "${stale[@]}"; do stop_rm_pod "$id"; done
	after=$(ip -o link show master "$BRIDGE" | wc -l)
	((before - after == 2)) || die "crash: stale pods' teardown removed $((before - after)) veths, not 2"
	log "crash: the 2 stale pods were torn down after restart"
	for id in "${live[@]}"; do stop_rm_pod "$id"; done
	assert_clean "crash"
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
	ip=$(crictl inspectp "$id" | jq -r .status.network.ip)
	[[ -e $W/ipam/$NET/$ip ]] || die "cached-config: no reservation for $ip"
	mv "$W/cni/10-$NET.conflist" "$W/10-$NET.conflist.away"
	sleep 1
	crictl stopp "$id" >/dev/null || die "cached-config: stopp without the conflist failed"
	[[ ! -e $W/ipam/$NET/$ip ]] || die "cached-config: reservation $ip not released without the conflist"
	log "cached-config: reservation $ip released from the cached config"
	mv "$W/10-$NET.conflist.away" "$W/cni/10-$NET.conflist"
	crictl rmp "$id" >/dev/null || die "crictl rmp $id failed"
	assert_clean "cached-config"
}

run_e2e() {
	[[ $(id -u) == 0 ]] || die "run as root"
	W=$(mktemp -d /tmp/ocicni-e2e-crio.XXXXXX)
	trap cleanup EXIT
	trap 'exit 130' INT TERM
	command -v conmon >/dev/null || install_debs conmon
	command -v runc >/dev/null || install_debs runc
	command -v jq >/dev/null || install_debs jq
	CONMON=$(command -v conmon)
	OCICNITOOL=$E2E_CACHE/bin-$(keyhash)/ocicnitool
	(cd "$REPO" && go build -o "$OCICNITOOL" ./cmd/ocicnitool) || die "building ocicnitool failed"
	ip link show "$BRIDGE" >/dev/null 2>&1 && die "bridge $BRIDGE exists already (another run?)"
	mkdir -p "$W/bin"
	make_runc
	write_configs
	make_pause_image
	start_crio
	phase_churn
	phase_crash
	phase_cached_config
	stop_crio TERM
	log "figures: pods run $PODS_RUN, IPs checked $IPS_CHECKED, kills $KILLS, leftovers $LEFTOVERS, total $(($(date +%s) - T0))s"
	((LEFTOVERS == 0)) || die "leftovers"
	log "PASS"
}
