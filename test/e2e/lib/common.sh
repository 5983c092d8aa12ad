# shellcheck shell=bash
# What the end-to-end harnesses share, sourced by each test/e2e/*/run.sh
# before anything else (their lib.sh and control.sh use it too). Each
# run.sh sets LOG_TAG (and may set E2E_CACHE) first; sourcing this takes
# the harness's build lock (e2e_lock). It holds:
#   - the settings: REPO, E2E_CACHE, OURMOD, T0, GOWORK=off
#   - log, die, e2e_lock, e2e_unlock, install_debs, keyhash
#   - building from the module proxy: fetch_src (download + writable copy,
#     vendor/ dropped), proxy_dir, require_ours, gocni_src (a copy with
#     its go-cni imports rewritten to ours), stock_src (a control's
#     unchanged copy), stock_links, build_crictl, build_plugins,
#     compile_negative_check, oci_image
#   - running: wait_daemon, stop_pid, wait_for, strict, face_then_control
#     (a harness's `all`)
#   - driving a runtime with crictl (after the harness's crictl wrapper and
#     its W, NET, HNET, BRIDGE, HBRIDGE, SUBNET, HSUBNET, CNI_CACHE,
#     ALL_IDS): crictl_err, network_ready, pod_config, run_pod, pod_ip,
#     pod_netns, check_pod_ip, stop_rm_pod, write_conflist,
#     write_fault_plugin, build_pause, reservations, veths_on,
#     net_leftovers, remove_rules, assert_clean, check_host_free,
#     cleanup_begin, kill_runc_containers, remove_net_state, cleanup_end,
#     phase_churn, crash_pods, crash_check

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
E2E_CACHE=${E2E_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/ocicni-e2e}
OURMOD=github.com/seed-671fdd43/ocicni
T0=$(date +%s)
export GOWORK=off GOFLAGS=-buildvcs=false

log() { printf '[%s %4ds] %s\n' "$LOG_TAG" "$(($(date +%s) - T0))" "$*" >&2; }
# die: in a containerd control phase (PHASE set, in the phase's subshell;
# see containerd/control.sh) it ends the phase and leaves its reason in
# $W/phase.fail; everywhere else it ends the run.
die() {
	if [[ -n ${PHASE:-} ]]; then
		log "$PHASE failed: ${*#"$PHASE: "}"
		printf '%s\n' "$*" >"$W/phase.fail"
		exit 1
	fi
	log "FAIL: $*"
	exit 1
}

# e2e_lock: holds this harness's lock ($E2E_CACHE/.lock-$LOG_TAG) until
# e2e_unlock or the end of the script, so that two runs of one harness
# (CI's prebuild in the background and its stage in the foreground, or a
# make target beside it) never prepare or build the same cached source
# and binaries at once: the second waits, then finds them built. Taken
# when this file is sourced; a mode that starts daemons calls e2e_unlock
# first, so that no daemon inherits it.
e2e_lock() {
	mkdir -p "$E2E_CACHE"
	exec {E2E_LOCK_FD}>"$E2E_CACHE/.lock-$LOG_TAG"
	if ! flock -n "$E2E_LOCK_FD"; then
		log "waiting for another run of this harness to finish its build"
		flock "$E2E_LOCK_FD"
	fi
}

e2e_unlock() {
	[[ -z ${E2E_LOCK_FD:-} ]] || exec {E2E_LOCK_FD}>&-
	E2E_LOCK_FD=
}

# install_debs pkg...: apt-get install, one harness at a time (a lock
# beside the harnesses' own), waiting for any other apt that holds dpkg's.
install_debs() {
	local fd
	log "apt-get install $*"
	exec {fd}>"$E2E_CACHE/.lock-apt"
	flock "$fd"
	if [[ -z ${APT_UPDATED:-} ]]; then
		apt-get update -qq -o DPkg::Lock::Timeout=600 >/dev/null || true
		APT_UPDATED=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 "$@" >/dev/null ||
		die "apt-get install $* failed"
	exec {fd}>&-
}

# keyhash: hash of this checkout's library (what the runtime compiles of
# us): go.mod, go.sum, pkg/ and internal/, test files and internal/tools
# (the repo's own commands) left out.
keyhash() {
	(cd "$REPO" && find go.mod go.sum pkg internal -path internal/tools -prune -o -type f ! -name '*_test.go' -print0 |
		sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
}

# proxy_dir module@version: downloads it from the module proxy and prints
# the module cache's (read-only) directory of it.
proxy_dir() {
	local dl
	dl=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "$1" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[[ -d $dl ]] || die "go mod download gave no source dir"
	printf '%s\n' "$dl"
}

# fetch_src module version dest label: a writable copy of module@version
# from the module proxy at dest, without its vendor/ (built with -mod=mod).
fetch_src() {
	local dl
	log "downloading $1@$2 from the module proxy"
	dl=$(proxy_dir "$1@$2")
	rm -rf "$3" && mkdir -p "$(dirname "$3")"
	cp -r "$dl" "$3" && chmod -R u+w "$3"
	if [[ -d $3/vendor ]]; then
		log "$4 vendors: dropping vendor/ and building with -mod=mod"
		rm -rf "$3/vendor"
	fi
}

# require_ours dir module: in dir's go.mod, a require of our module with a
# replace to this checkout instead of the require of module.
require_ours() {
	(cd "$1" &&
		go mod edit -require="$OURMOD@v0.0.0-00010101000000-000000000000" -replace="$OURMOD=$REPO" &&
		go mod edit -droprequire="$2")
}

# gocni_src name module version [fixup]: sets SRC to a writable copy of
# module@version whose go-cni imports name our pkg/gocni instead, with a
# replace to this checkout, after fixup dir (a replace of the copy's own)
# when given. Our package is named cni, as go-cni's is, so the import
# path is all that changes, aliased or not; only go-cni's root package is
# handled, and anything else stops the run. Keyed by name, version and
# checkout path; redone when this function, one it calls or fixup changes.
gocni_src() {
	local name=$1 mod=$2 ver=$3 fixup=${4:-} pathkey recipe files left
	pathkey=$(printf '%s' "$REPO" | sha256sum | cut -c1-8)
	SRC=$E2E_CACHE/src-${name,,}-$ver-$pathkey
	# shellcheck disable=SC2086 # no fixup: no word
	recipe=$(declare -f gocni_src fetch_src proxy_dir require_ours $fixup | sha256sum | cut -c1-16)
	if [[ -f $SRC/.prepared && $(<"$SRC/.prepared") == "$recipe" ]]; then
		log "$name source: $SRC (cached)"
		return
	fi
	fetch_src "$mod" "$ver" "$SRC" "$name"
	files=$(grep -rl --include='*.go' "\"$GOCNI" "$SRC" || true)
	[[ -n $files ]] || die "no $name file imports $GOCNI"
	# shellcheck disable=SC2086
	sed -i -e "s#\"$GOCNI\"#\"$OURMOD/pkg/gocni\"#" $files
	left=$(grep -rn --include='*.go' "\"$GOCNI" "$SRC" || true) # comments may link to go-cni
	[[ -z $left ]] || die "imports of $GOCNI left after the rewrite:"$'\n'"$left"
	log "rewrote the import path in $(wc -w <<<"$files") files to $OURMOD/pkg/gocni, nothing else: $(tr '\n' ' ' <<<"${files//$SRC\//}")"
	[[ -z $fixup ]] || "$fixup" "$SRC"
	require_ours "$SRC" "$GOCNI"
	! grep -qE "^[[:space:]]*(require[[:space:]]+)?$GOCNI[[:space:]]" "$SRC/go.mod" || die "$name's go.mod still requires $GOCNI"
	printf '%s\n' "$recipe" >"$SRC/.prepared"
}

# stock_src module version dest label: a control's source, as published:
# module@version from the module proxy, copied unchanged to dest (checked
# with diff) and made read-only; no rewrite, no replace. Its go.mod must
# require $GOCNI at $STOCK_GOCNI, neither replace it nor mention our
# module. Not keyed by our tree: it holds nothing of ours.
stock_src() {
	local mod=$1 ver=$2 dest=$3 label=$4 dl req
	if [[ -f $dest/go.mod ]]; then
		log "stock $label source: $dest (cached)"
	else
		log "downloading $mod@$ver from the module proxy (stock, for the control)"
		dl=$(proxy_dir "$mod@$ver")
		[[ ! -e $dest ]] || chmod -R u+w "$dest"
		rm -rf "$dest" "$dest.tmp" && mkdir -p "$(dirname "$dest")"
		cp -r "$dl" "$dest.tmp"
		diff -r "$dl" "$dest.tmp" >/dev/null || die "the copy of $dl differs from it"
		chmod -R a-w "$dest.tmp"
		mv "$dest.tmp" "$dest"
	fi
	req=$(cd "$dest" && go mod edit -json | jq -r --arg m "$GOCNI" '.Require[] | select(.Path == $m) | .Version')
	[[ $req == "$STOCK_GOCNI" ]] || die "stock $label $ver requires $GOCNI '$req', not $STOCK_GOCNI"
	! grep -q "$OURMOD" "$dest/go.mod" || die "$dest/go.mod mentions $OURMOD"
	[[ -z $(cd "$dest" && go mod edit -json | jq -r --arg m "$GOCNI" '.Replace[]? | select(.Old.Path == $m)') ]] ||
		die "$dest/go.mod replaces $GOCNI"
	log "stock $label $ver: go.mod requires $GOCNI $req, no replace of it, no import rewritten"
}

# stock_links bin label: the stock binary bin links go-cni $STOCK_GOCNI
# and nothing of ours, and no replaced module (go version -m).
stock_links() {
	local deps
	deps=$(go version -m "$1") || die "go version -m $1 failed"
	grep -qP "^\tdep\t\Q$GOCNI\E\t\Q$STOCK_GOCNI\E\t" <<<"$deps" ||
		die "$1 does not link $GOCNI $STOCK_GOCNI: $(grep -F "$GOCNI" <<<"$deps" || echo none)"
	! grep -qF -e "$OURMOD" -e "=>" <<<"$deps" || die "$1 links $OURMOD or a replaced module"
	log "stock $2 links $GOCNI $STOCK_GOCNI (go version -m), nothing of $OURMOD, no replace"
}

# build_crictl: crictl $CRICTL_VERSION from the module proxy, once; sets
# CRICTL_BIN.
build_crictl() {
	CRICTL_BIN=$E2E_CACHE/crictl-$CRICTL_VERSION/crictl
	if [[ ! -x $CRICTL_BIN ]]; then
		log "building crictl $CRICTL_VERSION"
		GOBIN=$E2E_CACHE/crictl-$CRICTL_VERSION go install "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION" ||
			die "crictl build failed"
	fi
}

# build_plugins dir: the reference CNI plugins from tools/ into dir; sets
# PLUGINS. Each reports its module's version, as released builds do
# (Nomad's fingerprint reads the bridge plugin's to decide whether to run
# CHECK on restore). Skipped when dir holds this recipe's build (tools/'s
# go.mod and go.sum, this function); otherwise built aside and renamed in
# file by file, so that a runtime running plugins from dir meanwhile (a
# harness's run beside CI's prebuild) never execs a half-written one.
build_plugins() {
	local mod=github.com/containernetworking/plugins ver recipe tmp f
	PLUGINS=$1
	recipe=$( (
		cat "$REPO/tools/go.mod" "$REPO/tools/go.sum"
		declare -f build_plugins
	) | sha256sum | cut -c1-16)
	[[ ! -f $PLUGINS/.built || $(<"$PLUGINS/.built") != "$recipe" ]] || return 0
	ver=$(cd "$REPO/tools" && go list -m -f '{{.Version}}' "$mod") || die "no $mod in tools/go.mod"
	mkdir -p "$PLUGINS"
	tmp=$(mktemp -d "$PLUGINS.tmp.XXXXXX")
	(cd "$REPO/tools" && go build -ldflags "-X $mod/pkg/utils/buildversion.BuildVersion=$ver" -o "$tmp/" tool) ||
		{ rm -rf "$tmp"; die "plugin build failed"; }
	for f in "$tmp"/*; do mv -f "$f" "$PLUGINS/"; done
	rm -rf "$tmp"
	printf '%s\n' "$recipe" >"$PLUGINS/.built"
}

# compile_negative_check harness pkg ident srcprefix [want]: the compile
# check must fail when an exported identifier the runtime uses is gone.
# Renames pkg.ident in a scratch copy of this checkout (never in the
# repo), runs test/e2e/<harness>/run.sh compile there, and requires it to
# fail (with want, at a line holding want). Removes the scratch copy and
# the runtime source prepared for it ($E2E_CACHE/<srcprefix>-<path key>).
compile_negative_check() {
	local harness=$1 pkg=$2 ident=$3 srcprefix=$4 want=${5:-} scratch rc=0 found=0
	scratch=$(mktemp -d "/tmp/ocicni-e2e-$harness-negative.XXXXXX")
	(cd "$REPO" && tar --exclude=./.git --exclude=./bin -cf - .) | tar -xf - -C "$scratch"
	sed -i "s/\\b$ident\\b/${ident}Renamed/g" "$scratch/pkg/$pkg"/*.go
	log "negative check: compile check against $scratch with $pkg.$ident renamed"
	E2E_CACHE=$E2E_CACHE "$scratch/test/e2e/$harness/run.sh" compile >"$scratch.log" 2>&1 || rc=$?
	grep -m3 "$ident" "$scratch.log" >&2 || true
	[[ -z $want ]] || ! grep -qF "$want" "$scratch.log" || found=1
	rm -rf "$scratch" "$E2E_CACHE/$srcprefix-$(printf '%s' "$scratch" | sha256sum | cut -c1-8)"
	rm -f "$scratch.log"
	((rc != 0)) || die "negative check: the compile check passed although $ident was renamed"
	if [[ -n $want ]]; then
		((found == 1)) || die "negative check: the compile check failed, but not at ${want#undefined: }"
		log "negative check passed: the compile check failed at ${want#undefined: } as it must"
	else
		log "negative check passed: the compile check failed as it must"
	fi
}

# crictl_err: the last error crictl logged, from "desc = " on, without
# the quoting of crictl's msg="...".
crictl_err() {
	local l
	l=$(tail -1 "$W/crictl.log" 2>/dev/null) || true
	l=${l#*desc = }
	l=${l%\"}
	printf '%s\n' "${l//\\\"/\"}"
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
	POD_ID=$(crictl runp "$(pod_config "$1" "uid-$1")") || die "crictl runp $1 failed: $(crictl_err)"
	[[ $POD_ID =~ ^[0-9a-f]{64}$ ]] || die "crictl runp $1 printed '$POD_ID'"
	ALL_IDS+=("$POD_ID")
	PODS_RUN=$((PODS_RUN + 1))
}

# network_ready: crictl info reports the runtime's NetworkReady condition.
network_ready() {
	crictl info 2>/dev/null | jq -e '.status.conditions[] | select(.type=="NetworkReady") | .status == true' >/dev/null
}
pod_ip() { crictl inspectp "$1" | jq -r '.status.network.ip'; }
pod_netns() { crictl inspectp "$1" | jq -r '.info.runtimeSpec.linux.namespaces[] | select(.type=="network") | .path'; }

check_pod_ip() { # id [subnet]
	local ip ns subnet=${2:-$SUBNET}
	ip=$(pod_ip "$1")
	[[ $ip == "${subnet%.*}."* ]] || die "pod $1 has IP '$ip', not one of $subnet"
	ns=$(pod_netns "$1")
	[[ -n $ns && -e $ns ]] || die "pod $1: netns '$ns' missing"
	nsenter --net="$ns" ip -4 -o addr show dev eth0 | grep -qw "inet $ip/24" ||
		die "pod $1: $ip not configured in $ns"
	IPS_CHECKED=$((IPS_CHECKED + 1))
}

stop_rm_pod() {
	crictl stopp "$1" >/dev/null || die "crictl stopp $1 failed: $(crictl_err)"
	crictl rmp "$1" >/dev/null || die "crictl rmp $1 failed: $(crictl_err)"
}

# write_conflist file name bridge subnet [extra plugin type]: bridge +
# host-local (data dir $W/ipam), then the extra plugin if named.
write_conflist() {
	local extra=""
	case ${5:-} in
	"") ;;
	"{"*) extra=", $5" ;; # a plugin's whole config
	*) extra=", { \"type\": \"$5\" }" ;;
	esac
	cat >"$1.tmp" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$2",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$3",
      "isGateway": true,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "dataDir": "$W/ipam",
        "ranges": [[{"subnet": "$4"}]]
      }
    }$extra
  ]
}
EOF
	mv "$1.tmp" "$1"
}

# write_fault_plugin file delfault delmsg [addfault]: a chained CNI plugin,
# a bash script (jq is a prerequisite) named after file. It passes
# prevResult through on ADD; its ADD fails with code 11 while addfault
# exists (if given; when it holds a number n, for the next n ADDs), its DEL with code 11 and delmsg while delfault
# exists. It logs one line per call to $W/<name>.log: "<unix time>
# <command> <container id> <outcome>".
write_fault_plugin() {
	local jqbin name=${1##*/}
	jqbin=$(command -v jq) || die "jq missing"
	cat >"$1" <<EOF
#!/bin/bash
# $name: chained CNI plugin of the e2e fault phases.
addfault=${4:-}
delfault=$2
delmsg='$3'
calllog=$W/$name.log
jq=$jqbin
name=$name
EOF
	cat >>"$1" <<'PLUGIN'
in=$(cat)
note() { printf '%s %s %s %s\n' "$(date +%s.%N)" "${CNI_COMMAND:-none}" "${CNI_CONTAINERID:--}" "$1" >>"$calllog"; }
cnierr() { # code msg
	printf '{"cniVersion":"1.0.0","code":%d,"msg":"%s"}\n' "$1" "$2"
	note "error-$1"
	exit 1
}
case ${CNI_COMMAND:-} in
ADD)
	# The ADD fault holds while its file exists; a file that holds a
	# number n fails the next n ADDs and is then removed.
	if [[ -n $addfault && -e $addfault ]]; then
		n=$(<"$addfault")
		if [[ $n =~ ^[0-9]+$ ]]; then
			if ((n <= 1)); then rm -f "$addfault"; else echo $((n - 1)) >"$addfault"; fi
		fi
		cnierr 11 "add fault"
	fi
	out=$("$jq" -ce 'if .prevResult then .prevResult + {cniVersion: .cniVersion} else error("no prevResult") end' <<<"$in" 2>/dev/null) ||
		cnierr 7 "$name: no prevResult on stdin"
	printf '%s\n' "$out"
	note ok
	;;
DEL)
	[[ -e $delfault ]] && cnierr 11 "$delmsg"
	note ok
	;;
CHECK | STATUS | GC)
	note ok
	;;
VERSION)
	echo '{"cniVersion":"1.0.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]}'
	note ok
	;;
*)
	cnierr 4 "$name: unknown CNI_COMMAND '${CNI_COMMAND:-}'"
	;;
esac
PLUGIN
	chmod +x "$1"
	: >>"$W/$name.log"
}

# build_pause out: a static pause binary (pause() forever, _exit(0) on
# SIGTERM and SIGINT) at out; there is no registry to pull one from.
build_pause() {
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
	gcc -static -Os -o "$1" "$W/pause.c" || die "building pause failed"
}

# reservations net: the host-local reservations (IPs) of net, one a line.
reservations() {
	find "$W/ipam/$1" -type f ! -name 'last_reserved_ip.*' ! -name lock -printf '%f\n' 2>/dev/null || true
}

# veths_on bridge: the names of the veths on bridge, one a line.
veths_on() {
	ip -o link show master "$1" 2>/dev/null | awk -F': ' '{sub(/@.*/, "", $2); print $2}'
}

# net_leftovers [no-orders]: what is left, by kind, as "r v c o": host-local
# reservations and libcni cache entries of $NET and $HNET, veths on $BRIDGE
# and $HBRIDGE, order records of every pod run (ALL_IDS, STALE_ID; not
# counted with no-orders); each kind is logged when not zero.
net_leftovers() {
	local r=0 v=0 c=0 o=0 k id net br
	for net in "$NET" "$HNET"; do
		k=$(reservations "$net" | wc -l)
		((k == 0)) || log "leftover host-local reservations of $net: $(reservations "$net" | tr '\n' ' ')"
		r=$((r + k))
		k=$(find "$CNI_CACHE/results" -name "$net-*" 2>/dev/null | wc -l)
		((k == 0)) || log "leftover libcni cache entries of $net: $k"
		c=$((c + k))
	done
	for br in "$BRIDGE" "$HBRIDGE"; do
		k=$(veths_on "$br" | wc -l)
		((k == 0)) || log "leftover veths on $br: $k"
		v=$((v + k))
	done
	if [[ ${1:-} != no-orders ]]; then
		for id in "${ALL_IDS[@]}" "${STALE_ID:-}"; do
			[[ -n $id && -e $CNI_CACHE/ocicni/attachments/$id ]] && o=$((o + 1))
		done
		((o == 0)) || log "leftover order records: $o"
	fi
	echo "$r $v $c $o"
}

# wait_for secs what cmd...: until cmd succeeds, secs at most.
wait_for() {
	local secs=$1 what=$2 i
	shift 2
	for i in $(seq 1 $((secs * 4))); do
		"$@" && return 0
		sleep 0.25
	done
	die "$what: not within ${secs}s"
}

# wait_daemon pid log name cmd...: until cmd succeeds, 60 s at most; fails
# at once, with the tail of log, when process pid ends first.
wait_daemon() {
	local pid=$1 logf=$2 name=$3 i
	shift 3
	for i in $(seq 1 120); do
		"$@" && return 0
		kill -0 "$pid" 2>/dev/null || { tail -30 "$logf" >&2; die "$name exited"; }
		sleep 0.5
	done
	tail -30 "$logf" >&2
	die "$name did not get ready in 60s"
}

# stop_pid var [signal]: signals (TERM by default) the daemon whose pid
# the variable var holds, reaps it and empties var.
stop_pid() {
	local -n stop_pid_var=$1
	[[ -n ${stop_pid_var:-} ]] || return 0
	kill -"${2:-TERM}" "$stop_pid_var" 2>/dev/null
	wait "$stop_pid_var" 2>/dev/null || true
	stop_pid_var=
}

# strict cmd...: runs cmd in a subshell with errexit on, so that its EXIT
# trap (a run's cleanup) is done when it returns, and leaves its status in
# STRICT_RC. Not `( ... ) || rc=$?`: errexit would be off inside.
strict() {
	set +e
	(
		set -e
		"$@"
	)
	STRICT_RC=$?
	set -e
}

# face_then_control face control args...: a harness's `all`: its compile
# check, its build, the face's run (face args..., as strict as `run`),
# then, when that passed, the stock control through the same phases
# (control args...), whose leftovers are recorded, not fatal. FACE_RESULTS
# and CONTROL_RESULTS name files for the per-phase figures of the table.
face_then_control() {
	local face=$1 control=$2
	shift 2
	compile_check
	build_bins
	e2e_unlock
	FACE_RESULTS=$(mktemp "/tmp/ocicni-$LOG_TAG-face.XXXXXX")
	CONTROL_RESULTS=$(mktemp "/tmp/ocicni-$LOG_TAG-control.XXXXXX")
	trap 'rm -f "$FACE_RESULTS" "$CONTROL_RESULTS"' EXIT
	strict "$face" "$@"
	((STRICT_RC == 0)) || die "the face's phases failed (exit status $STRICT_RC); the control was not run"
	build_stock_bins
	strict "$control" "$@"
	((STRICT_RC == 0)) || die "the control's harness failed (exit status $STRICT_RC)"
}

# oci_image rootfs name config out: a one-layer OCI image layout of the
# directory rootfs, named name, with config's JSON (the image config's
# "config" object), written by hand (tar, sha256sum, JSON) as the tar out;
# there is no registry.
oci_image() {
	local root=$1 name=$2 cfg=$3 out=$4 d l c m ls cs ms arch
	d=$(mktemp -d "$W/oci.XXXXXX")
	mkdir -p "$d/blobs/sha256"
	tar --numeric-owner --owner=0 --group=0 --mtime=@0 -C "$root" -cf "$d/layer.tar" .
	l=$(sha256sum "$d/layer.tar" | cut -c1-64)
	ls=$(stat -c %s "$d/layer.tar")
	mv "$d/layer.tar" "$d/blobs/sha256/$l"
	arch=$(go env GOARCH)
	printf '{"architecture":"%s","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
		"$arch" "$cfg" "$l" >"$d/config.json"
	c=$(sha256sum "$d/config.json" | cut -c1-64)
	cs=$(stat -c %s "$d/config.json")
	mv "$d/config.json" "$d/blobs/sha256/$c"
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%d},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%d}]}' \
		"$c" "$cs" "$l" "$ls" >"$d/manifest.json"
	m=$(sha256sum "$d/manifest.json" | cut -c1-64)
	ms=$(stat -c %s "$d/manifest.json")
	mv "$d/manifest.json" "$d/blobs/sha256/$m"
	printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%d,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"e2e"},"platform":{"architecture":"%s","os":"linux"}}]}' \
		"$m" "$ms" "$name" "$arch" >"$d/index.json"
	echo '{"imageLayoutVersion":"1.0.0"}' >"$d/oci-layout"
	tar -C "$d" -cf "$out" oci-layout index.json blobs
	rm -rf "$d"
	OCI_MANIFEST=$m
}

# remove_rules id: deletes the iptables rules that name id, and the
# CNI- chains they jump to (the bridge plugin's masquerade chain).
remove_rules() {
	local t rule chain rules
	for t in nat filter; do
		rules=$({ iptables-save -t "$t" || true; } | grep -- "$1" | grep '^-A' || true)
		[[ -n $rules ]] || continue
		while read -r rule; do
			eval "iptables -t $t ${rule/#-A/-D}" 2>/dev/null || true
		done <<<"$rules"
		for chain in $(grep -o -- '-j CNI-[A-Za-z0-9-]*' <<<"$rules" | cut -c4- | sort -u); do
			iptables -t "$t" -F "$chain" 2>/dev/null || true
			iptables -t "$t" -X "$chain" 2>/dev/null || true
		done
	done
}

# remove_bridge_rules bridge...: deletes the filter rules that name one of
# the bridges as an interface: the firewall plugin's isolation rules,
# which its DEL leaves (they belong to the bridge, not to a sandbox), in
# chains other networks may share.
remove_bridge_rules() {
	local br rule
	for br in "$@"; do
		while read -r rule; do
			[[ -z $rule ]] || eval "iptables -t filter ${rule/#-A/-D}" 2>/dev/null || true
		done < <({ iptables-save -t filter || true; } | grep -E -- "^-A .* -[io] $br( |$)" || true)
	done
}

# assert_clean phase: zero leftovers (count_leftovers, the harness's), or
# the run fails; LEFTOVER_KINDS names what is counted. Does nothing in the
# containerd control (CONTROL set), whose leftovers run_control counts.
assert_clean() { # phase
	[[ -z ${CONTROL:-} ]] || return 0
	local n
	n=$(count_leftovers)
	LEFTOVERS=$((LEFTOVERS + n))
	((n == 0)) || die "$1: $n leftovers"
	log "$1: zero leftovers ($LEFTOVER_KINDS)"
}

# check_host_free: neither bridge exists yet and no host interface has an
# address in either subnet.
check_host_free() {
	local br s
	for br in "$BRIDGE" "$HBRIDGE"; do
		ip link show "$br" >/dev/null 2>&1 && die "bridge $br exists already (another run?)"
	done
	for s in "$SUBNET" "$HSUBNET"; do
		! ip -4 -o addr show | grep -qF " ${s%.*}." ||
			die "a host interface has an address in $s: pick another subnet (E2E_SUBNET, E2E_HEAL_SUBNET)"
	done
}

# cleanup_begin rc log lines: the start of an EXIT trap (after its
# `local rc=$?`): errexit off, the traps reset; exits with rc when there is
# no work dir; on failure shows the last lines of crictl.log and of the
# runtime's log ($W/log, its last lines lines).
cleanup_begin() {
	set +e
	trap - EXIT INT TERM
	[[ -n ${W:-} && -d $W ]] || exit "$1"
	log "cleanup (exit status $1)"
	if (($1 != 0)); then
		log "last lines of crictl.log and $2:"
		tail -5 "$W/crictl.log" >&2
		tail -"$3" "$W/$2" >&2
	fi
}

# cleanup_end rc: the end of an EXIT trap: removes $W (kept with E2E_KEEP
# set) and exits with rc.
cleanup_end() {
	[[ -n ${E2E_KEEP:-} ]] || rm -rf "$W"
	if (($1 != 0)); then log "FAILED (see the log lines above)"; fi
	exit "$1"
}

# kill_runc_containers runc root: kills and deletes every container of
# that runc root (cleanup).
kill_runc_containers() {
	local id
	[[ -d $2 ]] || return 0
	for id in $("$1" --root "$2" list -q 2>/dev/null); do
		"$1" --root "$2" kill "$id" KILL 2>/dev/null
		sleep 0.1
		"$1" --root "$2" delete -f "$id" 2>/dev/null
	done
}

# remove_net_state: cleanup's part after the runtime is gone: mounts
# under $W (storage, shm, pinned namespaces), deepest first; both bridges;
# the libcni cache entries and order records of every pod run.
remove_net_state() {
	local id
	awk -v w="$W" '$2 ~ "^"w {print $2}' /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done
	ip link del "$BRIDGE" 2>/dev/null
	ip link del "$HBRIDGE" 2>/dev/null
	for id in "${ALL_IDS[@]}" "${STALE_ID:-}"; do
		[[ -n $id ]] || continue
		rm -f "$CNI_CACHE"/results/*"$id"* "$CNI_CACHE/ocicni/attachments/$id"
	done
}

# phase_churn: NPODS pod sandboxes, each with its own IP in its netns,
# then stopp + rmp of all.
phase_churn() {
	local ids=() i id nips
	log "phase churn: $NPODS pod sandboxes"
	for i in $(seq 1 "$NPODS"); do
		run_pod "churn-$i"
		ids+=("$POD_ID")
	done
	for id in "${ids[@]}"; do check_pod_ip "$id"; done
	nips=$(for id in "${ids[@]}"; do pod_ip "$id"; done | sort -u | wc -l)
	((nips == NPODS)) || die "churn: $nips distinct IPs for $NPODS pods"
	for id in "${ids[@]}"; do stop_rm_pod "$id"; done
	assert_clean "churn"
}

# crash_pods: the crash phase's pods before the kill: 4 live (CRASH_LIVE)
# and 2 stale (CRASH_STALE), each IP checked and kept in CRASH_IP.
crash_pods() {
	local i id
	CRASH_LIVE=() CRASH_STALE=()
	declare -gA CRASH_IP=()
	for i in 1 2 3 4; do
		run_pod "live-$i"
		CRASH_LIVE+=("$POD_ID")
	done
	for i in 1 2; do
		run_pod "stale-$i"
		CRASH_STALE+=("$POD_ID")
	done
	for id in "${CRASH_LIVE[@]}" "${CRASH_STALE[@]}"; do
		check_pod_ip "$id"
		CRASH_IP[$id]=$(pod_ip "$id")
	done
}

# crash_check [tries]: after the restart: the live pods kept their IPs and
# netns addresses; the stale pods are NOTREADY (asked up to tries (1)
# times, 0.5 s apart) and their stopp/rmp removes 2 veths from $BRIDGE;
# then stopp/rmp of the live pods and assert_clean.
crash_check() {
	local tries=${1:-1} i id ip before after
	for id in "${CRASH_LIVE[@]}"; do
		ip=$(pod_ip "$id")
		[[ $ip == "${CRASH_IP[$id]}" ]] || die "crash: live pod $id had ${CRASH_IP[$id]}, now '$ip'"
		check_pod_ip "$id"
	done
	log "crash: the 4 live pods kept their IPs and netns addresses"
	for id in "${CRASH_STALE[@]}"; do
		for i in $(seq 2 "$tries"); do
			crictl inspectp "$id" | jq -e '.status.state == "SANDBOX_NOTREADY"' >/dev/null && break
			sleep 0.5
		done
		crictl inspectp "$id" | jq -e '.status.state == "SANDBOX_NOTREADY"' >/dev/null ||
			die "crash: stale pod $id is not NOTREADY after restart"
	done
	before=$(veths_on "$BRIDGE" | wc -l)
	for id in "${CRASH_STALE[@]}"; do stop_rm_pod "$id"; done
	after=$(veths_on "$BRIDGE" | wc -l)
	((before - after == 2)) || die "crash: stale pods' teardown removed $((before - after)) veths, not 2"
	log "crash: the 2 stale pods were torn down after restart"
	for id in "${CRASH_LIVE[@]}"; do stop_rm_pod "$id"; done
	assert_clean "crash"
}

e2e_lock
