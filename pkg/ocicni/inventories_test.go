package ocicni

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netconf"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// guessCorrupt's sources of names, which GC and the view share.
func TestGuessCorrupt(t *testing.T) {
	set := netconf.NewSet("", "", &network{Name: "loaded"})
	listing := cache.Listing{Entries: []*cache.Entry{{Network: "entnet", ContainerID: "ent", IfName: "eth0"}}}
	recs := &records{ids: []string{"bad", "rec"}} // "bad": an unreadable record
	for _, tc := range []struct {
		file  string
		extra []string
		want  [3]string // network, container, ifname; none when not guessed
	}{
		{file: "n-rec-eth0", want: [3]string{"n", "rec", "eth0"}},
		{file: "n-bad-eth0", want: [3]string{"n", "bad", "eth0"}},
		{file: "n-ent-eth0", want: [3]string{"n", "ent", "eth0"}},
		{file: "n-valid-eth0", extra: []string{"valid"}, want: [3]string{"n", "valid", "eth0"}},
		{file: "n-valid-eth0"},
		{file: "loaded-x-y-eth1", want: [3]string{"loaded", "x-y", "eth1"}},
		{file: "entnet-z-eth1", want: [3]string{"entnet", "z", "eth1"}},
		{file: "other-z-eth1"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			named := &cache.EntryError{Path: "/r/loaded-rec-eth9", Network: "loaded", ContainerID: "rec", IfName: "eth9"}
			l := listing
			l.Corrupt = []*cache.EntryError{named, {Path: "/r/" + tc.file}}
			out := guessCorrupt(l, recs, set, tc.extra...)
			require.Len(t, out, 2)
			assert.Same(t, named, out[0], "a file its content names is kept")
			got := [3]string{out[1].Network, out[1].ContainerID, out[1].IfName}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.want != [3]string{}, out[1] != l.Corrupt[1], "a guess is a copy")
		})
	}
}
