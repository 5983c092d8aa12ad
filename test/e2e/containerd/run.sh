#!/usr/bin/env bash
# End-to-end test: containerd v2.4.2 built against this checkout's pkg/gocni,
# and the same phases against stock containerd (go-cni v1.1.14) as a control.
#
#   run.sh compile           rewrite containerd's go-cni imports, then go build
#                            + go vet of ./internal/cri/... and ./cmd/ctr/...,
#                            go build of the same for windows, go test of
#                            ./internal/cri/server/... (no root needed)
#   run.sh compile-negative  the compile check fails with an identifier renamed
#   run.sh build             build containerd, ctr, the runc shim, crictl, plugins
#   run.sh build-stock       the same from stock containerd (go-cni v1.1.14)
#   run.sh all               compile, build, then run containerd and drive it
#                            with crictl through every phase (as root), then
#                            the control; prints the face/control table
#   run.sh run [phase...]    build, then only the phases named (as root)
#   run.sh control [phase...]
#                            stock containerd v2.4.2 (go-cni v1.1.14, nothing
#                            rewritten) through the same phases (default:
#                            all), as root: failures and leftovers are
#                            recorded per phase, not fatal; fails only on a
#                            harness error or when the control leaks nowhere
#                            in heal and addfail (the phases would prove
#                            nothing)
#
# Everything of containerd stays out of our module graph: it is built in its
# own directory under $E2E_CACHE with its own go.mod. See README.md beside this.
set -Eeuo pipefail

CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
MODE=${1:-compile}
GOCNI=github.com/containerd/go-cni
# containerd's Makefile builds with these tags (static_build etc. only for
# a static build); none of them is needed for cgo.
CTRD_TAGS=${CTRD_TAGS:-urfave_cli_no_docs}
CTRD_PKGS=(./internal/cri/... ./cmd/ctr/...)
CTRD_TESTS=(./internal/cri/server/...)
# The running test's binaries: no_btrfs because the btrfs snapshotter needs
# libbtrfs headers with cgo, and no test snapshotter is btrfs.
CTRD_BIN_TAGS=${CTRD_BIN_TAGS:-urfave_cli_no_docs no_btrfs}
CRICTL_VERSION=${CRICTL_VERSION:-v1.34.0}
# The go-cni that stock containerd $CONTAINERD_VERSION requires: the control.
STOCK_GOCNI=${STOCK_GOCNI:-v1.1.14}
LOG_TAG=e2e-containerd
# REPO, E2E_CACHE, OURMOD, T0, log, die (which ends only the phase in a
# control phase), install_debs, keyhash, fetch_src...
# shellcheck source=test/e2e/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# CRITEST_VERSION, build_critest, critest_oci_images, run_critest...
# shellcheck source=test/e2e/lib/critest.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/critest.sh"

# prepare_src: containerd with its go-cni imports rewritten (see gocni_src).
prepare_src() { gocni_src containerd github.com/containerd/containerd/v2 "$CONTAINERD_VERSION"; }

# in_src cmd...: runs a go command in containerd's copy, which owns its
# go.mod and go.sum (-mod=mod may add our dependencies to them); this
# checkout's go.mod is only read, through the replace.
in_src() { (cd "$SRC" && GOFLAGS="$GOFLAGS -mod=mod" "$@"); }

compile_check() {
	local t deps
	prepare_src
	command -v gcc >/dev/null || log "no gcc: cgo-only files of containerd are left out"
	t=$(date +%s)
	log "compile check: go build + go vet of ${CTRD_PKGS[*]} (tags: $CTRD_TAGS) against $REPO/pkg/gocni"
	in_src go build -tags "$CTRD_TAGS" "${CTRD_PKGS[@]}" || die "containerd does not build against $REPO/pkg/gocni"
	log "go build passed ($(($(date +%s) - t))s)"
	in_src go vet -tags "$CTRD_TAGS" "${CTRD_PKGS[@]}" || die "go vet of containerd against $REPO/pkg/gocni failed"
	log "go vet passed ($(($(date +%s) - t))s)"
	# service_windows.go uses the face too (cni.New and its options).
	GOOS=windows in_src go build -tags "$CTRD_TAGS" "${CTRD_PKGS[@]}" ||
		die "containerd does not build for windows against $REPO/pkg/gocni"
	log "GOOS=windows go build passed ($(($(date +%s) - t))s)"
	# Captured first: grep -q on a pipe would SIGPIPE go list under pipefail.
	deps=$(in_src go list -deps -test -tags "$CTRD_TAGS" "${CTRD_PKGS[@]}") || die "go list -deps failed"
	grep -qx "$OURMOD/pkg/gocni" <<<"$deps" || die "containerd does not depend on $OURMOD/pkg/gocni"
	! grep -q "^$GOCNI" <<<"$deps" || die "containerd still links $GOCNI: $(grep "^$GOCNI" <<<"$deps" | head -3)"
	log "dependencies: $OURMOD/pkg/gocni in, no $GOCNI (packages and their tests)"
	t=$(date +%s)
	log "go test of ${CTRD_TESTS[*]} (containerd's unit tests, fake CNI plugin)"
	in_src go test -count=1 -tags "$CTRD_TAGS" "${CTRD_TESTS[@]}" || die "containerd's unit tests failed against $REPO/pkg/gocni"
	log "go test passed ($(($(date +%s) - t))s)"
	log "compile check passed"
}

# compile_negative: the compile check must fail when an exported identifier
# containerd uses is gone: gocni.WithMinNetworkCount renamed in a scratch
# copy; it must fail at that identifier.
compile_negative() {
	compile_negative_check containerd gocni WithMinNetworkCount "src-containerd-$CONTAINERD_VERSION" \
		'undefined: cni.WithMinNetworkCount'
}

# build_ctrd src label goflags: containerd, ctr and the runc shim from src
# into $BIN, with $CTRD_BIN_TAGS and GOFLAGS+=goflags, unless $BIN has them.
build_ctrd() {
	local t
	if [[ -x $BIN/containerd && -x $BIN/ctr && -x $BIN/containerd-shim-runc-v2 ]]; then
		log "${2}containerd, ctr, shim: $BIN (cached${KEY:+ for tree $KEY})"
	else
		command -v gcc >/dev/null || install_debs gcc libc6-dev
		t=$(date +%s)
		log "building ${2}containerd, ctr and containerd-shim-runc-v2 (tags: $CTRD_BIN_TAGS)"
		rm -rf "$BIN.tmp" && mkdir -p "$BIN.tmp"
		(cd "$1" && GOFLAGS="$GOFLAGS $3" go build -trimpath -tags "$CTRD_BIN_TAGS" \
			-ldflags "-X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
			-o "$BIN.tmp/" ./cmd/containerd ./cmd/ctr ./cmd/containerd-shim-runc-v2) ||
			die "building ${2}containerd${KEY:+ against $REPO/pkg/gocni} failed"
		rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
		log "${2}containerd, ctr, shim built in $(($(date +%s) - t))s"
	fi
	"$BIN/containerd" --version | grep -q "$CONTAINERD_VERSION" || die "$BIN/containerd is not $CONTAINERD_VERSION"
}

# build_bins: containerd, ctr and the runc shim from the prepared source
# (keyed by containerd version and our tree hash), then build_tools.
build_bins() {
	prepare_src
	KEY=$(keyhash)
	BIN=$E2E_CACHE/bin-containerd-$CONTAINERD_VERSION-$KEY
	build_ctrd "$SRC" "" -mod=mod
	build_tools
	OCICNITOOL=$BIN/ocicnitool
	(cd "$REPO" && go build -o "$OCICNITOOL" ./cmd/ocicnitool) || die "building ocicnitool failed"
	log "ocicnitool ready"
}

# build_tools: what the face and the control share: crictl, critest and
# the reference CNI plugins from tools/.
build_tools() {
	build_crictl
	build_critest
	build_plugins "$E2E_CACHE/plugins-containerd-$(keyhash)"
	log "crictl, CNI plugins ($PLUGINS) ready"
}

# prepare_stock_src: the control's containerd, as published (see
# stock_src), in STOCK_SRC.
prepare_stock_src() {
	STOCK_SRC=$E2E_CACHE/src-containerd-stock-$CONTAINERD_VERSION
	stock_src github.com/containerd/containerd/v2 "$CONTAINERD_VERSION" "$STOCK_SRC" containerd
}

# build_stock_bins: containerd, ctr and the runc shim from the stock
# source with the face's tags and flags (-mod=readonly: the source is not
# touched), into bin-containerd-stock-$CONTAINERD_VERSION; then
# build_tools. The binary must link go-cni $STOCK_GOCNI and nothing of ours.
build_stock_bins() {
	command -v jq >/dev/null || install_debs jq
	prepare_stock_src
	KEY=
	BIN=$E2E_CACHE/bin-containerd-stock-$CONTAINERD_VERSION
	build_ctrd "$STOCK_SRC" "stock " -mod=readonly
	stock_links "$BIN/containerd" containerd
	build_tools
}

case $MODE in
build)
	build_bins
	log "total $(($(date +%s) - T0))s"
	;;
build-stock)
	# For test/e2e/nerdctl's control: stock containerd, crictl, plugins.
	build_stock_bins
	log "total $(($(date +%s) - T0))s"
	;;
compile)
	compile_check
	log "total $(($(date +%s) - T0))s"
	;;
compile-negative)
	compile_negative
	log "total $(($(date +%s) - T0))s"
	;;
run | all | control)
	# shellcheck source=test/e2e/containerd/lib.sh
	. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
	# shellcheck source=test/e2e/containerd/control.sh
	. "$(dirname "${BASH_SOURCE[0]}")/control.sh"
	shift || true
	check_phases "$@"
	case $MODE in
	run)
		build_bins
		e2e_unlock
		run_e2e "$@"
		;;
	all) face_then_control run_e2e run_control "$@" ;;
	control)
		build_stock_bins
		e2e_unlock
		run_control "$@"
		;;
	esac
	;;
*) die "usage: $0 [compile|compile-negative|build|build-stock|all [phase...]|run [phase...]|control [phase...]]" ;;
esac
