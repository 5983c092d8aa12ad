# shellcheck shell=bash
# Sourced by run.sh for modes all, run and control, after lib.sh: the gc
# phase's foreign sandbox. Another runtime's pod, as far as BuildKit can
# tell: a 64-hex container ID in a netns of its own (pinned under
# /run/netns), attached by this checkout's ocicnitool (OCICNITOOL, built
# by build_bins) to a network BuildKit never loads (its own bridge,
# subnet and host-local data dir), in the default cache dir that
# BuildKit's engine shares with every CNI user of the host. The patched
# buildkitd's GC(ctx, nil) must leave it as it is.
#
# Its container ID is in $W/foreign.id while it may exist: the cleanup
# (foreign_remove, from lib.sh's cleanup and run_phase) works from that
# file, whichever shell attached it.

FNET=ocicni-e2eforeign
FBRIDGE=${E2E_FOREIGN_BRIDGE:-cni-e2efor0}
FSUBNET=${E2E_FOREIGN_SUBNET:-10.99.9.0/24}
FNS=ocicni-e2eforeign
FID=

# write_foreign_conflist: $W/foreign-net.d/$FNET.conflist: bridge (no
# ipMasq, so no iptables rule) + host-local with data dir $W/foreign-ipam.
write_foreign_conflist() {
	mkdir -p "$W/foreign-net.d"
	cat >"$W/foreign-net.d/$FNET.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$FNET",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$FBRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "dataDir": "$W/foreign-ipam",
        "ranges": [[{"subnet": "$FSUBNET"}]]
      }
    }
  ]
}
EOF
}

# ftool args...: ocicnitool on the foreign network's conf dir, the
# plugins of the run and the default cache dir.
ftool() {
	"$OCICNITOOL" "$@" --conf-dir "$W/foreign-net.d" --bin-dir "$PLUGINS" --cache-dir "$CNI_CACHE" --timeout 30s
}

# foreign_id: FID from $W/foreign.id ("" when no foreign sandbox).
foreign_id() {
	FID=
	[[ -n ${W:-} && -s $W/foreign.id ]] && FID=$(<"$W/foreign.id")
	return 0
}

# foreign_files: the foreign sandbox's files under $CNI_CACHE (paths):
# its cache entry, its order record and the record's links to saved
# configs; nothing when there is no foreign sandbox.
foreign_files() {
	foreign_id
	[[ -n $FID ]] || return 0
	find "$CNI_CACHE/results" -maxdepth 1 -type f -name "$FNET-$FID-eth0" 2>/dev/null || true
	find "$RECORDS" -maxdepth 1 -type f \( -name "$FID" -o -name ".cfg.$FID.*" \) 2>/dev/null || true
}

# foreign_res: host-local's reservations of the foreign network (paths).
foreign_res() {
	find "$W/foreign-ipam/$FNET" -type f ! -name 'last_reserved_ip.*' ! -name lock 2>/dev/null || true
}

# foreign_addr: the IPv4 address (with prefix) of eth0 in the foreign netns.
foreign_addr() { ip -n "$FNS" -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}'; }

# foreign_snapshot: the foreign sandbox's state, one item a line: each
# reservation with the container ID it holds, each file of foreign_files
# with the hash of its content, eth0's address, the veths on its bridge,
# whether the gateway answers from the netns.
foreign_snapshot() {
	local f gw=${FSUBNET%.*}.1
	for f in $(foreign_res); do echo "reservation ${f##*/} $(head -1 "$f" | tr -d '\r')"; done
	for f in $(foreign_files); do echo "file ${f#"$CNI_CACHE"/} $(sha256sum <"$f" | cut -c1-16)"; done
	echo "eth0 $(foreign_addr)"
	echo "veths on $FBRIDGE: $(veths_on "$FBRIDGE" | wc -l)"
	if ip netns exec "$FNS" /bin/busybox ping -c1 -W2 "$gw" >/dev/null 2>&1; then
		echo "gateway $gw answers"
	else
		echo "gateway $gw does not answer"
	fi
}

# foreign_attach: the netns, the ADD by ocicnitool; requires a
# reservation, the cache entry, the record and eth0 in the subnet, and
# sets FOREIGN_BEFORE (foreign_snapshot).
foreign_attach() {
	local out
	FID=$(head -c 32 /dev/urandom | sha256sum | cut -c1-64)
	printf '%s\n' "$FID" >"$W/foreign.id"
	ip netns add "$FNS" || die "gc: ip netns add $FNS failed"
	out=$(ftool add --network "$FNET" "$FNS" "$FID" 2>&1) ||
		die "gc: ocicnitool add of the foreign sandbox failed: $(tr '\n' ' ' <<<"$out")"
	[[ $(foreign_addr) == "${FSUBNET%.*}."*/24 ]] || die "gc: the foreign sandbox's eth0 has '$(foreign_addr)', not an address of $FSUBNET"
	(($(foreign_res | wc -l) == 1)) || die "gc: the foreign sandbox holds $(foreign_res | wc -l) reservations, not 1"
	[[ -f $CNI_CACHE/results/$FNET-$FID-eth0 ]] || die "gc: ocicnitool add left no cache entry $FNET-$FID-eth0"
	[[ -f $RECORDS/$FID ]] || die "gc: ocicnitool add left no order record $RECORDS/$FID"
	FOREIGN_BEFORE=$(foreign_snapshot)
	grep -q ' answers$' <<<"$FOREIGN_BEFORE" || die "gc: the foreign sandbox does not reach its gateway: $(tr '\n' ';' <<<"$FOREIGN_BEFORE")"
	log "gc: foreign sandbox $FID attached by ocicnitool to $FNET (netns /run/netns/$FNS, bridge $FBRIDGE): $(tr '\n' ';' <<<"$FOREIGN_BEFORE" | sed 's/;/; /g')"
}

# foreign_kept when: the foreign sandbox is as foreign_attach left it,
# and buildkitd's log names no DEL of it; fatal otherwise.
foreign_kept() {
	local now dels
	now=$(foreign_snapshot)
	if [[ $now != "$FOREIGN_BEFORE" ]]; then
		log "gc: the foreign sandbox $1, before | now:"
		diff <(echo "$FOREIGN_BEFORE") <(echo "$now") >&2 || true
		die "gc: the patched buildkitd's GC changed the foreign sandbox of $FNET ($1)"
	fi
	dels=$(grep -F -e "$FNET" -e "$FID" "$W/buildkitd.log" | grep -iE 'delet|DEL |teardown|detach' || true)
	[[ -z $dels ]] || die "gc: buildkitd's log names a teardown of the foreign sandbox: $(head -3 <<<"$dels" | cut -c1-300)"
	log "gc: the foreign sandbox $1: the same reservation, cache entry, order record and eth0 ($(foreign_addr)), gateway answers; buildkitd's log lines naming it: $(grep -cF "$FID" "$W/buildkitd.log")$(grep -F "$FID" "$W/buildkitd.log" | grep -o 'msg="[^"]*"' | sort -u | head -2 | tr '\n' ' ' | sed 's/^/ (/; s/ $/)/')"
}

# foreign_detach: the DEL by ocicnitool, then the netns and the bridge
# removed; everything of it must be gone.
foreign_detach() {
	local out left
	foreign_id
	out=$(ftool del "$FNS" "$FID" 2>&1) ||
		die "gc: ocicnitool del of the foreign sandbox failed: $(tr '\n' ' ' <<<"$out")"
	left=$( (
		foreign_res | sed 's/^/reservation /'
		foreign_files | sed 's/^/file /'
		veths_on "$FBRIDGE" | sed 's/^/veth /'
		! ip -n "$FNS" link show eth0 >/dev/null 2>&1 || echo "eth0 in $FNS"
	) | tr '\n' ' ')
	[[ -z $left ]] || die "gc: ocicnitool del left of the foreign sandbox: $left"
	ip netns del "$FNS" || die "gc: ip netns del $FNS failed"
	ip link del "$FBRIDGE" || die "gc: ip link del $FBRIDGE failed"
	[[ ! -e /run/netns/$FNS ]] || die "gc: /run/netns/$FNS is still there"
	! ip link show "$FBRIDGE" >/dev/null 2>&1 || die "gc: bridge $FBRIDGE is still there"
	foreign_configs_remove
	rm -f "$W/foreign.id"
	rm -rf "$W/foreign-ipam"
	log "gc: foreign sandbox detached by ocicnitool: no reservation, cache entry, order record, veth; its netns and bridge removed"
}

# foreign_configs_remove: the shared copies of saved configs that name
# the foreign network and that no record links any more (the engine keeps
# the copies of its last configs for its next setup).
foreign_configs_remove() {
	local f n=0
	for f in $(grep -lF "\"$FNET\"" "$CNI_CACHE/ocicni/configs"/* 2>/dev/null); do
		[[ $(stat -c %h "$f") == 1 ]] || continue
		rm -f "$f"
		n=$((n + 1))
	done
	((n == 0)) || log "gc: removed $n unlinked shared copies of the foreign network's saved config"
}

# foreign_remove: the cleanup (after a failure, too): everything of the
# foreign sandbox, by ocicnitool's DEL first, then by hand. The netns and
# the bridge are removed only when $W/foreign.id says this run made them.
foreign_remove() {
	local left
	foreign_id
	[[ -n $FID ]] || return 0
	ftool del "$FNS" "$FID" >/dev/null 2>&1 ||
		log "cleanup: ocicnitool del of the foreign sandbox $FID failed; removing it by hand"
	left=$(foreign_files)
	if [[ -n $left ]]; then
		log "cleanup: removing the foreign sandbox's files: $(xargs -rn1 basename <<<"$left" | tr '\n' ' ')"
		xargs -r rm -f <<<"$left"
	fi
	[[ ! -e /run/netns/$FNS ]] || ip netns del "$FNS" 2>/dev/null
	ip link del "$FBRIDGE" 2>/dev/null
	rm -rf "$W/foreign-ipam"
	foreign_configs_remove
	rm -f "$W/foreign.id"
	FID=
	return 0
}
