#!/usr/bin/env bash
# End-to-end test: CRI-O v1.34.0 built against this checkout's pkg/ocicni.
#
#   run.sh compile   rewrite CRI-O, go build + go vet its ocicni users (fast)
#   run.sh compile-negative  the compile check fails with an identifier renamed
#   run.sh build     compile + build crio, pinns, crictl, plugins, pause image
#   run.sh [all]     build, then run crio and drive it with crictl (as root)
#   run.sh heal      build (no compile check), then only the heal phase (as root)
#   run.sh critest   build (no compile check), then only the critest phase (as root)
#   run.sh critest-stock  the same with stock CRI-O (cri-o/ocicni), for comparison
#   run.sh critest-bench  build (no compile check), then only critest's pod
#                    benchmark, into $CRITEST_BENCH_OUT (as root)
#   run.sh critest-bench-stock  the same with stock CRI-O
#
# Everything of CRI-O stays out of our module graph: it is built in its own
# directory under $E2E_CACHE with its own go.mod. See README.md beside this.
set -Eeuo pipefail

CRIO_VERSION=${CRIO_VERSION:-v1.34.0}
CRICTL_VERSION=${CRICTL_VERSION:-v1.34.0}
MODE=${1:-all}
NPODS=${NPODS:-20}
LOG_TAG=e2e-crio
# REPO, E2E_CACHE, OURMOD, T0, log, die, install_debs, keyhash, fetch_src...
# shellcheck source=test/e2e/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# CRITEST_VERSION, build_critest, critest_images, run_critest...
# shellcheck source=test/e2e/lib/critest.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/critest.sh"

# prepare_src: a writable copy of CRI-O, imports rewritten to our module,
# with a replace to this checkout. Keyed by CRI-O version and checkout path.
prepare_src() {
	local pathkey files
	pathkey=$(printf '%s' "$REPO" | sha256sum | cut -c1-8)
	SRC=$E2E_CACHE/src-cri-o-$CRIO_VERSION-$pathkey
	if [[ -f $SRC/.prepared ]]; then
		log "CRI-O source: $SRC (cached)"
		return
	fi
	fetch_src github.com/cri-o/cri-o "$CRIO_VERSION" "$SRC" CRI-O
	files=$(grep -rl --include='*.go' 'github.com/cri-o/ocicni/pkg/ocicni' "$SRC" || true)
	[[ -n $files ]] || die "no CRI-O file imports github.com/cri-o/ocicni/pkg/ocicni"
	# shellcheck disable=SC2086
	sed -i 's#github.com/cri-o/ocicni/pkg/ocicni#'"$OURMOD"'/pkg/ocicni#g' $files
	log "rewrote $(wc -w <<<"$files") files to import $OURMOD/pkg/ocicni"
	require_ours "$SRC" github.com/cri-o/ocicni
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

# build_crio src label mod-flag: go build of src's cmd/crio into
# $BIN.tmp/crio (label: "" or "stock ").
build_crio() {
	build_deps
	log "building ${2}crio (a cold build takes ~7 min on 2 cores)"
	mkdir -p "$BIN.tmp"
	(cd "$1" && go build "$3" -trimpath -tags "$CRIO_TAGS" -o "$BIN.tmp/crio" ./cmd/crio) ||
		die "${2}crio build failed"
}

# build_all: crio + pinns (keyed by our tree hash), crictl, critest, plugins.
build_all() {
	prepare_src
	local key t
	key=$(keyhash)
	BIN=$E2E_CACHE/bin-$key
	if [[ -x $BIN/crio && -x $BIN/pinns ]]; then
		log "crio and pinns: $BIN (cached for tree $key)"
	else
		t=$(date +%s)
		build_crio "$SRC" "" -mod=mod
		log "building pinns"
		(cd "$SRC" && make -s -C pinns >/dev/null && cp bin/pinns "$BIN.tmp/pinns") || die "pinns build failed"
		rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
		log "crio and pinns built in $(($(date +%s) - t))s"
	fi
	if ! "$BIN/crio" version 2>/dev/null | grep -q "${CRIO_VERSION#v}"; then
		die "$BIN/crio is not $CRIO_VERSION"
	fi
	build_crictl
	build_critest
	log "building the reference CNI plugins from tools/"
	build_plugins "$E2E_CACHE/plugins"
}

# build_stock: crio as CRI-O $CRIO_VERSION publishes it, with the
# cri-o/ocicni its go.mod requires, for critest's comparison (run.sh
# critest-stock); pinns, crictl, critest and the plugins are the face's
# (build_all first). Sets BIN.
build_stock() {
	local pinns=$BIN/pinns t
	command -v jq >/dev/null || install_debs jq
	GOCNI=github.com/cri-o/ocicni
	STOCK_GOCNI=${STOCK_OCICNI:-v0.4.3}
	STOCK_SRC=$E2E_CACHE/src-cri-o-stock-$CRIO_VERSION
	stock_src github.com/cri-o/cri-o "$CRIO_VERSION" "$STOCK_SRC" CRI-O
	BIN=$E2E_CACHE/bin-crio-stock-$CRIO_VERSION
	if [[ ! -x $BIN/crio ]]; then
		t=$(date +%s)
		build_crio "$STOCK_SRC" "stock " -mod=readonly
		rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
		log "stock crio built in $(($(date +%s) - t))s"
	fi
	cp "$pinns" "$BIN/pinns"
	stock_links "$BIN/crio" crio
}

# compile_negative: the compile check must fail when an exported identifier
# CRI-O uses is gone: ocicni.BandwidthConfig renamed in a scratch copy.
compile_negative() {
	compile_negative_check crio ocicni BandwidthConfig "src-cri-o-$CRIO_VERSION"
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
all | heal | critest | critest-stock | critest-bench | critest-bench-stock) ;;
*) die "usage: $0 [compile|compile-negative|build|all|heal|critest|critest-stock|critest-bench|critest-bench-stock]" ;;
esac

# shellcheck source=test/e2e/crio/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if [[ $MODE == heal || $MODE == critest* ]]; then
	build_all
	[[ $MODE != *-stock ]] || build_stock
	e2e_unlock
	phase=${MODE%-stock}
	run_e2e "${phase//-/_}"
	exit 0
fi
compile_check
build_all
e2e_unlock
run_e2e
