# shellcheck shell=bash
# Sourced by run.sh for modes all, run and control: runs buildkitd (built
# against our pkg/gocni, or stock for the control) with the OCI worker
# and drives it with buildctl, in both network modes. Uses BIN, GC_BIN
# and PLUGINS from run.sh's build_bins or build_stock_bins.
#
# BuildKit passes no option to the engine: libcni's cache, the engine's
# order records and (in bridge mode) host-local's data are at their
# default paths under /var/lib/cni. Only the entries of this test's
# networks and of BuildKit's sandbox IDs (25 base-36 characters; the CRI
# runtimes' are 64 hex digits) are counted, and removed before and after.

# cni mode: our conflist (bridge + host-local + faultplug, chained
# pass-through unless a fault file exists) plus go-cni's loopback network.
NET=ocicni-e2ebk
BRIDGE=${E2E_BRIDGE:-cni-e2ebk0}
SUBNET=${E2E_SUBNET:-10.99.7.0/24}
# bridge mode: BuildKit generates loopback + bridge (ipMasq) + firewall as
# network "buildkit", host-local at its default data dir; the firewall
# plugin is wrapped by a fault script (see write_fault_wrapper).
BKNET=buildkit
BKBRIDGE=${E2E_BK_BRIDGE:-cni-e2ebk1}
BKSUBNET=${E2E_BK_SUBNET:-10.99.8.0/24}
LONET=cni-loopback
CNI_CACHE=/var/lib/cni
RECORDS=$CNI_CACHE/ocicni/attachments
BKID='[0-9a-z]{25}'
NBUILDS=${NBUILDS:-6}
NPAR=${NPAR:-3}
POOL=${POOL:-3}
HEAL_WAIT=${E2E_HEAL_WAIT:-60}
# Every phase, as <mode>-<name>. gc is the face's only (gc.patch).
ALL_PHASES=(cni-churn cni-pool cni-crash cni-heal cni-healpool cni-addfail cni-gc
	bridge-churn bridge-pool bridge-crash bridge-heal bridge-healpool bridge-addfail bridge-gc)
PHASES=()
STEPS=0
KILLS=0
STARTS=0
LEFTOVERS=0
HEALED_IN=
# Per phase: a note for the table (what healed and how fast, what the
# unpatched run left in gc).
declare -A NOTE=()
CONTROL=
BK_MODE=
# shellcheck disable=SC2034 # read by common.sh's die
PHASE=

# select_phases arg...: PHASES from the arguments (default: all); a name
# without a mode prefix selects it in every mode.
select_phases() {
	local a p found
	(($# > 0)) || set -- "${ALL_PHASES[@]}"
	for a; do
		found=
		for p in "${ALL_PHASES[@]}"; do
			[[ $p == "$a" || ${p#*-} == "$a" ]] || continue
			PHASES+=("$p")
			found=1
		done
		[[ -n $found ]] || die "no phase '$a' (phases: ${ALL_PHASES[*]})"
	done
}

bctl() { "$BIN/buildctl" --addr "unix://$W/buildkitd.sock" "$@"; }

# mode_vars mode: the network, bridge, subnet, fault plugin log and
# host-local data dir of a network mode.
mode_vars() {
	BK_MODE=$1
	case $1 in
	cni)
		MBRIDGE=$BRIDGE MSUBNET=$SUBNET MIPAM=$W/ipam/$NET FAULTLOG=$W/faultplug.log IFACE=eth1
		;;
	bridge)
		MBRIDGE=$BKBRIDGE MSUBNET=$BKSUBNET MIPAM=$CNI_CACHE/networks/$BKNET FAULTLOG=$W/firewall.log IFACE=eth0
		;;
	esac
	GATEWAY=${MSUBNET%.*}.1
}

# write_bk_config mode pool: $W/buildkitd-<mode>.toml.
write_bk_config() {
	cat >"$W/buildkitd-$1.toml" <<EOF
root = "$W/root"
debug = true

[grpc]
  address = ["unix://$W/buildkitd.sock"]

[cdi]
  disabled = true

[worker.oci]
  enabled = true
  snapshotter = "native"
  binary = "$RUNC"
  gc = false
  networkMode = "$1"
  cniConfigPath = "$W/cni/$NET.conflist"
  cniBinaryPath = "$W/cni-bin-$1"
  cniPoolSize = $2
  bridgeName = "$BKBRIDGE"
  bridgeSubnet = "$BKSUBNET"

[worker.containerd]
  enabled = false
EOF
}

# write_fault_wrapper file real log: a CNI plugin that runs real, except
# that its ADD fails with code 11 while $W/add.fault exists and its DEL
# while $W/del.fault exists; one line per call to log, as
# write_fault_plugin's.
write_fault_wrapper() {
	cat >"$1" <<EOF
#!/bin/bash
# ${1##*/}: $2 with the e2e faults.
note() { printf '%s %s %s %s\n' "\$(date +%s.%N)" "\${CNI_COMMAND:-none}" "\${CNI_CONTAINERID:--}" "\$1" >>"$3"; }
cnierr() {
	printf '{"cniVersion":"1.0.0","code":11,"msg":"%s"}\n' "\$1"
	note error-11
	exit 1
}
case \${CNI_COMMAND:-} in
ADD) [[ -e $W/add.fault ]] && cnierr "add fault" ;;
DEL) [[ -e $W/del.fault ]] && cnierr "del fault" ;;
esac
rc=0
"$2" || rc=\$?
if ((rc == 0)); then note ok; else note "error-rc\$rc"; fi
exit \$rc
EOF
	chmod +x "$1"
	: >>"$3"
}

# write_configs: plugin dirs of both modes, the cni mode's conflist, both
# buildkitd.toml, the build context (a static busybox and a Dockerfile).
write_configs() {
	local p
	mkdir -p "$W"/{cni,cni-bin-cni,cni-bin-bridge,ipam,root,tmp,ctx,logs}
	for p in bridge host-local loopback; do
		ln -s "$PLUGINS/$p" "$W/cni-bin-cni/$p"
		ln -s "$PLUGINS/$p" "$W/cni-bin-bridge/$p"
	done
	write_fault_plugin "$W/cni-bin-cni/faultplug" "$W/del.fault" "del fault" "$W/add.fault"
	write_fault_wrapper "$W/cni-bin-bridge/firewall" "$PLUGINS/firewall" "$W/firewall.log"
	write_conflist "$W/cni/$NET.conflist" "$NET" "$BRIDGE" "$SUBNET" faultplug
	write_bk_config cni "$POOL"
	write_bk_config bridge "$POOL"
	write_foreign_conflist
	cp /bin/busybox "$W/ctx/busybox"
	# Each RUN prints its address on IFACE, which must be in the mode's
	# subnet, and pings the bridge's gateway; SLEEP keeps it running.
	cat >"$W/ctx/Dockerfile" <<'EOF'
FROM scratch
COPY busybox /bin/busybox
ARG NONCE IFACE PREFIX GATEWAY SLEEP=0
RUN ["/bin/busybox", "sh", "-ec", "a=$(/bin/busybox ip -4 -o addr show dev $IFACE | /bin/busybox awk '{print $4}'); echo \"e2e-addr=$a nonce=$NONCE step=1\"; case $a in $PREFIX.*) ;; *) exit 3 ;; esac; /bin/busybox ping -c1 -W2 $GATEWAY; echo e2e-started; /bin/busybox sleep $SLEEP"]
RUN ["/bin/busybox", "sh", "-ec", "a=$(/bin/busybox ip -4 -o addr show dev $IFACE | /bin/busybox awk '{print $4}'); echo \"e2e-addr=$a nonce=$NONCE step=2\"; case $a in $PREFIX.*) ;; *) exit 3 ;; esac; /bin/busybox ping -c1 -W2 $GATEWAY"]
EOF
}

# build name [opt...]: one build of the context, no cache, its progress in
# $W/logs/<name>.log (builds are counted from these files).
build() {
	local name=$1
	shift
	bctl build --progress plain --no-cache --frontend dockerfile.v0 \
		--local context="$W/ctx" --local dockerfile="$W/ctx" \
		--opt build-arg:NONCE="$name-$RANDOM" --opt build-arg:IFACE="$IFACE" \
		--opt build-arg:PREFIX="${MSUBNET%.*}" --opt build-arg:GATEWAY="$GATEWAY" "$@" \
		>"$W/logs/$name.log" 2>&1
}

# check_build name: the build's 2 RUN steps printed an address in the
# subnet (and so pinged the gateway); STEPS counts them.
check_build() {
	local n
	n=$(grep -cE "e2e-addr=${MSUBNET%.*}\.[0-9]+/24 " "$W/logs/$1.log") || true
	((n == 2)) || die "build $1: $n of 2 RUN steps saw an address in $MSUBNET on $IFACE: $(grep -m2 e2e-addr "$W/logs/$1.log" | tr '\n' ' ')"
	STEPS=$((STEPS + 2))
}

# addrs name: the addresses the build's RUN steps saw.
addrs() { grep -oE "e2e-addr=[0-9.]+" "$W/logs/$1.log" | cut -d= -f2; }

bk_alive() {
	[[ -n ${BK_PID:-} ]] && kill -0 "$BK_PID" 2>/dev/null &&
		[[ $(awk '{print $3}' "/proc/$BK_PID/stat" 2>/dev/null) != Z ]]
}

# start_bk mode [bin]: buildkitd (from bin, default BIN) in mode; waits
# until buildctl lists its worker, 60 s at most. Its pid goes to
# $W/buildkitd.pid too (a control phase's subshell starts it).
start_bk() {
	local bin=${2:-$BIN} i
	mode_vars "$1"
	log "starting ${bin##*/bin-buildkit-} buildkitd ($1 mode)"
	echo "=== start $(date +%s.%N) $1 $bin" >>"$W/buildkitd.log"
	TMPDIR=$W/tmp PATH=$PLUGINS:$PATH setsid "$bin/buildkitd" --config "$W/buildkitd-$1.toml" >>"$W/buildkitd.log" 2>&1 &
	BK_PID=$!
	# Out of the job table: a SIGKILL of it is no job's "Killed" notice;
	# stop_bk polls for its end.
	disown "$BK_PID"
	echo "$BK_PID" >"$W/buildkitd.pid"
	STARTS=$((STARTS + 1))
	for i in $(seq 1 120); do
		if bctl debug workers 2>/dev/null | grep -q .; then
			log "buildkitd (pid $BK_PID) is ready"
			return 0
		fi
		bk_alive || { tail -20 "$W/buildkitd.log" >&2; die "buildkitd exited"; }
		sleep 0.5
	done
	tail -20 "$W/buildkitd.log" >&2
	die "buildkitd did not get ready in 60s"
}

# stop_bk [signal]: signals buildkitd and waits until it is gone, 60 s at
# most (then SIGKILL).
stop_bk() {
	local sig=${1:-TERM} i
	[[ -n ${BK_PID:-} ]] || return 0
	kill -"$sig" "$BK_PID" 2>/dev/null
	for i in $(seq 1 600); do
		bk_alive || break
		((i < 600)) || {
			log "buildkitd did not exit 60s after SIG$sig: SIGKILL"
			kill -KILL "$BK_PID" 2>/dev/null
		}
		sleep 0.1
	done
	BK_PID=
	rm -f "$W/buildkitd.pid"
}

# stop_clean: a phase's clean stop (SIGTERM), once the pool is full
# again. buildkitd exits without waiting for its pool's fill, so a
# namespace whose ADD, or whose release by the closed pool, is running at
# the stop is left to its next start, whatever the CNI library does.
stop_clean() {
	wait_for 30 "the pool filled before a clean stop" pool_full
	stop_bk TERM
}

# nsfiles: the namespace files BuildKit keeps under <root>/net/cni.
nsfiles() { find "$W/root/net/cni" -type f -printf '%f\n' 2>/dev/null || true; }

# pool_full: POOL namespaces whose setup BuildKit logged as returned (its
# own debug line, after Setup), each with its veth: a namespace file and
# a veth both appear while the ADD still runs (see stop_clean).
pool_full() {
	local id n=0
	for id in $(nsfiles); do
		grep -qF "finished setting up network namespace $id" "$W/buildkitd.log" && n=$((n + 1))
	done
	((n >= POOL)) && (($(veths_on "$MBRIDGE" | wc -l) >= POOL))
}

# kill_containers: the build containers of this run (after a SIGKILL of
# buildkitd, and in the cleanup). BuildKit runs runc with its default
# root (/run/runc), shared with other runc users: only the containers
# whose bundle is under $W are killed and deleted.
kill_containers() {
	local id
	for id in $("$RUNC" list -f json 2>/dev/null | jq -r --arg w "$W/" '.[]? | select(.bundle | startswith($w)) | .id'); do
		"$RUNC" kill "$id" KILL 2>/dev/null
		"$RUNC" delete -f "$id" 2>/dev/null
	done
	return 0
}

# res_files: host-local reservations of both modes' networks (paths).
res_files() {
	find "$W/ipam/$NET" "$CNI_CACHE/networks/$BKNET" -type f ! -name 'last_reserved_ip.*' ! -name lock 2>/dev/null || true
}
cache_files() { find "$CNI_CACHE/results" -regextype egrep -regex ".*/($NET|$BKNET|$LONET)-$BKID-.*" 2>/dev/null || true; }
record_files() { find "$RECORDS" -maxdepth 1 -regextype egrep -regex ".*/(\.cfg\.)?$BKID(\..*)?" 2>/dev/null || true; }
# ipt_rules [table]: iptables rules (of table, default nat and filter)
# naming an address of either subnet or a BuildKit sandbox ID in their
# comment: bridge's ipMasq and firewall's per-container rules.
ipt_rules() {
	local t
	for t in ${1:-nat filter}; do
		iptables-save -t "$t" 2>/dev/null |
			grep -E -- "^-A .*( (${SUBNET%.*}|${BKSUBNET%.*})\.[0-9]+/32 |id: [^0-9a-z]{0,2}$BKID)" || true
	done
}

# ipt_delete table: deletes table's rules that ipt_rules lists, jumps
# to a chain first.
ipt_delete() {
	local l
	ipt_rules "$1" | sort -k4,4r | sed 's/^-A /-D /' | while read -r l; do
		# shellcheck disable=SC2086 # the rule's words, quoted by iptables-save
		eval "iptables -t $1 $l" 2>/dev/null
	done
	return 0
}

# spares: the engine's spare order-record files (kept for reuse, bounded).
spares() { find "$RECORDS" -maxdepth 1 -name '.spare-*' -printf '%f\n' 2>/dev/null || true; }

# foreign_entries: how many cache entries and order records under
# $CNI_CACHE are not this test's: neither BuildKit's nor those of the gc
# phase's foreign sandbox while it exists (foreign_files). The engine's
# spare record files, kept for reuse by any later engine, are no one's.
foreign_entries() {
	local all ours
	all=$(($(find "$CNI_CACHE/results" -type f 2>/dev/null | wc -l) + $(find "$RECORDS" -maxdepth 1 -type f ! -name '.spare-*' 2>/dev/null | wc -l)))
	ours=$(($(cache_files | wc -l) + $(record_files | wc -l) + $(foreign_files | wc -l)))
	echo $((all - ours))
}

# leftover_kinds: what is left, as "r v c o n f": reservations, veths on
# both bridges, cache entries, order records, namespace files, iptables
# rules; each kind is logged when not zero.
leftover_kinds() {
	local r v c o n f
	r=$(res_files | wc -l)
	v=$(($(veths_on "$BRIDGE" | wc -l) + $(veths_on "$BKBRIDGE" | wc -l)))
	c=$(cache_files | wc -l)
	o=$(record_files | wc -l)
	n=$(nsfiles | wc -l)
	f=$(ipt_rules | wc -l)
	((r == 0)) || log "leftover reservations: $(res_files | xargs -rn1 basename | tr '\n' ' ')"
	((v == 0)) || log "leftover veths: $v"
	((c == 0)) || log "leftover libcni cache entries: $(cache_files | xargs -rn1 basename | tr '\n' ' ')"
	((o == 0)) || log "leftover order records: $o"
	((n == 0)) || log "leftover namespace files: $n"
	((f == 0)) || log "leftover iptables rules: $f"
	echo "$r $v $c $o $n $f"
}

sum_kinds() {
	local r v c o n f
	read -r r v c o n f <<<"$1"
	echo $((r + v + c + o + n + f))
}

# remove_by_hand: everything leftover_kinds counts (and the bridges'
# veths), with buildkitd stopped.
remove_by_hand() {
	local f l
	kill_containers
	while read -r f; do
		[[ -n $f ]] || continue
		umount -l "$f" 2>/dev/null
		rm -f "$f"
	done < <(nsfiles | sed "s#^#$W/root/net/cni/#")
	res_files | xargs -r rm -f
	cache_files | xargs -r rm -f
	record_files | xargs -r rm -f
	for l in $(veths_on "$BRIDGE") $(veths_on "$BKBRIDGE"); do ip link del "$l" 2>/dev/null; done
	ipt_delete nat
	ipt_delete filter
	return 0
}

# ipt_chains: the iptables chains (table:chain) that exist now.
ipt_chains() {
	local t
	for t in filter nat; do
		iptables-save -t "$t" 2>/dev/null | sed -n "s/^:\([^ ]*\) .*/$t:\1/p"
	done
}

# check_host_free: no bridge of ours, no host address in our subnets, no
# netns or cache entry of the foreign network, no other buildkitd,
# nothing of BuildKit's at the default paths.
check_host_free() {
	local br s n
	for br in "$BRIDGE" "$BKBRIDGE" "$FBRIDGE"; do
		ip link show "$br" >/dev/null 2>&1 && die "bridge $br exists already (another run?)"
	done
	for s in "$SUBNET" "$BKSUBNET" "$FSUBNET"; do
		! ip -4 -o addr show | grep -qF " ${s%.*}." ||
			die "a host interface has an address in $s: pick another subnet (E2E_SUBNET, E2E_BK_SUBNET, E2E_FOREIGN_SUBNET)"
	done
	[[ ! -e /run/netns/$FNS ]] || die "netns $FNS exists already (another run?)"
	[[ -z $(find "$CNI_CACHE/results" -maxdepth 1 -name "$FNET-*" 2>/dev/null) ]] ||
		die "$CNI_CACHE/results holds entries of $FNET already (another run?)"
	! pgrep -x buildkitd >/dev/null || die "a buildkitd runs already: its state would be counted as ours"
	n=$(($(res_files | wc -l) + $(cache_files | wc -l) + $(record_files | wc -l) + $(ipt_rules | wc -l)))
	if ((n > 0)); then
		log "removing $n entries an earlier run left at the default paths"
		remove_by_hand
	fi
}

cleanup() {
	local rc=$? c t l new
	set +e
	trap - EXIT INT TERM
	[[ -n ${W:-} && -d $W ]] || exit "$rc"
	log "cleanup (exit status $rc)"
	if ((rc != 0)); then
		log "last lines of buildkitd.log:"
		tail -30 "$W/buildkitd.log" >&2
	fi
	[[ -z ${BK_PID:-} && -f $W/buildkitd.pid ]] && BK_PID=$(<"$W/buildkitd.pid")
	stop_bk KILL
	remove_by_hand
	foreign_remove
	awk -v w="$W" '$2 ~ "^"w {print $2}' /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done
	ip link del "$BRIDGE" 2>/dev/null
	ip link del "$BKBRIDGE" 2>/dev/null
	remove_bridge_rules "$BRIDGE" "$BKBRIDGE"
	# The chains the plugins made that did not exist before the run, once
	# empty (bridge's and firewall's shared chains).
	new=$(comm -13 <(sort "$W/chains.before") <(ipt_chains | sort))
	for c in $new; do
		t=${c%%:*}
		iptables-save -t "$t" | grep -E -- "^-A .* -j ${c#*:}( |$)" | sed 's/^-A /-D /' | while read -r l; do
			# shellcheck disable=SC2086 # the rule's words, quoted by iptables-save
			eval "iptables -t $t $l"
		done
		iptables -t "$t" -F "${c#*:}"
	done
	for c in $new; do iptables -t "${c%%:*}" -X "${c#*:}"; done
	[[ -z $new ]] || log "removed the iptables chains the plugins made: $(tr '\n' ' ' <<<"$new")"
	# The engine's spare record files that appeared during the run.
	new=$(comm -13 <(sort "$W/spares.before") <(spares | sort))
	[[ -z $new ]] || log "removing $(wc -l <<<"$new") spare record files the engines kept in $RECORDS"
	for c in $new; do rm -f "$RECORDS/$c"; done
	# host-local's data dir of the bridge mode's network, when the run made it.
	[[ ! -e $W/bknet.new ]] || rm -rf "${CNI_CACHE:?}/networks/$BKNET"
	[[ -n ${E2E_KEEP:-} ]] || rm -rf "$W"
	if ((rc != 0)); then log "FAILED (see the log lines above)"; fi
	exit "$rc"
}

# e2e_setup: the work dir $W, its cleanup trap, the packages, the configs.
e2e_setup() {
	[[ $(id -u) == 0 ]] || die "run as root"
	command -v runc >/dev/null || install_debs runc
	command -v iptables >/dev/null || install_debs iptables
	[[ -x /bin/busybox ]] && /bin/busybox --list | grep -qx ping || install_debs busybox-static
	command -v jq >/dev/null || install_debs jq
	command -v ip >/dev/null || install_debs iproute2
	RUNC=$(command -v runc)
	W=$(mktemp -d /tmp/ocicni-e2e-bk.XXXXXX)
	trap cleanup EXIT
	trap 'exit 130' INT TERM
	ipt_chains >"$W/chains.before"
	spares >"$W/spares.before"
	[[ -e $CNI_CACHE/networks/$BKNET ]] || touch "$W/bknet.new"
	check_host_free
	write_configs
	mode_vars cni
}

# --- phases. Each starts buildkitd, ends with it stopped; the runner
# counts what is left.

# phase_churn: NBUILDS builds, NPAR at once, each with 2 networked RUN
# steps; then a clean stop.
phase_churn() {
	local i j pids=() names=() n
	start_bk "$BK_MODE"
	log "churn: $NBUILDS builds, $NPAR at once"
	for ((i = 1; i <= NBUILDS; i += NPAR)); do
		pids=() names=()
		for ((j = i; j < i + NPAR && j <= NBUILDS; j++)); do
			build "churn-$BK_MODE-$j" &
			pids+=($!)
			names+=("churn-$BK_MODE-$j")
		done
		for j in "${!pids[@]}"; do
			wait "${pids[$j]}" || die "churn: build ${names[$j]} failed: $(tail -3 "$W/logs/${names[$j]}.log" | tr '\n' ' ')"
			check_build "${names[$j]}"
		done
	done
	n=$(for i in $(seq 1 "$NBUILDS"); do addrs "churn-$BK_MODE-$i"; done | sort -u | wc -l)
	log "churn: $((NBUILDS * 2)) RUN steps on $n distinct addresses of $MSUBNET; $(nsfiles | wc -l) namespaces held before the stop"
	stop_clean
}

# phase_pool: the pool filled (POOL namespaces, each attached), 2 builds
# served from it without a new namespace, drained by a clean stop.
phase_pool() {
	local before after a
	start_bk "$BK_MODE"
	wait_for 30 "pool: $POOL namespaces with a veth each" pool_full
	before=$(nsfiles | sort)
	log "pool: filled: $POOL namespaces, $(res_files | wc -l) reservations, $(ipt_rules | wc -l) iptables rules"
	# The counter of iptables rules must see the bridge mode's (ipMasq,
	# firewall) or a leak of them would go unseen.
	[[ $BK_MODE != bridge ]] || (($(ipt_rules | wc -l) > 0)) || die "pool: no iptables rule of $MSUBNET is seen in bridge mode"
	build "pool-$BK_MODE-1" || die "pool: build 1 failed: $(tail -3 "$W/logs/pool-$BK_MODE-1.log" | tr '\n' ' ')"
	check_build "pool-$BK_MODE-1"
	build "pool-$BK_MODE-2" || die "pool: build 2 failed"
	check_build "pool-$BK_MODE-2"
	after=$(nsfiles | sort)
	[[ $before == "$after" ]] || die "pool: the builds used namespaces outside the pool: before: $before, after: $after"
	for a in $(addrs "pool-$BK_MODE-1") $(addrs "pool-$BK_MODE-2"); do
		res_files | grep -q "/$a\$" || die "pool: a RUN step had $a, not a pool namespace's address"
	done
	log "pool: 4 RUN steps served from the pool's $POOL namespaces; stopping buildkitd (SIGTERM)"
	stop_clean
}

# crash_kill: NPAR builds whose first RUN step sleeps; once every one has
# started, SIGKILL of buildkitd, then its build containers are killed.
# Sets CRASH_NS: the namespace files left.
crash_kill() {
	local i pids=()
	for i in $(seq 1 "$NPAR"); do
		build "crash-$BK_MODE-$i" --opt build-arg:SLEEP=60 &
		pids+=($!)
	done
	started() {
		local i
		for i in $(seq 1 "$NPAR"); do grep -q '^#[0-9]* [0-9.]* e2e-started' "$W/logs/crash-$BK_MODE-$i.log" || return 1; done
	}
	wait_for 60 "crash: $NPAR RUN steps running" started
	stop_bk KILL
	KILLS=$((KILLS + 1))
	for i in "${pids[@]}"; do wait "$i" 2>/dev/null || true; done
	kill_containers
	CRASH_NS=$(nsfiles | sort)
	log "crash: buildkitd killed (SIGKILL) with $NPAR RUN steps running; $(wc -w <<<"$CRASH_NS") namespace files, $(res_files | wc -l) reservations left for the restart"
}

# old_ns_gone: none of CRASH_NS is left, nor its cache entries and records.
old_ns_gone() {
	local id
	for id in $CRASH_NS; do
		[[ ! -e $W/root/net/cni/$id ]] || return 1
		! cache_files | grep -q -- "-$id-" || return 1
		! record_files | grep -q "$id" || return 1
	done
}

# phase_crash: SIGKILL during builds, a restart: cleanOldNamespaces (and
# the engine) release the old namespaces; a build; a clean stop.
phase_crash() {
	start_bk "$BK_MODE"
	crash_kill
	start_bk "$BK_MODE"
	wait_for 60 "crash: the old namespaces released after the restart" old_ns_gone
	log "crash: the $(wc -w <<<"$CRASH_NS") old namespaces and their attachments are gone after the restart"
	build "crash-$BK_MODE-after" || die "crash: a build after the restart failed"
	check_build "crash-$BK_MODE-after"
	stop_clean
}

# heal_state id: "r c o" for one sandbox (1 = there): reservation (by
# container ID in host-local's files), cache entry, order record. Its veth
# went with its namespace, which BuildKit deleted; veths are counted at
# the phase's end.
heal_state() {
	local r=0 c=0 o=0
	grep -rl --exclude='last_reserved_ip.*' "^$1" "$MIPAM" 2>/dev/null | grep -q . && r=1
	cache_files | grep -q -- "-$1-" && c=1
	[[ -e $RECORDS/$1 ]] && o=1
	echo "$r $c $o"
}

# wait_healed phase t_last ids...: everything of the sandboxes must go
# within HEAL_WAIT s with no call from BuildKit, by a DEL after t_last.
wait_healed() {
	local phase=$1 t_last=$2 t0 t1 id ndel
	shift 2
	healed() {
		local id
		for id; do [[ $(heal_state "$id") == "0 0 0" ]] || return 1; done
	}
	t0=$(date +%s.%N)
	if ! (wait_for "$HEAL_WAIT" "$phase: healed" healed "$@"); then
		for id; do
			log "$phase: $id not healed (r c o: $(heal_state "$id")); cache: $(cache_files | grep -- "-$id-" | xargs -rn1 basename | tr '\n' ' ')record: $(cat "$RECORDS/$id" 2>/dev/null | cut -c1-400)"
		done
		die "$phase: not healed ${HEAL_WAIT}s after the fault cleared"
	fi
	t1=$(date +%s.%N)
	for id; do
		ndel=$(awk -v t="$t_last" -v id="$id" '$2 == "DEL" && $3 == id && $4 == "ok" && $1 > t' "$FAULTLOG" | wc -l)
		((ndel > 0)) || die "$phase: healed, but the fault plugin logged no successful DEL of $id after the fault cleared"
	done
	HEALED_IN=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
	log "$phase: $# sandbox(es) healed ${HEALED_IN}s after the fault cleared"
}

# failed_dels since: the sandbox IDs whose DEL failed after since.
failed_dels() { awk -v t="$1" '$2 == "DEL" && $4 == "error-11" && $1 > t {print $3}' "$FAULTLOG" | sort -u; }

# masq_left phase ids...: in bridge mode, the ipMasq rules (nat) that
# name the sandboxes healed (or collected by GC) after their netns went. The bridge plugin's DEL tears them down only
# from the interface's addresses inside the netns: once BuildKit deleted
# the netns, no DEL can, whoever sends it. The face's run records and
# removes them (NOTE); the control leaves them to be counted.
masq_left() {
	local phase=$1 id n=0 k
	shift
	[[ $BK_MODE == bridge ]] || return 0
	for id; do
		k=$(iptables-save -t nat | grep -cE -- "^-A .*id: [^0-9a-z]{0,2}$id") || true
		n=$((n + k))
	done
	((n > 0)) || return 0
	log "$phase: the bridge plugin left $n ipMasq rules of the $# sandbox(es) deleted without their netns (its DEL needs it)"
	NOTE[$PHASE]+="; bridge plugin's ipMasq rules left: $n (DEL without the netns skips them)"
	[[ -z $CONTROL ]] || return 0
	for id; do
		iptables-save -t nat | grep -E -- "^-A .*id: [^0-9a-z]{0,2}$id" | sort -k4,4r | sed 's/^-A /-D /' | while read -r l; do
			# shellcheck disable=SC2086 # the rule's words, quoted by iptables-save
			eval "iptables -t nat $l"
		done
	done
}

# phase_heal: a build with --opt hostname=x (a namespace outside the
# pool, released right after its step) while DEL fails: BuildKit deletes
# the namespace whatever Remove returned; once the fault clears the
# engine's healing finishes it with no further call.
phase_heal() {
	local t ids t_last outcome
	start_bk "$BK_MODE"
	wait_for 30 "heal: the pool filled" pool_full
	t=$(date +%s.%N)
	touch "$W/del.fault"
	# The executor returns the release's error (Remove's): the RUN step
	# whose namespace it was fails, after it ran.
	if build "heal-$BK_MODE" --opt hostname=e2e-heal; then
		outcome="build passed"
	else
		grep -q "del fault" "$W/logs/heal-$BK_MODE.log" ||
			die "heal: the build failed, not at the DEL: $(tail -3 "$W/logs/heal-$BK_MODE.log" | tr '\n' ' ')"
		outcome="RUN step failed with Remove's error"
	fi
	grep -qE "e2e-addr=${MSUBNET%.*}\.[0-9]+/24 " "$W/logs/heal-$BK_MODE.log" || die "heal: the RUN step saw no address in $MSUBNET"
	ids=$(failed_dels "$t")
	[[ -n $ids ]] || die "heal: no DEL failed during the build"
	t_last=$(date +%s.%N)
	rm -f "$W/del.fault"
	[[ -z $(nsfiles | grep -xF "$ids") ]] || die "heal: BuildKit kept the namespace file of $ids"
	log "heal: DEL failed for $(wc -w <<<"$ids") namespace(s) outside the pool ($outcome); BuildKit deleted them; fault cleared, no call now"
	NOTE[$PHASE]="DEL failed for $(wc -w <<<"$ids") namespace(s), $outcome"
	# shellcheck disable=SC2086 # one ID a word
	wait_healed heal "$t_last" $ids
	NOTE[$PHASE]+="; healed ${HEALED_IN}s after the fault cleared, no call"
	# shellcheck disable=SC2086
	masq_left heal $ids
	stop_clean
}

# phase_healpool: the pool's namespaces released by a clean stop while
# DEL fails (BuildKit deletes them right after): the engine records the
# retries; the next buildkitd (its engine, resuming them) heals them once
# the fault is cleared, with no call for them.
phase_healpool() {
	local t ids t_last
	start_bk "$BK_MODE"
	wait_for 30 "healpool: the pool filled" pool_full
	t=$(date +%s.%N)
	touch "$W/del.fault"
	stop_clean
	ids=$(failed_dels "$t")
	[[ -n $ids ]] || die "healpool: no DEL failed when the pool was drained"
	[[ -z $(nsfiles) ]] || die "healpool: BuildKit left namespace files: $(nsfiles | tr '\n' ' ')"
	t_last=$(date +%s.%N)
	rm -f "$W/del.fault"
	log "healpool: DEL failed for $(wc -w <<<"$ids") pool namespace(s), BuildKit deleted them; fault cleared; restarting buildkitd"
	NOTE[$PHASE]="DEL failed for $(wc -w <<<"$ids") pool namespace(s)"
	start_bk "$BK_MODE"
	# shellcheck disable=SC2086 # one ID a word
	wait_healed healpool "$t_last" $ids
	NOTE[$PHASE]+="; healed ${HEALED_IN}s after the restart, no call for them"
	# shellcheck disable=SC2086
	masq_left healpool $ids
	stop_clean
}

# phase_addfail: a build with --opt hostname=x (a new namespace, so an
# ADD) while the chain's ADD fails: the build fails with the CNI setup
# error, and nothing of the attachment is left. BuildKit's newNS removes
# the namespace file without unmounting it first (deleteNetNS, whose
# EBUSY it drops), so the file stays until the next start's
# cleanOldNamespaces: a restart, then the count.
phase_addfail() {
	local t pool id st
	start_bk "$BK_MODE"
	wait_for 30 "addfail: the pool filled" pool_full
	pool=$(nsfiles | sort)
	t=$(date +%s.%N)
	touch "$W/add.fault"
	! build "addfail-$BK_MODE" --opt hostname=e2e-addfail || die "addfail: the build succeeded with the ADD fault set"
	rm -f "$W/add.fault"
	grep -q "CNI setup error" "$W/logs/addfail-$BK_MODE.log" ||
		die "addfail: the build failed, but not at CNI setup: $(tail -3 "$W/logs/addfail-$BK_MODE.log" | tr '\n' ' ')"
	id=$(awk -v t="$t" '$2 == "ADD" && $4 == "error-11" && $1 > t {print $3}' "$FAULTLOG" | tail -1)
	[[ -n $id ]] || die "addfail: no ADD failed"
	log "addfail: the build failed cleanly: $(grep -m1 -o 'CNI setup error.*' "$W/logs/addfail-$BK_MODE.log" | cut -c1-160)"
	NOTE[$PHASE]="build failed: CNI setup error"
	st=$(heal_state "$id")
	[[ $st != "0 0 0" ]] || NOTE[$PHASE]+="; the failed ADD left nothing"
	if [[ $st != "0 0 0" ]]; then
		[[ -n $CONTROL ]] || die "addfail: the failed ADD left (r c o): $st"
		log "addfail: the failed ADD left (r c o): $st$(cache_files | grep -- "-$id-" | xargs -rn1 basename | sed 's/^/ /' | tr '\n' ' ')"
		NOTE[$PHASE]+="; the failed ADD left (reservation, cache entry, record): $st until a restart"
	fi
	if [[ $(nsfiles | sort) != "$pool" ]]; then
		nsfiles | grep -qx "$id" || die "addfail: namespace files other than the pool's and $id: $(nsfiles | tr '\n' ' ')"
		log "addfail: BuildKit left its namespace file $id mounted (removed before unmounting); a restart's cleanOldNamespaces releases it"
		NOTE[$PHASE]+="; BuildKit's own netns file left mounted until its next start"
		stop_clean
		start_bk "$BK_MODE"
		ns_gone() { [[ ! -e $W/root/net/cni/$id ]]; }
		wait_for 30 "addfail: the failed build's namespace file released after the restart" ns_gone
	fi
	stop_clean
}

# phase_gc: what gc.patch (one Face.GC with no valid sandbox at provider
# start) changes after a SIGKILL when the namespace files are lost too (a
# root wiped or on tmpfs, a crash between a namespace's deletion and its
# DEL): cleanOldNamespaces then finds nothing to release. First the
# unpatched binary restarts (its leftovers are recorded in NOTE), then the
# patched one, which must leave nothing of BuildKit's, and must leave the
# foreign sandbox (foreign.sh), attached before it starts to a network it
# never loads, as it was: its GC is scoped to the networks it loaded. The
# foreign sandbox is then detached and must be gone. The control runs
# the first half only: go-cni v1.1.14 has no GC.
phase_gc() {
	local f left
	start_bk "$BK_MODE"
	crash_kill
	for f in $CRASH_NS; do
		umount -l "$W/root/net/cni/$f" 2>/dev/null
		rm -f "$W/root/net/cni/$f"
	done
	no_veths() { [[ -z $(veths_on "$MBRIDGE") ]]; }
	wait_for 30 "gc: the namespaces (and so their veths) gone once their files are" no_veths
	log "gc: the $(wc -w <<<"$CRASH_NS") namespace files removed, their namespaces and veths are gone"
	start_bk "$BK_MODE"
	build "gc-$BK_MODE-unpatched" || die "gc: a build after the restart failed"
	check_build "gc-$BK_MODE-unpatched"
	stop_clean
	left=$(leftover_kinds)
	NOTE[$PHASE]="unpatched restart left: $(kinds "$left")"
	log "gc: the unpatched restart left: $(kinds "$left")"
	[[ -z $CONTROL && -n ${GC_BIN:-} ]] || return 0
	foreign_attach
	# The patched half runs only when the cache holds nothing of other CNI
	# users but the foreign sandbox: a GC that was not scoped would tear
	# theirs down too.
	f=$(foreign_entries)
	if ((f > 0)); then
		log "gc: $f entries of other CNI users under $CNI_CACHE besides the foreign sandbox: the patched half is skipped"
		NOTE[$PHASE]+="; gc.patch not run: $f entries of other CNI users under $CNI_CACHE"
		foreign_detach
		remove_by_hand
		return 0
	fi
	start_bk "$BK_MODE" "$GC_BIN"
	wait_for 30 "gc: the patched buildkitd logged its GC" grep -q "cni GC at provider start done" "$W/buildkitd.log"
	log "gc: $(grep -o 'cni GC at provider start done.*' "$W/buildkitd.log" | tail -1 | cut -c1-160)"
	foreign_kept "after the patched buildkitd's GC"
	build "gc-$BK_MODE-patched" || die "gc: a build on the patched buildkitd failed"
	check_build "gc-$BK_MODE-patched"
	stop_clean
	foreign_kept "after the patched buildkitd's build and stop"
	# shellcheck disable=SC2086 # one ID a word
	masq_left gc $CRASH_NS
	NOTE[$PHASE]+="; with gc.patch: $(kinds "$(leftover_kinds)"); foreign sandbox of $FNET ($(foreign_addr)) kept its reservation, cache entry, order record and eth0 through the GC"
	foreign_detach
	NOTE[$PHASE]+=", then detached by ocicnitool: gone"
}

# kinds "r v c o n f": the non-zero kinds, "0" when none.
kinds() {
	local r v c o n f out=()
	read -r r v c o n f <<<"$1"
	((r == 0)) || out+=("reservations $r")
	((v == 0)) || out+=("veths $v")
	((c == 0)) || out+=("cache entries $c")
	((o == 0)) || out+=("order records $o")
	((n == 0)) || out+=("netns files $n")
	((f == 0)) || out+=("iptables rules $f")
	((${#out[@]} > 0)) || out=(0)
	local IFS=,
	printf '%s' "${out[*]}" | sed 's/,/, /g'
}
