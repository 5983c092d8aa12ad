#!/usr/bin/env bash
# End-to-end test: HashiCorp Nomad v1.11.3 built against this checkout's
# pkg/gocni (and stock, as a control).
#
#   run.sh compile    rewrite Nomad's go-cni imports, then go build + go vet
#                     of the client's networking packages (no root needed)
#   run.sh build      build the nomad binary with the face, keyed by our
#                     tree (15 min cold on 2 busy CPUs), and the plugins
#   run.sh all        compile, build, then a single-node agent through
#                     every phase (as root), then the stock control; prints
#                     the face/control table
#   run.sh run [phase...]
#                     build, then only the phases named (as root)
#   run.sh control [phase...]
#                     stock Nomad through the same phases: leftovers are
#                     recorded per phase, not fatal
#
# Nomad is BUSL-1.1 licensed: this script downloads it from the module
# proxy at run time and rewrites it in a copy under $E2E_CACHE; the
# repository holds none of its code. Nothing of Nomad enters our module
# graph. See README.md beside this.
set -Eeuo pipefail

NOMAD_VERSION=${NOMAD_VERSION:-v1.11.3}
# Nomad's go.mod takes its api module from ./api, which the module
# proxy's zip of Nomad leaves out (a nested module): it is taken from the
# proxy instead, at the snapshot of Nomad's main branch nearest the
# release.
NOMAD_API=github.com/hashicorp/nomad/api
NOMAD_API_VERSION=${NOMAD_API_VERSION:-v0.0.0-20261016150620-df630b26e78a}
MODE=${1:-compile}
GOCNI=github.com/containerd/go-cni
STOCK_GOCNI=${STOCK_GOCNI:-v1.1.13}
NOMAD_PKGS=(./client/allocrunner/...)
LOG_TAG=e2e-nomad
# shellcheck source=test/e2e/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"

# use_proxy_api dir: dir's go.mod takes Nomad's api module from the proxy.
use_proxy_api() {
	(cd "$1" && go mod edit -dropreplace="$NOMAD_API" -replace="$NOMAD_API=$NOMAD_API@$NOMAD_API_VERSION")
}

# prepare_src: Nomad with its go-cni imports rewritten and its api module
# from the proxy (see gocni_src).
prepare_src() { gocni_src Nomad github.com/hashicorp/nomad "$NOMAD_VERSION" use_proxy_api; }

in_src() { (cd "$SRC" && GOFLAGS="$GOFLAGS -mod=mod" "$@"); }

compile_check() {
	local t deps
	prepare_src
	t=$(date +%s)
	log "compile check: go build + go vet of ${NOMAD_PKGS[*]} against $REPO/pkg/gocni"
	in_src go build "${NOMAD_PKGS[@]}" || die "Nomad does not build against $REPO/pkg/gocni"
	# -printf=false: one of Nomad's own tests (alloc_runner_test.go) fails
	# the printf check, whatever go-cni it builds with.
	in_src go vet -printf=false ./client/allocrunner/ || die "go vet of Nomad's allocrunner against $REPO/pkg/gocni failed"
	log "go build + go vet passed ($(($(date +%s) - t))s)"
	# The CNI configurator's unit tests, with Nomad's mock of the CNI
	# interface (so our interface has no method go-cni's lacks).
	in_src go test -count=1 -vet=off -run 'CNI|Cni' ./client/allocrunner/ || die "Nomad's CNI unit tests failed against $REPO/pkg/gocni"
	log "go test -run 'CNI|Cni' ./client/allocrunner/ passed"
	deps=$(in_src go list -deps .) || die "go list -deps failed"
	grep -qx "$OURMOD/pkg/gocni" <<<"$deps" || die "Nomad does not depend on $OURMOD/pkg/gocni"
	! grep -q "^$GOCNI" <<<"$deps" || die "Nomad still links $GOCNI"
	log "dependencies: $OURMOD/pkg/gocni in, no $GOCNI"
}

# build_nomad src bin label: the nomad binary from src into bin, unless
# there.
build_nomad() {
	local t
	if [[ -x $2/nomad ]]; then
		log "${3}nomad: $2 (cached)"
		return
	fi
	t=$(date +%s)
	log "building ${3}nomad $NOMAD_VERSION"
	rm -rf "$2.tmp" && mkdir -p "$2.tmp"
	(cd "$1" && GOFLAGS="$GOFLAGS -mod=mod" go build -trimpath -o "$2.tmp/" .) || die "building ${3}nomad failed"
	rm -rf "$2" && mv "$2.tmp" "$2"
	log "${3}nomad built in $(($(date +%s) - t))s"
}

build_bins() {
	prepare_src
	NBIN=$E2E_CACHE/bin-nomad-$NOMAD_VERSION-$(keyhash)
	build_nomad "$SRC" "$NBIN" ""
	PLUGINS=$E2E_CACHE/plugins-nomad-$(keyhash)
	build_plugins "$PLUGINS"
}

# build_stock_bins: stock Nomad (its go-cni imports as published; only its
# api module taken from the proxy, as for the face) and the plugins.
build_stock_bins() {
	local dest=$E2E_CACHE/src-nomad-stock-$NOMAD_VERSION dl deps
	if [[ ! -f $dest/.prepared ]]; then
		dl=$(proxy_dir "github.com/hashicorp/nomad@$NOMAD_VERSION")
		rm -rf "$dest" && mkdir -p "$(dirname "$dest")"
		cp -r "$dl" "$dest" && chmod -R u+w "$dest"
		use_proxy_api "$dest"
		touch "$dest/.prepared"
	fi
	diff -r -x go.mod -x go.sum -x .prepared "$(proxy_dir "github.com/hashicorp/nomad@$NOMAD_VERSION")" "$dest" >/dev/null ||
		die "stock Nomad's source differs from the proxy's beyond go.mod"
	NBIN=$E2E_CACHE/bin-nomad-stock-$NOMAD_VERSION
	build_nomad "$dest" "$NBIN" "stock "
	deps=$(go version -m "$NBIN/nomad") || die "go version -m failed"
	grep -qP "^\tdep\t\Q$GOCNI\E\t\Q$STOCK_GOCNI\E\t" <<<"$deps" || die "stock nomad does not link $GOCNI $STOCK_GOCNI"
	! grep -qF "$OURMOD" <<<"$deps" || die "stock nomad links $OURMOD"
	log "stock nomad links $GOCNI $STOCK_GOCNI, nothing of $OURMOD"
	PLUGINS=$E2E_CACHE/plugins-nomad-$(keyhash)
	build_plugins "$PLUGINS"
}

# face_run, control_run phase...: the face's and the control's runs of
# the phases (lib.sh), each recording its figures for the table.
face_run() { RESULTS=${FACE_RESULTS:-} run_e2e "$@"; }
control_run() { CONTROL=1 RESULTS=${CONTROL_RESULTS:-} run_e2e "$@"; }

case $MODE in
compile)
	compile_check
	log "total $(($(date +%s) - T0))s"
	;;
build)
	build_bins
	log "total $(($(date +%s) - T0))s"
	;;
run | all | control)
	# shellcheck source=test/e2e/nomad/lib.sh
	. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
	shift || true
	check_phases "$@"
	case $MODE in
	run)
		build_bins
		e2e_unlock
		run_e2e "$@"
		;;
	control)
		build_stock_bins
		e2e_unlock
		control_run "$@"
		;;
	all)
		face_then_control face_run control_run "$@"
		print_table
		;;
	esac
	log "total $(($(date +%s) - T0))s"
	;;
*) die "usage: $0 [compile|build|all [phase...]|run [phase...]|control [phase...]]" ;;
esac
