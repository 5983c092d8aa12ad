# shellcheck shell=bash
# Sourced by run.sh for modes run and control: runs a single-node Nomad
# agent (server and client) and drives it with the nomad CLI. Uses NBIN
# (nomad) and PLUGINS from run.sh, and the helpers of
# test/e2e/lib/common.sh.

# Nomad's bridge mode network: Nomad writes its conflist in memory
# (loopback, bridge, host-local with dataDir /var/run/cni, firewall,
# portmap; cniVersion 0.4.0), on the bridge and subnet given here.
BRIDGE=nomade2e
SUBNET=${E2E_SUBNET:-10.99.8.0/24}
# The cni/<name> network of the fault phases: bridge + host-local + the
# fault plugin, on a bridge and subnet of its own.
HNET=ocicni-e2enm
HBRIDGE=${E2E_HEAL_BRIDGE:-cni-e2enm0}
HSUBNET=${E2E_HEAL_SUBNET:-10.99.9.0/24}
CNI_CACHE=/var/lib/cni # Nomad passes no cache dir: libcni's default
BRIDGE_IPAM=/var/run/cni/nomad # host-local's store of Nomad's bridge network
HTTP_PORT=${E2E_NOMAD_PORT:-14646}
NCOUNT=${NCOUNT:-30}
PHASES=(bridge count addfail heal kill leak)
NLEAK=${NLEAK:-50}
# How far goroutines and fds may grow between the 10th and the last
# allocation of the leak phase: the agent's own background work.
LEAK_SLACK=${LEAK_SLACK:-10}
CONTROL=${CONTROL:-}
AGENT_PID=
# shellcheck disable=SC2034 # read by common.sh's assert_clean
LEFTOVER_KINDS="reservations, veths, cache entries, order records, netns, iptables rules"

check_phases() {
	local p
	for p in "$@"; do
		[[ " ${PHASES[*]} " == *" $p "* ]] || die "unknown phase '$p' (phases: ${PHASES[*]})"
	done
}

nomad() { NOMAD_ADDR=http://127.0.0.1:$HTTP_PORT "$NBIN/nomad" "$@"; }

write_configs() {
	mkdir -p "$W"/{cni,cni-bin,data,ipam,jobs}
	ln -s "$PLUGINS"/* "$W/cni-bin/"
	write_fault_plugin "$W/cni-bin/faultplug" "$W/del.fault" "injected DEL fault" "$W/add.fault"
	# The cloud fingerprinters are off: they would query metadata services
	# that are not there (and env_aws fails on AWS_CA_BUNDLE, which the
	# agent's environment drops too).
	cat >"$W/agent.hcl" <<EOF
data_dir = "$W/data"
bind_addr = "127.0.0.1"
advertise {
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}
ports {
  http = $HTTP_PORT
  rpc  = $((HTTP_PORT + 1))
  serf = $((HTTP_PORT + 2))
}
disable_update_check = true
enable_debug = true
server {
  enabled          = true
  bootstrap_expect = 1
}
client {
  enabled               = true
  cni_path              = "$W/cni-bin"
  cni_config_dir        = "$W/cni"
  bridge_network_name   = "$BRIDGE"
  bridge_network_subnet = "$SUBNET"
  options {
    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean,consul,vault"
  }
}
plugin "raw_exec" {
  config {
    enabled = true
  }
}
EOF
	write_conflist "$W/cni/$HNET.conflist" "$HNET" "$HBRIDGE" "$HSUBNET" faultplug
	echo ok >"$W/index.html"
}

start_agent() {
	log "starting the Nomad agent${CONTROL:+ (stock)}"
	env -u AWS_CA_BUNDLE "$NBIN/nomad" agent -config "$W/agent.hcl" >>"$W/agent.log" 2>&1 &
	AGENT_PID=$!
	wait_daemon "$AGENT_PID" "$W/agent.log" "the agent" node_ready
	log "agent (pid $AGENT_PID) is ready, its client node too"
}

node_ready() { nomad node status -json 2>/dev/null | jq -e '.[0].Status == "ready"' >/dev/null; }

stop_agent() { stop_pid AGENT_PID "$@"; }

# job name count network: a service job of count raw_exec tasks, each a
# busybox httpd on port 8080 of its allocation's network namespace;
# network "bridge" or "cni/<name>". Prints the job file.
job() {
	cat >"$W/jobs/$1.hcl" <<EOF
job "$1" {
  datacenters = ["dc1"]
  type        = "service"
  group "g" {
    count = $2
    network {
      mode = "$3"
      port "http" {
        to = 8080
      }
    }
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }
    task "httpd" {
      driver = "raw_exec"
      config {
        command = "/bin/busybox"
        args    = ["httpd", "-f", "-p", "8080", "-h", "$W"]
      }
    }
  }
}
EOF
	printf '%s\n' "$W/jobs/$1.hcl"
}

# alloc_ids job: the job's allocation IDs, recorded for the counts.
alloc_ids() {
	nomad job allocs -json "$1" | jq -r '.[].ID' | tee -a "$W/allocs"
}

# alloc_ip id: the allocation's address on its network.
alloc_ip() { nomad alloc status -json "$1" | jq -r '.NetworkStatus.Address // empty'; }

# running job n: until n allocations of the job run (0), or one of them
# failed or 120 s passed (1, with the job's status on stderr).
running() {
	local end=$((SECONDS + 120)) n failed
	while ((SECONDS < end)); do
		n=$(nomad job allocs -json "$1" 2>/dev/null | jq '[.[] | select(.ClientStatus == "running")] | length')
		((n == $2)) && return 0
		failed=$(nomad job allocs -json "$1" 2>/dev/null | jq '[.[] | select(.ClientStatus == "failed")] | length')
		((${failed:-0} == 0)) || break
		sleep 1
	done
	nomad job status "$1" >&2 || true
	log "$1: ${n:-0} of $2 allocations running, ${failed:-0} failed"
	return 1
}

# wait_running job n: running, or the run fails.
wait_running() { running "$@" || die "$1: not all $2 allocations running"; }

# leftover_kinds: what is left, by kind, as "r v c o n i": host-local
# reservations of both networks, veths on both bridges, libcni cache
# entries and order records of every allocation run, their pinned netns,
# iptables rules that name one. The control counts no order records.
leftover_kinds() {
	local r=0 v=0 c=0 o=0 n=0 i=0 k id br d
	for d in "$BRIDGE_IPAM" "$W/ipam/$HNET"; do
		k=$({ find "$d" -type f ! -name 'last_reserved_ip.*' ! -name lock 2>/dev/null || true; } | wc -l)
		((k == 0)) || log "leftover reservations in $d: $k"
		r=$((r + k))
	done
	for br in "$BRIDGE" "$HBRIDGE"; do
		k=$({ veths_on "$br" || true; } | wc -l)
		((k == 0)) || log "leftover veths on $br: $k"
		v=$((v + k))
	done
	while read -r id; do
		[[ -n $id ]] || continue
		k=$({ find "$CNI_CACHE/results" -name "*-$id-*" 2>/dev/null || true; } | wc -l)
		c=$((c + k))
		[[ -z $CONTROL && -e $CNI_CACHE/ocicni/attachments/$id ]] && o=$((o + 1))
		[[ -e /var/run/netns/$id ]] && n=$((n + 1))
		k=$({ iptables-save 2>/dev/null || true; } | grep -c -- "$id" || true)
		i=$((i + k))
	done < <(sort -u "$W/allocs" 2>/dev/null || true)
	((c == 0)) || log "leftover cache entries: $c"
	((o == 0)) || log "leftover order records: $o"
	((n == 0)) || log "leftover netns: $n"
	((i == 0)) || log "leftover iptables rules: $i"
	echo "$r $v $c $o $n $i"
}

# settle phase: the face fails on any leftover; the control records it.
settle() {
	local r v c o n i total
	read -r r v c o n i < <(leftover_kinds)
	total=$((r + v + c + o + n + i))
	printf '%s %s\n' "$1" "$r $v $c $o $n $i" >>"${RESULTS:-/dev/null}"
	if [[ -n $CONTROL ]]; then
		((total == 0)) || log "$1 (stock): $total leftovers, scrubbed"
		scrub
		return 0
	fi
	((total == 0)) || die "$1: $total leftovers"
	log "$1: zero leftovers ($LEFTOVER_KINDS)"
}

# stop_job job: nomad job stop -purge, then wait_stopped.
stop_job() {
	nomad job stop -purge "$1" >>"$W/nomad.log" 2>&1 || die "$1: job stop failed"
	wait_stopped
}

# wait_stopped: until no allocation run so far has its netns, 60 s at
# most.
wait_stopped() {
	local end=$((SECONDS + 60)) id live
	while ((SECONDS < end)); do
		live=0
		while read -r id; do
			[[ -n $id ]] || continue
			[[ -e /var/run/netns/$id ]] && live=$((live + 1))
		done < <(sort -u "$W/allocs")
		((live == 0)) && return 0
		sleep 1
	done
}

# phase_bridge: one bridge-mode job, its httpd answering at the
# allocation's IP from the host; then job stop -purge.
phase_bridge() {
	local id ip
	log "phase bridge: a bridge-mode job whose httpd answers at its allocation IP"
	nomad job run -detach "$(job web 1 bridge)" >>"$W/nomad.log" 2>&1 || die "bridge: job run failed"
	wait_running web 1
	id=$(alloc_ids web | head -1)
	ip=$(alloc_ip "$id")
	[[ -n $ip ]] || die "bridge: no address for allocation $id"
	wget -qO- -T 5 "http://$ip:8080/index.html" | grep -qx ok || die "bridge: httpd at $ip:8080 does not answer"
	[[ -n $CONTROL || -e $CNI_CACHE/ocicni/attachments/$id ]] || die "bridge: no order record for $id"
	log "bridge: allocation ${id:0:8} answers at $ip:8080"
	stop_job web
	settle bridge
}

# phase_count: NCOUNT allocations of one job started at once, each with
# its own IP; then stopped.
phase_count() {
	local ids nips r v c o n i
	log "phase count: count = $NCOUNT started at once, then stopped"
	nomad job run -detach "$(job many "$NCOUNT" bridge)" >>"$W/nomad.log" 2>&1 || die "count: job run failed"
	wait_running many "$NCOUNT"
	ids=$(alloc_ids many)
	nips=$(for id in $ids; do alloc_ip "$id"; done | sort -u | grep -c .)
	((nips == NCOUNT)) || die "count: $nips distinct IPs for $NCOUNT allocations"
	# The counts see what the allocations hold, so that their zero after
	# the stop means something.
	read -r r v c o n i < <(leftover_kinds 2>/dev/null)
	if ((r < NCOUNT || v < NCOUNT || c < NCOUNT || n < NCOUNT)) || { [[ -z $CONTROL ]] && ((o < NCOUNT)); }; then
		die "count: while $NCOUNT allocations run, the counts see only r v c o n = $r $v $c $o $n"
	fi
	log "count: $NCOUNT allocations, $nips distinct IPs; held: $r reservations, $v veths, $c cache entries, $o records, $n netns"
	stop_job many
	settle count
}

# phase_heal: a cni/<name> job whose DEL fails while the fault is on; the
# job is stopped (Nomad's Remove fails, and Nomad never calls again); the
# fault clears 3 s later and the network must be released within 60 s.
phase_heal() {
	local id end r v c o n i
	log "phase heal: DEL fails at stop until the fault clears; no call follows"
	nomad job run -detach "$(job heal 1 "cni/$HNET")" >>"$W/nomad.log" 2>&1 || die "heal: job run failed"
	wait_running heal 1
	id=$(alloc_ids heal | head -1)
	touch "$W/del.fault"
	stop_job heal
	grep -q "DEL $id error-11" "$W/faultplug.log" || die "heal: the DEL did not fail"
	sleep 3
	rm -f "$W/del.fault"
	log "heal: fault cleared; waiting, with no call, for the network to be released"
	end=$((SECONDS + 60))
	while ((SECONDS < end)); do
		read -r r v c o n i < <(leftover_kinds 2>/dev/null)
		(((r + v + c + o + n + i) == 0)) && break
		sleep 1
	done
	settle heal
}

# phase_addfail: a cni/<name> job whose chained plugin fails the first
# two ADDs after IPAM ran; Nomad retries Setup with no Remove between, the
# third ADD succeeds. One reservation while it runs, not three.
phase_addfail() {
	local id r
	log "phase addfail: ADD fails twice after IPAM, Nomad's third Setup succeeds"
	echo 2 >"$W/add.fault"
	nomad job run -detach "$(job addfail 1 "cni/$HNET")" >>"$W/nomad.log" 2>&1 || die "addfail: job run failed"
	if ! running addfail 1; then
		# Stock: the retried ADDs fail too (see the README).
		[[ -n $CONTROL ]] || die "addfail: the allocation does not run"
		rm -f "$W/add.fault"
		alloc_ids addfail >/dev/null
		printf 'addfail-running failed\n' >>"${RESULTS:-/dev/null}"
		stop_job addfail
		settle addfail
		return
	fi
	id=$(alloc_ids addfail | head -1)
	[[ ! -e $W/add.fault ]] || die "addfail: the ADD fault was not used up"
	(($(grep -c "ADD $id error-11" "$W/faultplug.log") == 2)) || die "addfail: $id did not fail its ADD twice"
	r=$({ find "$W/ipam/$HNET" -type f ! -name 'last_reserved_ip.*' ! -name lock 2>/dev/null || true; } | wc -l)
	printf 'addfail-running %s\n' "$r" >>"${RESULTS:-/dev/null}"
	[[ -n $CONTROL ]] || ((r == 1)) || die "addfail: $r reservations for one running allocation"
	log "addfail: ${id:0:8} runs after two failed ADDs, with $r reservation"
	stop_job addfail
	settle addfail
}

# restart_agent sig: the agent stopped with sig (TERM: a clean shutdown,
# which saves the client's state and leaves the tasks running; KILL),
# then a new one on the same data dir, which restores the allocations it
# finds there.
restart_agent() {
	stop_agent "$1"
	log "agent stopped (SIG$1); restarting it on the same data dir"
	start_agent
}

# check_restored ids...: after a restart, Nomad checked each allocation's
# network (CHECK, in the fault plugin's log, once per restart so far) and
# each still answers at its IP.
check_restored() {
	local id ip want=$1
	shift
	for id in "$@"; do
		wait_for 60 "kill: CHECK $want of $id" test "$(grep -c "CHECK $id ok" "$W/faultplug.log")" -ge "$want"
		ip=$(alloc_ip "$id")
		wait_for 30 "kill: ${id:0:8} answering at $ip after the restart" \
			sh -c "wget -qO- -T 5 'http://$ip:8080/index.html' | grep -qx ok"
	done
}

# phase_kill: three allocations; the agent restarted cleanly (Nomad saves
# an allocation's network status only at a clean shutdown or every 60 s,
# and a restored allocation whose status was not saved fails, "network
# already configured but not found in state", with the face and stock
# alike); then kill -9 of the agent and a restart: Nomad restores them and
# calls Check on each, and each still answers; then kill -9 again right
# after their job is stopped, and a restart that finishes the stop.
phase_kill() {
	local ids
	log "phase kill: kill -9 of the agent with allocations running, and while they stop"
	nomad job run -detach "$(job restore 3 "cni/$HNET")" >>"$W/nomad.log" 2>&1 || die "kill: job run failed"
	wait_running restore 3
	mapfile -t ids < <(alloc_ids restore)
	restart_agent TERM
	check_restored 1 "${ids[@]}"
	restart_agent KILL
	check_restored 2 "${ids[@]}"
	log "kill: the restored allocations were checked and answer, after a clean restart and after kill -9"
	nomad job stop -detach -purge restore >>"$W/nomad.log" 2>&1 || die "kill: job stop failed"
	restart_agent KILL
	wait_stopped
	settle kill
}

# goroutines: the agent's goroutine count, after a garbage collection.
goroutines() {
	curl -fsS -o /dev/null "http://127.0.0.1:$HTTP_PORT/debug/pprof/heap?gc=1"
	curl -fsS "http://127.0.0.1:$HTTP_PORT/debug/pprof/goroutine?debug=1" | sed -n 's/^goroutine profile: total //p'
}

# sample_agent n: after n allocations, the client's garbage collection of
# terminal allocations, then the agent's goroutines and open fds.
sample_agent() {
	curl -fsS -X PUT -o /dev/null "http://127.0.0.1:$HTTP_PORT/v1/client/gc"
	local g f
	g=$(goroutines)
	f=$(find "/proc/$AGENT_PID/fd" -mindepth 1 | wc -l)
	printf 'leak-%s %s %s\n' "$1" "$g" "$f" >>"${RESULTS:-/dev/null}"
	log "leak: after $1 allocations: $g goroutines, $f open fds"
	echo "$g $f"
}

# phase_leak: NLEAK allocations started and stopped one after another,
# each with an engine of its own that Nomad never shuts down. The agent's
# goroutines and fds after the last are within a small constant of those
# after the tenth.
phase_leak() {
	local i id g0 f0 g f
	log "phase leak: $NLEAK allocations one after another, goroutines and fds sampled"
	for i in $(seq 1 "$NLEAK"); do
		nomad job run -detach "$(job seq 1 bridge)" >>"$W/nomad.log" 2>&1 || die "leak: job run $i failed"
		wait_running seq 1
		id=$(nomad job allocs -json seq | jq -r '.[] | select(.ClientStatus == "running") | .ID')
		echo "$id" >>"$W/allocs"
		stop_job seq
		if ((i == 10)); then read -r g0 f0 < <(sample_agent "$i"); fi
	done
	read -r g f < <(sample_agent "$NLEAK")
	if [[ -z $CONTROL ]]; then
		((g - g0 <= LEAK_SLACK)) || die "leak: goroutines grew from $g0 to $g over $((NLEAK - 10)) allocations"
		((f - f0 <= LEAK_SLACK)) || die "leak: open fds grew from $f0 to $f over $((NLEAK - 10)) allocations"
	fi
	settle leak
}

# scrub: removes what the allocations run so far left, so that the next
# phase's count is its own (the control's phases leave things behind).
scrub() {
	local id br v
	while read -r id; do
		[[ -n $id ]] || continue
		rm -f "$CNI_CACHE"/results/*"-$id-"* "$CNI_CACHE/ocicni/attachments/$id" "$CNI_CACHE/ocicni/locks/$id"
		[[ -e /var/run/netns/$id ]] && ip netns del "$id" 2>/dev/null
		iptables-save | grep -q -- "$id" && remove_rules "$id"
	done < <(sort -u "$W/allocs" 2>/dev/null)
	for br in "$BRIDGE" "$HBRIDGE"; do
		for v in $(veths_on "$br" || true); do ip link del "$v" 2>/dev/null; done
	done
	find "$BRIDGE_IPAM" "$W/ipam/$HNET" -type f ! -name 'last_reserved_ip.*' ! -name lock -delete 2>/dev/null || true
}

# print_table: the face's and the control's counts per phase, from
# FACE_RESULTS and CONTROL_RESULTS ("phase r v c o n i" lines), then the
# addfail phase's reservations while its allocation ran, and the leak
# phase's samples.
print_table() {
	local p f c
	printf '\n| Phase | face: r v c o n i | stock: r v c o n i |\n|---|---|---|\n'
	for p in "${PHASES[@]}"; do
		f=$(sed -n "s/^$p //p" "$FACE_RESULTS" | head -1)
		c=$(sed -n "s/^$p //p" "$CONTROL_RESULTS" | head -1)
		printf '| %s | %s | %s |\n' "$p" "${f:--}" "${c:--}"
	done
	printf '\nr reservations, v veths, c cache entries, o order records (face only), n netns, i iptables rules naming an allocation\n\n'
	printf '| Sample | face | stock |\n|---|---|---|\n'
	for p in addfail-running leak-10 "leak-$NLEAK"; do
		f=$(sed -n "s/^$p //p" "$FACE_RESULTS" | head -1)
		c=$(sed -n "s/^$p //p" "$CONTROL_RESULTS" | head -1)
		printf '| %s | %s | %s |\n' "$p" "${f:--}" "${c:--}"
	done
	printf '\naddfail-running: reservations while the allocation ran after two failed ADDs; leak-n: goroutines and open fds of the agent after n allocations\n'
}

cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	[[ -n ${W:-} && -d $W ]] || exit "$rc"
	log "cleanup (exit status $rc)"
	((rc == 0)) || tail -30 "$W/agent.log" >&2
	for j in web many addfail heal restore seq; do nomad job stop -purge "$j" >/dev/null 2>&1; done
	sleep 2
	stop_agent KILL
	pkill -KILL -f "busybox httpd -f -p 8080 -h $W" 2>/dev/null
	awk -v w="$W" '$2 ~ "^"w {print $2}' /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done
	local id
	while read -r id; do
		[[ -n $id ]] || continue
		rm -f "$CNI_CACHE"/results/*"-$id-"* "$CNI_CACHE/ocicni/attachments/$id" "$CNI_CACHE/ocicni/locks/$id"
		[[ -e /var/run/netns/$id ]] && ip netns del "$id" 2>/dev/null
	done < <(sort -u "$W/allocs" 2>/dev/null)
	ip link del "$BRIDGE" 2>/dev/null
	ip link del "$HBRIDGE" 2>/dev/null
	remove_bridge_rules "$BRIDGE" "$HBRIDGE"
	# Nomad's own chain for its bridge network, made at the client's start.
	iptables -D CNI-FORWARD -m comment --comment "CNI firewall plugin admin overrides" -j NOMAD-ADMIN 2>/dev/null
	iptables -F NOMAD-ADMIN 2>/dev/null
	iptables -X NOMAD-ADMIN 2>/dev/null
	rm -rf "$BRIDGE_IPAM"
	[[ -n ${E2E_KEEP:-} ]] || rm -rf "$W"
	((rc == 0)) || log "FAILED (see the log lines above)"
	exit "$rc"
}

# run_e2e [phase...]: the phases named (default: all).
run_e2e() {
	local p phases=("$@")
	((${#phases[@]} > 0)) || phases=("${PHASES[@]}")
	[[ $(id -u) -eq 0 ]] || die "run as root"
	command -v jq >/dev/null || install_debs jq
	command -v iptables >/dev/null || install_debs iptables
	command -v curl >/dev/null || install_debs curl
	command -v wget >/dev/null || install_debs wget
	[[ -x /bin/busybox ]] || install_debs busybox-static
	W=$(mktemp -d /tmp/ocicni-e2e-nomad.XXXXXX)
	trap cleanup EXIT
	trap 'exit 130' INT TERM
	check_host_free
	write_configs
	start_agent
	for p in "${phases[@]}"; do "phase_$p"; done
	log "phases ${phases[*]} done"
}
