#!/usr/bin/env bash
# Builds Kubernetes v1.34.4 from the module proxy, for the node end-to-end
# harness to come: kubelet, kube-apiserver, etcd and the node e2e test
# binary e2e_node.test (kube-scheduler and agnhost on request), into
# $E2E_CACHE/bin-kubernetes-v1.34.4/. Stock Kubernetes: nothing of this
# checkout is linked in (the library is in the runtime under the kubelet).
#
#   bash test/e2e/kubernetes/build.sh                          # the default four
#   bash test/e2e/kubernetes/build.sh kube-scheduler agnhost   # or any named
#
# The versions are pinned by go.mod and go.sum here (Kubernetes) and in
# etcd/ (etcd v3.6.5); see README.md. Each binary is built once: its
# .<name>.done marker holds the hash of what built it (its module's go.mod
# and go.sum, the command and its flags, the Go version), and it is built
# again when that changes (from Go's build cache, mostly: a relink).
# The flags are those of Kubernetes' own non-debug build
# (hack/lib/golang.sh): -trimpath, -tags selinux,notest,grpcnotrace,
# "-s -w", the version stamped with -X; kubelet with cgo, the rest
# without, as hack/lib/golang.sh and test/e2e_node/builder do. agnhost,
# the one binary of the e2e test image (for images built here later), is
# built static with the same flags.
set -Eeuo pipefail

LOG_TAG=kubernetes
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh" # E2E_CACHE, log, die, the lock; GOWORK=off

K8S_VERSION=v1.34.4
ETCD_VERSION=v3.6.5
HERE=$REPO/test/e2e/kubernetes
OUT=$E2E_CACHE/bin-kubernetes-$K8S_VERSION
mkdir -p "$OUT"
[[ $(cd "$HERE" && go list -m -f '{{.Version}}' k8s.io/kubernetes) == "$K8S_VERSION" ]] ||
	die "$HERE/go.mod does not require k8s.io/kubernetes $K8S_VERSION"
[[ $(cd "$HERE/etcd" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3) == "$ETCD_VERSION" ]] ||
	die "$HERE/etcd/go.mod does not require go.etcd.io/etcd/server/v3 $ETCD_VERSION"

# The version Kubernetes' own build stamps (hack/lib/version.sh). The
# module proxy gives no commit, so gitCommit and gitTreeState stay unset;
# the build date is the release's, from the proxy, for a stable build.
k8s_date=$(cd "$HERE" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
[[ $k8s_date == 2*Z ]] || die "no release time for k8s.io/kubernetes@$K8S_VERSION from the module proxy"
k8s_ldflags=
for kv in "gitVersion=$K8S_VERSION" gitMajor=1 gitMinor=34 "buildDate=$k8s_date"; do
	for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
		k8s_ldflags+=" -X '$pkg.${kv%%=*}=${kv#*=}'"
	done
done
K8S_FLAGS=(-trimpath -tags selinux,notest,grpcnotrace -ldflags "all=${k8s_ldflags# } -s -w")
# etcd's own release build (scripts/build_lib.sh): static, -trimpath.
ETCD_FLAGS=(-trimpath -ldflags "-s -w")

# build name: one binary into $OUT, unless its marker says it is built
# with the same recipe. Prints the time it took and its size.
build() {
	local name=$1 dir=$HERE cgo=0 recipe start secs
	local -a flags=("${K8S_FLAGS[@]}") cmd
	case $name in
	kubelet) cgo=1 cmd=(go build -o "$OUT/$name.tmp" k8s.io/kubernetes/cmd/kubelet) ;;
	kube-apiserver | kube-scheduler) cmd=(go build -o "$OUT/$name.tmp" "k8s.io/kubernetes/cmd/$name") ;;
	agnhost) cmd=(go build -o "$OUT/$name.tmp" k8s.io/kubernetes/test/images/agnhost) ;;
	e2e_node.test) cmd=(go test -c -o "$OUT/$name.tmp" k8s.io/kubernetes/test/e2e_node) ;;
	etcd)
		dir=$HERE/etcd flags=("${ETCD_FLAGS[@]}")
		cmd=(go build -o "$OUT/$name.tmp" go.etcd.io/etcd/server/v3)
		;;
	*) die "unknown binary $name (kubelet, kube-apiserver, kube-scheduler, agnhost, etcd, e2e_node.test)" ;;
	esac
	recipe=$( {
		cat "$dir/go.mod" "$dir/go.sum"
		printf '%s\n' "$cgo" "${flags[@]}" "${cmd[@]}" "$(go env GOVERSION)"
	} | sha256sum | cut -c1-16)
	if [[ -x $OUT/$name && -f $OUT/.$name.done && $(<"$OUT/.$name.done") == "$recipe" ]]; then
		log "$name: $OUT/$name (cached, $(du -h "$OUT/$name" | cut -f1))"
		return
	fi
	log "building $name (CGO_ENABLED=$cgo)"
	rm -f "$OUT/.$name.done" "$OUT/$name.tmp"
	start=$(date +%s)
	# The command's first two words, its flags, then its -o and package.
	(cd "$dir" && CGO_ENABLED=$cgo "${cmd[@]:0:2}" "${flags[@]}" "${cmd[@]:2}") || die "$name: build failed"
	secs=$(($(date +%s) - start))
	mv "$OUT/$name.tmp" "$OUT/$name"
	printf '%s\n' "$recipe" >"$OUT/.$name.done"
	log "$name built in ${secs}s: $OUT/$name, $(du -h "$OUT/$name" | cut -f1) ($(stat -c %s "$OUT/$name") bytes)"
}

bins=("$@")
((${#bins[@]} > 0)) || bins=(kubelet kube-apiserver etcd e2e_node.test)
log "Kubernetes $K8S_VERSION, etcd $ETCD_VERSION, $(go env GOVERSION), into $OUT"
for b in "${bins[@]}"; do
	build "$b"
done
log "done: ${bins[*]} in $OUT"
