#!/usr/bin/env bash
# End-to-end test: nerdctl v2.3.5 built against this checkout's pkg/gocni,
# on containerd v2.4.2 built against it too, and the same phases against
# stock nerdctl (go-cni v1.1.13) on stock containerd as a control.
#
#   run.sh compile           rewrite nerdctl's go-cni imports, then go build
#                            + go vet of ./cmd/nerdctl and the packages that
#                            use the face (no root needed)
#   run.sh build             build nerdctl, containerd (see
#                            test/e2e/containerd), the plugins
#   run.sh all               compile, build, then run containerd and drive
#                            nerdctl through every phase (as root), then the
#                            control; prints the face/control table
#   run.sh run [phase...]    build, then only the phases named (as root)
#   run.sh control [phase...]
#                            stock nerdctl and containerd through the same
#                            phases: leftovers are recorded per phase, not
#                            fatal
#
# nerdctl runs each OCI hook (createRuntime, postStop) as a process of its
# own that makes a go-cni engine, calls Setup or Remove and exits: many
# short-lived engines on one cache dir (libcni's default, /var/lib/cni).
# Everything of nerdctl stays out of our module graph: it is built in its
# own directory under $E2E_CACHE with its own go.mod. See README.md.
set -Eeuo pipefail

NERDCTL_VERSION=${NERDCTL_VERSION:-v2.3.5}
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
MODE=${1:-compile}
GOCNI=github.com/containerd/go-cni
# The go-cni that stock nerdctl $NERDCTL_VERSION requires: the control.
STOCK_GOCNI=${STOCK_GOCNI:-v1.1.13}
# nerdctl's go.mod points its test-only tigron module at ./mod/tigron, a
# nested module that the module proxy's zip leaves out: the face and the
# control both take it from the proxy instead. cmd/nerdctl does not
# import it.
TIGRON=github.com/containerd/nerdctl/mod/tigron
TIGRON_VERSION=${TIGRON_VERSION:-v0.0.0-20250720235051-d775a8c42fbb}
# What uses the face: built and vetted (the cmd/nerdctl/... tests need
# tigron's tip, so only its main package is vetted), and unit-tested
# where the tests use the face's types.
NERD_PKGS=(./cmd/nerdctl ./pkg/ocihook/... ./pkg/netutil/... ./pkg/containerutil/... ./pkg/cmd/container/...
	./pkg/portutil/... ./pkg/formatter/... ./pkg/inspecttypes/... ./pkg/api/types/... ./pkg/defaults/...
	./pkg/bypass4netnsutil/... ./pkg/rootlessutil/...)
NERD_TESTS=(./pkg/portutil/... ./pkg/formatter/... ./pkg/inspecttypes/dockercompat/...)
LOG_TAG=e2e-nerdctl
# shellcheck source=test/e2e/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"

# use_proxy_tigron dir: dir's go.mod takes tigron from the module proxy.
use_proxy_tigron() {
	(cd "$1" && go mod edit -dropreplace="$TIGRON@v0.0.0" -replace="$TIGRON@v0.0.0=$TIGRON@$TIGRON_VERSION")
}

# prepare_src: nerdctl with its go-cni imports rewritten and tigron from
# the proxy (see gocni_src).
prepare_src() { gocni_src nerdctl github.com/containerd/nerdctl/v2 "$NERDCTL_VERSION" use_proxy_tigron; }

# in_src cmd...: runs a go command in nerdctl's copy (-mod=mod may add our
# dependencies to its go.mod and go.sum).
in_src() { (cd "$SRC" && GOFLAGS="$GOFLAGS -mod=mod" "$@"); }

compile_check() {
	local t deps
	prepare_src
	t=$(date +%s)
	log "compile check: go build + go vet of ${NERD_PKGS[*]} against $REPO/pkg/gocni"
	in_src go build ./cmd/nerdctl/... "${NERD_PKGS[@]}" || die "nerdctl does not build against $REPO/pkg/gocni"
	in_src go vet "${NERD_PKGS[@]}" || die "go vet of nerdctl against $REPO/pkg/gocni failed"
	log "go build + go vet passed ($(($(date +%s) - t))s)"
	in_src go test -count=1 "${NERD_TESTS[@]}" || die "nerdctl's unit tests failed against $REPO/pkg/gocni"
	log "go test of ${NERD_TESTS[*]} passed"
	deps=$(in_src go list -deps ./cmd/nerdctl) || die "go list -deps failed"
	grep -qx "$OURMOD/pkg/gocni" <<<"$deps" || die "nerdctl does not depend on $OURMOD/pkg/gocni"
	! grep -q "^$GOCNI" <<<"$deps" || die "nerdctl still links $GOCNI"
	log "dependencies: $OURMOD/pkg/gocni in, no $GOCNI"
}

# build_nerdctl src bin label goflags: nerdctl from src into bin, unless
# there.
build_nerdctl() {
	local t
	if [[ -x $2/nerdctl ]]; then
		log "${3}nerdctl: $2 (cached)"
		return
	fi
	t=$(date +%s)
	log "building ${3}nerdctl $NERDCTL_VERSION"
	rm -rf "$2.tmp" && mkdir -p "$2.tmp"
	(cd "$1" && GOFLAGS="$GOFLAGS $4" CGO_ENABLED=0 go build -trimpath \
		-ldflags "-X github.com/containerd/nerdctl/v2/pkg/version.Version=$NERDCTL_VERSION" \
		-o "$2.tmp/" ./cmd/nerdctl) || die "building ${3}nerdctl failed"
	rm -rf "$2" && mv "$2.tmp" "$2"
	log "${3}nerdctl built in $(($(date +%s) - t))s"
}

# build_bins: nerdctl from the prepared source (keyed by our tree hash),
# and containerd with the face, crictl and the plugins from the
# containerd harness (its cache, keyed the same way).
build_bins() {
	prepare_src
	KEY=$(keyhash)
	NBIN=$E2E_CACHE/bin-nerdctl-$NERDCTL_VERSION-$KEY
	build_nerdctl "$SRC" "$NBIN" "" -mod=mod
	bash "$REPO/test/e2e/containerd/run.sh" build || die "building containerd with the face failed"
	CBIN=$E2E_CACHE/bin-containerd-$CONTAINERD_VERSION-$KEY
	PLUGINS=$E2E_CACHE/plugins-containerd-$KEY
	[[ -x $CBIN/containerd && -x $PLUGINS/bridge ]] || die "no containerd or plugins at $CBIN, $PLUGINS"
}

# build_stock_bins: stock nerdctl (its go-cni imports as published; only
# tigron taken from the proxy) and stock containerd.
build_stock_bins() {
	local dl deps
	STOCK_SRC=$E2E_CACHE/src-nerdctl-stock-$NERDCTL_VERSION
	if [[ ! -f $STOCK_SRC/.prepared ]]; then
		dl=$(proxy_dir "github.com/containerd/nerdctl/v2@$NERDCTL_VERSION")
		rm -rf "$STOCK_SRC" && mkdir -p "$(dirname "$STOCK_SRC")"
		cp -r "$dl" "$STOCK_SRC" && chmod -R u+w "$STOCK_SRC"
		use_proxy_tigron "$STOCK_SRC"
		touch "$STOCK_SRC/.prepared"
	fi
	diff -r -x go.mod -x go.sum -x .prepared "$(proxy_dir "github.com/containerd/nerdctl/v2@$NERDCTL_VERSION")" "$STOCK_SRC" >/dev/null ||
		die "stock nerdctl's source differs from the proxy's beyond go.mod"
	NBIN=$E2E_CACHE/bin-nerdctl-stock-$NERDCTL_VERSION
	build_nerdctl "$STOCK_SRC" "$NBIN" "stock " -mod=mod
	# As stock_links, but for the replace of tigron (nerdctl's release
	# builds link it from ./mod/tigron).
	deps=$(go version -m "$NBIN/nerdctl") || die "go version -m failed"
	grep -qP "^\tdep\t\Q$GOCNI\E\t\Q$STOCK_GOCNI\E\t" <<<"$deps" || die "stock nerdctl does not link $GOCNI $STOCK_GOCNI"
	! grep -qF "$OURMOD" <<<"$deps" || die "stock nerdctl links $OURMOD"
	[[ $(grep -c '^[[:space:]]*=>' <<<"$deps") -le 1 ]] && ! grep '^[[:space:]]*=>' <<<"$deps" | grep -vqF "$TIGRON" ||
		die "stock nerdctl links a replaced module other than $TIGRON"
	log "stock nerdctl links $GOCNI $STOCK_GOCNI, nothing of $OURMOD, no replace but $TIGRON's"
	bash "$REPO/test/e2e/containerd/run.sh" build-stock || die "building stock containerd failed"
	CBIN=$E2E_CACHE/bin-containerd-stock-$CONTAINERD_VERSION
	PLUGINS=$E2E_CACHE/plugins-containerd-$(keyhash)
}

# control_run phase...: the control's run of the phases (lib.sh).
control_run() { CONTROL=1 run_e2e "$@"; }

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
	# shellcheck source=test/e2e/nerdctl/lib.sh
	. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
	shift || true
	check_phases "$@"
	case $MODE in
	run)
		build_bins
		e2e_unlock
		run_e2e "$@"
		;;
	all)
		face_then_control run_e2e control_run "$@"
		print_table
		;;
	control)
		build_stock_bins
		e2e_unlock
		control_run "$@"
		;;
	esac
	;;
*) die "usage: $0 [compile|build|all [phase...]|run [phase...]|control [phase...]]" ;;
esac
