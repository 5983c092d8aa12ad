# shellcheck shell=bash
# Sourced by the CRI-O and containerd harnesses after common.sh: cri-tools'
# critest, the CRI validation suite, built from the module proxy, its test
# images built locally from Debian's busybox-static (nothing is pulled:
# critest asks ImageStatus first and pulls only a missing image), and the
# host preparation that CRI-O's CI makes for the host-port test.

CRITEST_VERSION=${CRITEST_VERSION:-v1.34.0}

# CRITEST_FOCUS: the tests that touch pod networking. Ginkgo matches it
# against each spec's full text ("[k8s.io] Networking runtime should
# support networking runtime should support DNS config [Conformance]").
CRITEST_FOCUS=${CRITEST_FOCUS:-'\[k8s\.io\] (Networking|PodSandbox) |Multiple Containers .*should support network|Streaming .*portforward|Security Context .*HostNetwork|Idempotence (StopPodSandbox|RemovePodSandbox) '}

# The images critest runs, by the exact names it asks for, and what each
# needs: busybox's applets (top, sh, cat, hostname, netstat, echo, sleep);
# a web server that answers 200 on port 80 with its own entrypoint (nginx);
# one that also prints "httpd" to its log (httpd); one on port 12003 for
# the host-network port-forward test.
CRITEST_BUSYBOX=registry.k8s.io/e2e-test-images/busybox:1.29-2
CRITEST_NGINX=registry.k8s.io/e2e-test-images/nginx:1.14-2
CRITEST_HTTPD=registry.k8s.io/e2e-test-images/httpd:2.4.39-4
CRITEST_HOSTNET_NGINX=gcr.io/k8s-staging-cri-tools/hostnet-nginx-amd64:latest

# build_critest: sets CRITEST_BIN to critest $CRITEST_VERSION, built once
# into $E2E_CACHE (go test -c of its cmd/critest, as its Makefile does).
build_critest() {
	CRITEST_BIN=$E2E_CACHE/critest-$CRITEST_VERSION/critest
	[[ -x $CRITEST_BIN ]] && return 0
	local src=$E2E_CACHE/src-cri-tools-$CRITEST_VERSION t
	t=$(date +%s)
	[[ -f $src/.fetched ]] || {
		fetch_src sigs.k8s.io/cri-tools "$CRITEST_VERSION" "$src" cri-tools
		touch "$src/.fetched"
	}
	mkdir -p "$(dirname "$CRITEST_BIN")"
	log "building critest $CRITEST_VERSION"
	(cd "$src" && go test -mod=mod -c -o "$CRITEST_BIN.tmp" ./cmd/critest) || die "critest build failed"
	mv "$CRITEST_BIN.tmp" "$CRITEST_BIN"
	log "critest built in $(($(date +%s) - t))s"
}

# critest_rootfs dir: a root file system of busybox-static and its applets,
# with /www/index.html for the web servers and the users the images name.
critest_rootfs() {
	local dir=$1 a
	if ! [[ -x /bin/busybox ]] || ldd /bin/busybox >/dev/null 2>&1; then
		install_debs busybox-static # replaces a dynamic busybox, if any
	fi
	rm -rf "$dir" && mkdir -p "$dir"/{bin,etc,tmp,www}
	chmod 1777 "$dir/tmp"
	cp /bin/busybox "$dir/bin/busybox"
	for a in $(/bin/busybox --list); do
		[[ $a == busybox ]] || ln -s busybox "$dir/bin/$a"
	done
	echo '<html><body>ocicni critest</body></html>' >"$dir/www/index.html"
	printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'www-data:x:33:33:www-data:/www:/bin/sh' \
		'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' >"$dir/etc/passwd"
	printf '%s\n' 'root:x:0:' 'www-data:x:33:' 'nogroup:x:65534:' >"$dir/etc/group"
}

# CRITEST_IMAGES: name, entrypoint (JSON; "" for none), cmd (JSON), by
# threes.
CRITEST_IMAGES=(
	"$CRITEST_BUSYBOX" '' '["sh"]'
	"$CRITEST_NGINX" '["/bin/httpd","-f","-v","-p","80","-h","/www"]' '[]'
	"$CRITEST_HTTPD" '["/bin/sh","-c","echo httpd; exec /bin/httpd -f -v -p 80 -h /www"]' '[]'
	"$CRITEST_HOSTNET_NGINX" '["/bin/httpd","-f","-v","-p","12003","-h","/www"]' '[]'
)

# critest_images buildah-args...: commits the images with buildah (its
# storage chosen by the arguments, such as --root and --storage-driver)
# from one busybox root file system: CRI-O's containers-storage.
critest_images() {
	command -v buildah >/dev/null || install_debs buildah
	local rootfs=$W/critest-rootfs c name i
	critest_rootfs "$rootfs"
	for ((i = 0; i < ${#CRITEST_IMAGES[@]}; i += 3)); do
		name=${CRITEST_IMAGES[i]}
		c=$(buildah "$@" from scratch) || die "buildah from scratch failed"
		buildah "$@" copy "$c" "$rootfs" / >/dev/null || die "buildah copy into $name failed"
		buildah "$@" config --env PATH=/bin --workingdir / --cmd "${CRITEST_IMAGES[i + 2]}" "$c" ||
			die "buildah config of $name failed"
		if [[ -n ${CRITEST_IMAGES[i + 1]} ]]; then
			buildah "$@" config --entrypoint "${CRITEST_IMAGES[i + 1]}" "$c" || die "buildah config of $name failed"
		fi
		buildah "$@" commit -q "$c" "$name" >/dev/null || die "buildah commit of $name failed"
		buildah "$@" rm "$c" >/dev/null
	done
	log "critest images committed: busybox, nginx, httpd, hostnet-nginx (busybox-static $(/bin/busybox | head -1 | awk '{print $2}'))"
}

# critest_oci_images import-command...: the same images as OCI archives
# (oci_image), each handed to the import command: containerd's k8s.io
# namespace.
critest_oci_images() {
	local rootfs=$W/critest-rootfs cfg i
	critest_rootfs "$rootfs"
	for ((i = 0; i < ${#CRITEST_IMAGES[@]}; i += 3)); do
		cfg='{"Env":["PATH=/bin"],"WorkingDir":"/","Cmd":'${CRITEST_IMAGES[i + 2]}
		[[ -z ${CRITEST_IMAGES[i + 1]} ]] || cfg+=',"Entrypoint":'${CRITEST_IMAGES[i + 1]}
		oci_image "$rootfs" "${CRITEST_IMAGES[i]}" "$cfg}" "$W/critest-image.tar"
		"$@" "$W/critest-image.tar" || die "importing ${CRITEST_IMAGES[i]} failed"
	done
	rm -f "$W/critest-image.tar"
	log "critest images imported: busybox, nginx, httpd, hostnet-nginx (busybox-static $(/bin/busybox | head -1 | awk '{print $2}'))"
}

# critest_host_prep: as CRI-O's CI before critest (contrib/test/ci/
# critest.yml), so that the host-port test reaches a pod through
# 127.0.0.1: route_localnet on, and localhost's packets leaving the host
# masqueraded. critest_host_undo restores both; the cleanup calls it.
CRITEST_PREPPED=0
critest_host_prep() {
	CRITEST_LOCALNET=$(sysctl -n net.ipv4.conf.all.route_localnet)
	sysctl -qw net.ipv4.conf.all.route_localnet=1
	iptables -t nat -I POSTROUTING -s 127.0.0.0/8 ! -d 127.0.0.0/8 -j MASQUERADE
	CRITEST_PREPPED=1
}

critest_host_undo() {
	((CRITEST_PREPPED)) || return 0
	iptables -t nat -D POSTROUTING -s 127.0.0.0/8 ! -d 127.0.0.0/8 -j MASQUERADE || true
	sysctl -qw net.ipv4.conf.all.route_localnet="$CRITEST_LOCALNET" || true
	CRITEST_PREPPED=0
}

# critest_phase_result status: what a critest phase makes of critest's
# exit status: every selected test must pass, unless CRITEST_REPORT is set
# (a run of the whole suite, whose counts are the result), and with
# CRITEST_OUT set the log is kept there.
critest_phase_result() {
	[[ -z ${CRITEST_OUT:-} ]] || cp "$W/critest.log" "$CRITEST_OUT"
	if [[ -n ${CRITEST_REPORT:-} ]]; then
		log "critest: failed: $(grep -cE '^\s*\[FAIL\]' "$W/critest.log" || true) lines; the list: $(grep -E '^\s*\[FAIL\]' "$W/critest.log" | sed 's/^ *\[FAIL\] //' | sort -u | tr '\n' ';')"
		return 0
	fi
	return "$1"
}

# critest_records_before, critest_records_after: critest's sandboxes are
# not the harness's, so an order record that appeared between the two
# calls joins ALL_IDS and counts among the leftovers as the harness's own
# pods' do.
declare -A CRITEST_RECORDS=()
critest_records_before() {
	local f
	CRITEST_RECORDS=()
	for f in "$CNI_CACHE"/ocicni/attachments/*; do CRITEST_RECORDS[${f##*/}]=1; done
}

critest_records_after() {
	local f
	for f in "$CNI_CACHE"/ocicni/attachments/*; do
		[[ -e $f && -z ${CRITEST_RECORDS[${f##*/}]:-} ]] && ALL_IDS+=("${f##*/}")
	done
	return 0
}

# run_critest endpoint [focus]: critest against the CRI endpoint, one test
# at a time, the focused tests only (all of them with focus "."), into
# $W/critest.log. It sets CRITEST_COUNTS ("passed failed skipped") and
# returns critest's status.
run_critest() {
	local endpoint=$1 focus=${2:-$CRITEST_FOCUS} rc=0 t
	t=$(date +%s)
	critest_records_before
	critest_host_prep
	# One test at a time is critest's default (--parallel 1); given on the
	# command line, Ginkgo takes the flag for go test's -parallel and stops.
	"$CRITEST_BIN" --runtime-endpoint "$endpoint" --image-endpoint "$endpoint" \
		--ginkgo.focus="$focus" --ginkgo.no-color --ginkgo.v >"$W/critest.log" 2>&1 || rc=$?
	critest_host_undo
	critest_records_after
	CRITEST_COUNTS=$(sed -n 's/.* \([0-9]*\) Passed | \([0-9]*\) Failed | [0-9]* Pending | \([0-9]*\) Skipped.*/\1 \2 \3/p' "$W/critest.log" | tail -1)
	log "critest: $(grep -E '^Ran [0-9]+ of [0-9]+ Specs' "$W/critest.log" | tail -1); passed failed skipped: ${CRITEST_COUNTS:-unknown}; $(($(date +%s) - t))s"
	if ((rc != 0)); then
		grep -E '^\s*\[(FAIL|PANICKED)\]' "$W/critest.log" | sort -u | head -20 >&2 || true
		[[ -n $CRITEST_COUNTS ]] || tail -20 "$W/critest.log" >&2
	fi
	return "$rc"
}

# The pod benchmark's load: CRITEST_BENCH_PODS sandboxes through their
# whole lifecycle (run, status, stop, remove) at each parallelism of
# CRITEST_BENCH_PARALLEL.
CRITEST_BENCH_PODS=${CRITEST_BENCH_PODS:-50}
CRITEST_BENCH_PARALLEL=${CRITEST_BENCH_PARALLEL:-1 10 50}

# run_critest_bench endpoint: critest -benchmark's PodSandbox lifecycle
# against the CRI endpoint, once per parallelism, each run's datapoints
# (nanoseconds per operation and sandbox) kept as p<parallelism>.json in
# $CRITEST_BENCH_OUT (default $W/bench). It needs no image but the
# runtime's pause image. critest's other benchmarks skip themselves
# without their counts in the params file, except the container start,
# which needs busybox: skipped by name.
run_critest_bench() {
	local endpoint=$1 out=${CRITEST_BENCH_OUT:-$W/bench} n rc t
	mkdir -p "$out"
	critest_records_before
	for n in $CRITEST_BENCH_PARALLEL; do
		t=$(date +%s)
		printf 'podsNumber: %d\npodsNumberParallel: %d\n' "$CRITEST_BENCH_PODS" "$n" >"$W/bench-params.yaml"
		rm -rf "$W/bench-data" && mkdir -p "$W/bench-data"
		rc=0
		"$CRITEST_BIN" --runtime-endpoint "$endpoint" --image-endpoint "$endpoint" -benchmark \
			--benchmarking-params-file "$W/bench-params.yaml" --benchmarking-output-dir "$W/bench-data" \
			--ginkgo.skip='start a container from scratch' --ginkgo.no-color >"$W/critest-bench-p$n.log" 2>&1 || rc=$?
		if ((rc != 0)) || [[ ! -s $W/bench-data/pod_benchmark_data.json ]]; then
			tail -20 "$W/critest-bench-p$n.log" >&2
			critest_records_after
			die "critest -benchmark with $n at a time failed (status $rc; its log: $W/critest-bench-p$n.log)"
		fi
		cp "$W/bench-data/pod_benchmark_data.json" "$out/p$n.json"
		log "critest benchmark, $CRITEST_BENCH_PODS sandboxes $n at a time ($(($(date +%s) - t))s): ms at p50 of run, status, stop, remove: $(jq -r '[range(0; 4) as $i | [.datapoints[].operationsDurationsNs[$i]] | sort | .[length / 2 | floor] / 1e6 | . * 10 | round / 10] | map(tostring) | join(", ")' "$out/p$n.json")"
	done
	critest_records_after
}
