#!/usr/bin/env bash
# End-to-end test: CRI-O v1.34.0 built against this checkout's pkg/ocicni.
#
#   run.sh compile   rewrite CRI-O, go build + go vet its ocicni users (fast)
#   run.sh compile-negative  the compile check fails with an identifier renamed
#   run.sh build     compile + build crio, pinns, crictl, plugins, pause image
#   run.sh [all]     build, then run crio and drive it with crictl (as root)
#   run.sh heal      build (no compile check), then only the heal phase (as root)
#
# Everything of CRI-O stays out of our module graph: it is built in its own
# directory under $E2E_CACHE with its own go.mod. See README.md beside this.
set -Eeuo pipefail

CRIO_VERSION=${CRIO_VERSION:-v1.34.0}
CRICTL_VERSION=${CRICTL_VERSION:-v1.34.0}
MODE=${1:-all}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
E2E_CACHE=${E2E_CACHE:-${XDG_CACHE_HOME:-/root/.cache}/ocicni-e2e}
NPODS=${NPODS:-20}
OURMOD=github.com/seed-671fdd43/ocicni
T0=$(date +%s)

export GOWORK=off GOFLAGS=-buildvcs=false
log() { printf '[e2e-crio %4ds] %s\n' "$(($(date +%s) - T0))" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

# keyhash: hash of this checkout's library (what CRI-O compiles of us).
keyhash() {
	(cd "$REPO" && find go.mod go.sum pkg internal -type f -name '*' ! -name '*_test.go' -print0 |
		sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
}

# prepare_src: a writable copy of CRI-O, imports rewritten to our module,
# with a replace to this checkout. Keyed by CRI-O version and checkout path.
prepare_src() {
	local pathkey dl
	pathkey=$(printf '%s' "$REPO" | sha256sum | cut -c1-8)
	SRC=$E2E_CACHE/src-cri-o-$CRIO_VERSION-$pathkey
	if [[ -f $SRC/.prepared ]]; then
		log "CRI-O source: $SRC (cached)"
		return
	fi
	log "downloading github.com/cri-o/cri-o@$CRIO_VERSION from the module proxy"
	dl=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "github.com/cri-o/cri-o@$CRIO_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[[ -d $dl ]] || die "go mod download gave no source dir"
	rm -rf "$SRC" && mkdir -p "$(dirname "$SRC")"
	cp -r "$dl" "$SRC" && chmod -R u+w "$SRC"
	if [[ -d $SRC/vendor ]]; then
		log "CRI-O vendors: dropping vendor/ and building with -mod=mod"
		rm -rf "$SRC/vendor"
	fi
	local files
	files=$(grep -rl --include='*.go' 'github.com/cri-o/ocicni/pkg/ocicni' "$SRC" || true)
	[[ -n $files ]] || die "no CRI-O file imports github.com/cri-o/ocicni/pkg/ocicni"
	# shellcheck disable=SC2086
	sed -i 's#github.com/cri-o/ocicni/pkg/ocicni#'"$OURMOD"'/pkg/ocicni#g' $files
	log "rewrote $(wc -w <<<"$files") files to import $OURMOD/pkg/ocicni"
	(cd "$SRC" &&
		go mod edit -require="$OURMOD@v0.0.0-00010101000000-000000000000" -replace="$OURMOD=$REPO" &&
		go mod edit -droprequire=github.com/cri-o/ocicni)
	touch "$SRC/.prepared"
}

CRIO_TAGS="containers_image_openpgp containers_image_ostree_stub exclude_graphdriver_btrfs btrfs_noversion seccomp"

# build_deps: the compile check already builds with the seccomp tag, which
# needs cgo, gcc and libseccomp's headers through pkg-config.
build_deps() {
	command -v gcc >/dev/null || install_debs gcc
	pkg-config --exists libseccomp 2>/dev/null || install_debs libseccomp-dev pkg-config
}

compile_check() {
	prepare_src
	build_deps
	log "compile check: go build + go vet of cnimgr, test/mocks/ocicni, server (against $REPO)"
	(cd "$SRC" && go build -mod=mod -tags "$CRIO_TAGS" ./internal/config/cnimgr ./test/mocks/ocicni ./server &&
		go vet -mod=mod -tags "$CRIO_TAGS test" ./internal/config/cnimgr ./test/mocks/ocicni ./server) ||
		die "CRI-O does not compile against $REPO/pkg/ocicni"
	grep -rq 'cri-o/ocicni' "$SRC/go.mod" && die "CRI-O go.mod still requires cri-o/ocicni"
	local deps # captured first: grep -q on a pipe would SIGPIPE go list under pipefail
	deps=$(cd "$SRC" && go list -mod=mod -deps -tags "$CRIO_TAGS" ./server) || die "go list of CRI-O's server failed"
	grep -qx "$OURMOD/pkg/ocicni" <<<"$deps" || die "CRI-O's server does not depend on $OURMOD/pkg/ocicni"
	! grep -q '^github.com/cri-o/ocicni' <<<"$deps" || die "CRI-O still links github.com/cri-o/ocicni"
	log "compile check passed"
}

# build_all: crio + pinns (keyed by our tree hash), crictl, plugins.
build_all() {
	prepare_src
	local key t
	key=$(keyhash)
	BIN=$E2E_CACHE/bin-$key
	if [[ -x $BIN/crio && -x $BIN/pinns ]]; then
		log "crio and pinns: $BIN (cached for tree $key)"
	else
		build_deps
		t=$(date +%s)
		log "building crio (a cold build takes ~7 min on 2 cores)"
		mkdir -p "$BIN.tmp"
		(cd "$SRC" && go build -mod=mod -trimpath -tags "$CRIO_TAGS" -o "$BIN.tmp/crio" ./cmd/crio) ||
			die "crio build failed"
		log "building pinns"
		(cd "$SRC" && make -s -C pinns >/dev/null && cp bin/pinns "$BIN.tmp/pinns") || die "pinns build failed"
		rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
		log "crio and pinns built in $(($(date +%s) - t))s"
	fi
	if ! "$BIN/crio" version 2>/dev/null | grep -q "${CRIO_VERSION#v}"; then
		die "$BIN/crio is not $CRIO_VERSION"
	fi
	if [[ ! -x $E2E_CACHE/crictl-$CRICTL_VERSION/crictl ]]; then
		log "building crictl $CRICTL_VERSION"
		GOBIN=$E2E_CACHE/crictl-$CRICTL_VERSION go install "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION" ||
			die "crictl build failed"
	fi
	CRICTL_BIN=$E2E_CACHE/crictl-$CRICTL_VERSION/crictl
	PLUGINS=$E2E_CACHE/plugins
	log "building the reference CNI plugins from tools/"
	mkdir -p "$PLUGINS"
	(cd "$REPO/tools" && go build -o "$PLUGINS/" tool) || die "plugin build failed"
}

install_debs() {
	log "apt-get install $*"
	if [[ -z ${APT_UPDATED:-} ]]; then
		apt-get update -qq >/dev/null || true
		APT_UPDATED=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null || die "apt-get install $* failed"
}

# compile_negative: the compile check must fail when an exported identifier
# CRI-O uses is gone. Renames ocicni.BandwidthConfig in a scratch copy of
# this checkout (never in the repo) and runs the compile check there.
compile_negative() {
	local scratch rc=0
	scratch=$(mktemp -d /tmp/ocicni-e2e-negative.XXXXXX)
	(cd "$REPO" && tar --exclude=./.git --exclude=./bin -cf - .) | tar -xf - -C "$scratch"
	sed -i 's/\bBandwidthConfig\b/BandwidthConfigRenamed/g' "$scratch"/pkg/ocicni/*.go
	log "negative check: compile check against $scratch with ocicni.BandwidthConfig renamed"
	E2E_CACHE=$E2E_CACHE "$scratch/test/e2e/crio/run.sh" compile >"$scratch.log" 2>&1 || rc=$?
	grep -m3 'BandwidthConfig' "$scratch.log" >&2 || true
	rm -rf "$scratch" "$E2E_CACHE"/src-cri-o-"$CRIO_VERSION"-"$(printf '%s' "$scratch" | sha256sum | cut -c1-8)"
	rm -f "$scratch.log"
	((rc != 0)) || die "negative check: the compile check passed although BandwidthConfig was renamed"
	log "negative check passed: the compile check failed as it must"
}

case $MODE in
compile-negative)
	compile_negative
	exit 0
	;;
compile)
	compile_check
	log "total $(($(date +%s) - T0))s"
	exit 0
	;;
build)
	compile_check
	build_all
	log "total $(($(date +%s) - T0))s"
	exit 0
	;;
all | heal) ;;
*) die "usage: $0 [compile|compile-negative|build|all|heal]" ;;
esac

# shellcheck source=test/e2e/crio/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if [[ $MODE == heal ]]; then
	build_all
	run_e2e heal
	exit 0
fi
compile_check
build_all
run_e2e
