package cache

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzListEntry writes arbitrary content under a file name of the fuzzer's
// choice and lists, reads and decodes it. Invariants: nothing panics (not
// even libcni's result converters), an entry that parses has names that
// pass ValidateNames and spell its own file name, and every name an
// EntryError carries is valid and spells the file's name.
func FuzzListEntry(f *testing.F) {
	f.Add("net-ctr1-eth0", []byte(`{"kind":"cniCacheV1","containerId":"ctr1","ifName":"eth0","networkName":"net","result":{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.2/24"}]}}`))
	f.Add("net-ctr1-eth0", []byte(`{"kind":"cniCacheV1","containerId":"ctr1","ifName":"eth0/../../x","networkName":"net"}`))
	f.Add("net-ctr1-eth0", []byte(`{"kind":"cniCacheV1","containerId":"x/../../y","ifName":"eth0","networkName":"net"}`))
	f.Add("net-ctr1-eth0", []byte(`{"kind":"cniCacheV1","containerId":"ctr1","ifName":"eth0","networkName":"net","result":{"cniVersion":"1.0.0","interfaces":[null],"ips":[null]}}`))
	f.Add("a-b-c-d", []byte(`{"kind":"cniCacheV1","containerId":"b-c","ifName":"d","networkName":"a","config":"eyJuYW1lIjoiYSJ9"}`))
	f.Add("..-x-eth0", []byte(`{`))
	f.Add("net-ctr1-eth0", []byte(``))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		if name == "" || name == "." || name == ".." || filepath.Base(name) != name || len(name) > 200 {
			return // not a possible directory entry
		}
		c := New(t.TempDir())
		require.NoError(t, os.MkdirAll(c.ResultsDir(), 0o700))
		if os.WriteFile(filepath.Join(c.ResultsDir(), name), data, 0o600) != nil {
			return // a name the file system refuses
		}
		l, err := c.List()
		require.NoError(t, err)
		for _, e := range l.Entries {
			require.NoError(t, ValidateNames(e.Network, e.ContainerID, e.IfName))
			assert.Equal(t, name, e.Network+"-"+e.ContainerID+"-"+e.IfName)
			for _, v := range []string{"", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
				_ = e.CheckLibcniResult(v)
				_, _ = e.ResultAt(v)
			}
			_, _ = e.Result()
		}
		for _, ee := range l.Corrupt {
			if ee.Network != "" || ee.ContainerID != "" || ee.IfName != "" {
				require.NoError(t, ValidateNames(ee.Network, ee.ContainerID, ee.IfName))
				assert.Equal(t, name, ee.Network+"-"+ee.ContainerID+"-"+ee.IfName)
			}
		}
	})
}
