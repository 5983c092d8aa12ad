#!/usr/bin/env bash
# End-to-end test: BuildKit v0.34.2 built against this checkout's pkg/gocni,
# and the same phases against stock BuildKit (go-cni v1.1.14) as a control.
#
#   run.sh compile           rewrite BuildKit's go-cni imports, then go build
#                            + go vet of ./cmd/buildkitd and
#                            ./util/network/cniprovider (no root needed)
#   run.sh compile-negative  the compile check fails with an identifier renamed
#   run.sh build             build buildkitd and buildctl (face, and the face
#                            with gc.patch), the CNI plugins
#   run.sh all               compile, build, then run buildkitd and drive it
#                            with buildctl through every phase in both
#                            network modes (as root), then the control; prints
#                            the face/control table
#   run.sh run [phase...]    build, then only the phases named, face only (as
#                            root); a phase is <mode>-<name> (cni-churn) or a
#                            name, run in every mode that has it
#   run.sh control [phase...]
#                            stock BuildKit v0.34.2 (go-cni v1.1.14, nothing
#                            rewritten) through the same phases (default:
#                            all), as root: failures and leftovers are
#                            recorded per phase, not fatal; fails only on a
#                            harness error
#
# Everything of BuildKit stays out of our module graph: it is built in its
# own directory under $E2E_CACHE with its own go.mod. See README.md beside this.
set -Eeuo pipefail

BUILDKIT_VERSION=${BUILDKIT_VERSION:-v0.34.2}
MODE=${1:-compile}
GOCNI=github.com/containerd/go-cni
BKMOD=github.com/moby/buildkit
# BuildKit's Dockerfile builds buildkitd with CGO_ENABLED=0 and these tags
# (and buildctl with no tag).
BK_TAGS=${BK_TAGS:-osusergo netgo static_build seccomp}
BK_PKGS=(./cmd/buildkitd ./util/network/cniprovider/...)
# The go-cni that stock BuildKit $BUILDKIT_VERSION requires: the control.
STOCK_GOCNI=${STOCK_GOCNI:-v1.1.14}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=e2e-buildkit
# REPO, E2E_CACHE, OURMOD, T0, log, die (which ends only the phase in a
# control phase), install_debs, keyhash, fetch_src...
# shellcheck source=test/e2e/lib/common.sh
. "$HERE/../lib/common.sh"
export CGO_ENABLED=0

# prepare_src: BuildKit with its go-cni imports rewritten (see gocni_src).
prepare_src() { gocni_src BuildKit "$BKMOD" "$BUILDKIT_VERSION"; }

# in_dir dir cmd...: runs a go command in a BuildKit copy, which owns its
# go.mod and go.sum (-mod=mod may add our dependencies to them); this
# checkout's go.mod is only read, through the replace.
in_dir() {
	local d=$1
	shift
	(cd "$d" && GOFLAGS="$GOFLAGS -mod=mod" "$@")
}

compile_check() {
	local t deps
	prepare_src
	t=$(date +%s)
	log "compile check: go build + go vet of ${BK_PKGS[*]} (tags: $BK_TAGS, CGO_ENABLED=0) against $REPO/pkg/gocni"
	in_dir "$SRC" go build -tags "$BK_TAGS" "${BK_PKGS[@]}" || die "BuildKit does not build against $REPO/pkg/gocni"
	log "go build passed ($(($(date +%s) - t))s)"
	in_dir "$SRC" go vet -tags "$BK_TAGS" "${BK_PKGS[@]}" || die "go vet of BuildKit against $REPO/pkg/gocni failed"
	log "go vet passed ($(($(date +%s) - t))s)"
	# Captured first: grep -q on a pipe would SIGPIPE go list under pipefail.
	deps=$(in_dir "$SRC" go list -deps -test -tags "$BK_TAGS" "${BK_PKGS[@]}") || die "go list -deps failed"
	grep -qx "$OURMOD/pkg/gocni" <<<"$deps" || die "BuildKit does not depend on $OURMOD/pkg/gocni"
	! grep -q "^$GOCNI" <<<"$deps" || die "BuildKit still links $GOCNI: $(grep "^$GOCNI" <<<"$deps" | head -3)"
	log "dependencies: $OURMOD/pkg/gocni in, no $GOCNI (packages and their tests)"
	log "compile check passed"
}

# compile_negative: the compile check must fail when an identifier
# BuildKit uses is gone: gocni.WithInterfacePrefix renamed in a scratch
# copy; it must fail at that identifier.
compile_negative() {
	compile_negative_check buildkit gocni WithInterfacePrefix "src-buildkit-$BUILDKIT_VERSION" \
		'undefined: cni.WithInterfacePrefix'
}

# build_bk src bin label goflags: buildkitd and buildctl from src into
# bin, with GOFLAGS+=goflags, unless bin has them.
build_bk() {
	local t
	if [[ -x $2/buildkitd && -x $2/buildctl ]]; then
		log "${3}buildkitd, buildctl: $2 (cached)"
	else
		t=$(date +%s)
		log "building ${3}buildkitd and buildctl (tags: $BK_TAGS, CGO_ENABLED=0)"
		rm -rf "$2.tmp" && mkdir -p "$2.tmp"
		(cd "$1" && GOFLAGS="$GOFLAGS $4" go build -trimpath -tags "$BK_TAGS" \
			-ldflags "-X $BKMOD/version.Version=$BUILDKIT_VERSION" \
			-o "$2.tmp/" ./cmd/buildkitd ./cmd/buildctl) || die "building ${3}buildkitd failed"
		rm -rf "$2" && mv "$2.tmp" "$2"
		log "${3}buildkitd, buildctl built in $(($(date +%s) - t))s"
	fi
	"$2/buildkitd" --version | grep -q "$BUILDKIT_VERSION" || die "$2/buildkitd is not $BUILDKIT_VERSION"
}

# prepare_gc_src: the face's source with gc.patch applied (one Face.GC
# call with no valid sandbox at provider start), for the gc phases only.
prepare_gc_src() {
	local recipe
	GC_SRC=$SRC-gc
	recipe=$( (
		cat "$HERE/gc.patch"
		cat "$SRC/.prepared"
	) | sha256sum | cut -c1-16)
	if [[ -f $GC_SRC/.prepared && $(<"$GC_SRC/.prepared") == "$recipe" ]]; then
		log "BuildKit source with gc.patch: $GC_SRC (cached)"
		return
	fi
	rm -rf "$GC_SRC" && cp -r "$SRC" "$GC_SRC"
	(cd "$GC_SRC" && patch -s -p1 <"$HERE/gc.patch") || die "gc.patch does not apply to BuildKit $BUILDKIT_VERSION"
	log "gc.patch applied: $(cd "$GC_SRC" && diff -u "$SRC/util/network/cniprovider" util/network/cniprovider | grep -c '^+[^+]') lines added"
	printf '%s\n' "$recipe" >"$GC_SRC/.prepared"
}

# build_bins: the face's buildkitd and buildctl (BIN), the same with
# gc.patch (GC_BIN), keyed by BuildKit version and our tree hash,
# ocicnitool (OCICNITOOL), then build_tools.
build_bins() {
	local key
	command -v patch >/dev/null || install_debs patch
	prepare_src
	prepare_gc_src
	key=$(keyhash)
	BIN=$E2E_CACHE/bin-buildkit-$BUILDKIT_VERSION-$key
	GC_BIN=$E2E_CACHE/bin-buildkit-gc-$BUILDKIT_VERSION-$key
	build_bk "$SRC" "$BIN" "" -mod=mod
	build_bk "$GC_SRC" "$GC_BIN" "gc.patch " -mod=mod
	# The gc phase attaches its foreign sandbox with this checkout's
	# ocicnitool (see foreign.sh); go build is incremental.
	OCICNITOOL=$E2E_CACHE/bin-ocicnitool-$(printf '%s' "$REPO" | sha256sum | cut -c1-8)/ocicnitool
	(cd "$REPO" && go build -o "$OCICNITOOL" ./cmd/ocicnitool) || die "building ocicnitool failed"
	go version -m "$BIN/buildkitd" | grep -qF "$OURMOD" || die "$BIN/buildkitd does not link $OURMOD"
	! go version -m "$BIN/buildkitd" | grep -qP "^\tdep\t\Q$GOCNI\E\t" || die "$BIN/buildkitd links $GOCNI"
	build_tools
}

# build_tools: the reference CNI plugins from tools/ (bridge, host-local,
# loopback, firewall, ...).
build_tools() {
	build_plugins "$E2E_CACHE/plugins-buildkit-$(keyhash)"
	log "CNI plugins ($PLUGINS) ready"
}

# prepare_stock_src: the control's BuildKit, as published (see
# stock_src), in STOCK_SRC.
prepare_stock_src() {
	STOCK_SRC=$E2E_CACHE/src-buildkit-stock-$BUILDKIT_VERSION
	stock_src "$BKMOD" "$BUILDKIT_VERSION" "$STOCK_SRC" BuildKit
}

# build_stock_bins: buildkitd and buildctl from the stock source with the
# face's tags and flags (-mod=vendor is not used: the module-proxy copy
# has no vendor/; -mod=readonly, the source is not touched), into
# bin-buildkit-stock-$BUILDKIT_VERSION; then build_tools. buildkitd must
# link go-cni $STOCK_GOCNI and nothing of ours.
build_stock_bins() {
	command -v jq >/dev/null || install_debs jq
	prepare_stock_src
	BIN=$E2E_CACHE/bin-buildkit-stock-$BUILDKIT_VERSION
	GC_BIN=
	build_bk "$STOCK_SRC" "$BIN" "stock " -mod=readonly
	stock_links "$BIN/buildkitd" buildkitd
	build_tools
}

case $MODE in
build)
	build_bins
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
	# shellcheck source=test/e2e/buildkit/lib.sh
	. "$HERE/lib.sh"
	# shellcheck source=test/e2e/buildkit/control.sh
	. "$HERE/control.sh"
	# shellcheck source=test/e2e/buildkit/foreign.sh
	. "$HERE/foreign.sh"
	shift || true
	select_phases "$@"
	case $MODE in
	run)
		build_bins
		e2e_unlock
		run_e2e
		;;
	all) face_then_control run_e2e run_control ;;
	control)
		build_stock_bins
		e2e_unlock
		run_control
		;;
	esac
	;;
*) die "usage: $0 [compile|compile-negative|build|all [phase...]|run [phase...]|control [phase...]]" ;;
esac
