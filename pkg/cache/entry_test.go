package cache

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	types020 "github.com/containernetworking/cni/pkg/types/020"
	types040 "github.com/containernetworking/cni/pkg/types/040"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEntryResult(t *testing.T) {
	c := newCacheFrom(t, "results")
	tests := []struct {
		file    string
		version string // "" means no result
		check   func(t *testing.T, r types.Result)
	}{
		{"v020-c020-eth0", "0.2.0", func(t *testing.T, r types.Result) {
			t.Helper()
			res, ok := r.(*types020.Result)
			require.True(t, ok, "%T", r)
			require.NotNil(t, res.IP4)
			assert.Equal(t, "10.2.0.2/24", res.IP4.IP.String())
		}},
		{"net2-abc-eth1", "0.4.0", func(t *testing.T, r types.Result) {
			t.Helper()
			res, ok := r.(*types040.Result)
			require.True(t, ok, "%T", r)
			require.Len(t, res.Interfaces, 1)
			assert.Equal(t, "eth1", res.Interfaces[0].Name)
			require.Len(t, res.IPs, 1)
			assert.Equal(t, "10.4.0.2/24", res.IPs[0].Address.String())
		}},
		{"net1-abc-eth0", "1.0.0", func(t *testing.T, r types.Result) {
			t.Helper()
			res, ok := r.(*types100.Result)
			require.True(t, ok, "%T", r)
			require.Len(t, res.Interfaces, 1)
			assert.Equal(t, "0a:58:0a:00:00:02", res.Interfaces[0].Mac)
			assert.Equal(t, []string{"10.0.0.1"}, res.DNS.Nameservers)
		}},
		{"v110-c110-eth0", "1.1.0", func(t *testing.T, r types.Result) {
			t.Helper()
			res, ok := r.(*types100.Result)
			require.True(t, ok, "%T", r)
			require.Len(t, res.IPs, 1)
			assert.Equal(t, "10.11.0.2/24", res.IPs[0].Address.String())
		}},
		// No cniVersion in the result: decoded at the config's version.
		{"noversion-cnov-eth0", "0.4.0", func(t *testing.T, r types.Result) {
			t.Helper()
			res, ok := r.(*types040.Result)
			require.True(t, ok, "%T", r)
			assert.Len(t, res.IPs, 1)
		}},
		{"noresult-cnone-eth0", "", nil},
		{"nullresult-cnull-eth0", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			e := readFixtureEntry(t, c, tt.file)
			r, err := e.Result()
			require.NoError(t, err)
			if tt.version == "" {
				assert.Nil(t, r)
				assert.Nil(t, e.RawResult)
				return
			}
			require.NotNil(t, r)
			assert.Equal(t, tt.version, r.Version())
			tt.check(t, r)
		})
	}
}

func TestEntryResultErrors(t *testing.T) {
	c := newCacheFrom(t, "results")
	for _, file := range []string{"garbage-cgarb-eth0", "unknownver-cunk-eth0"} {
		t.Run(file, func(t *testing.T) {
			e := readFixtureEntry(t, c, file)
			r, err := e.Result()
			assert.Nil(t, r)
			var ee *EntryError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, e.Path, ee.Path)
			assert.Equal(t, e.Network, ee.Network)
		})
	}

	// Results that parseEntry would never produce, built by hand.
	for _, raw := range []string{`"oops"`, `[1]`, `{`, `{"cniVersion":7}`, `{"cniVersion":"0.3.1","ips":{}}`} {
		e := &Entry{Path: "/x", RawResult: json.RawMessage(raw)}
		assert.NotPanics(t, func() {
			r, err := e.Result()
			assert.Nil(t, r)
			require.Error(t, err, raw)
		})
	}
}

func TestEntryCNIVersion(t *testing.T) {
	tests := []struct {
		config, want string
	}{
		{`{"cniVersion":"0.4.0","name":"n","plugins":[]}`, "0.4.0"},
		{`{"name":"n"}`, ""},
		{`{"cniVersion":4}`, ""},
		{`not json`, ""},
		{``, ""},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, (&Entry{Config: []byte(tt.config)}).CNIVersion(), tt.config)
	}
}

func TestParseEntryCorrupt(t *testing.T) {
	const good = `{"kind":"cniCacheV1","containerId":"id","ifName":"eth0","networkName":"net"`
	tests := []struct {
		name    string
		data    string
		partial bool // the JSON decoded, so a partial entry comes back
	}{
		{"empty", "", false},
		{"blank", " \n\t", false},
		{"truncated", good[:40], false},
		{"not an object", `[]`, false},
		{"wrong field type", `{"kind":"cniCacheV1","containerId":5}`, false},
		{"bad base64", good + `,"config":"%%%"}`, false},
		{"bad cniArgs", good + `,"cniArgs":"x"}`, false},
		{"wrong kind", `{"kind":"cniCacheV2","containerId":"id","ifName":"eth0","networkName":"net"}`, true},
		{"no kind", `{"containerId":"id","ifName":"eth0","networkName":"net"}`, true},
		{"no network", `{"kind":"cniCacheV1","containerId":"id","ifName":"eth0"}`, true},
		{"no ifname", `{"kind":"cniCacheV1","containerId":"id","networkName":"net"}`, true},
		{"no container", `{"kind":"cniCacheV1","ifName":"eth0","networkName":"net"}`, true},
		{"result string", good + `,"result":"x"}`, true},
		{"result array", good + `,"result":[]}`, true},
		// Names that would steer a path or a plugin, and content that
		// disagrees with its own file name.
		{"ifname escapes", `{"kind":"cniCacheV1","containerId":"id","ifName":"eth0/../../../victim-if","networkName":"net"}`, true},
		{"network escapes", `{"kind":"cniCacheV1","containerId":"id","ifName":"eth0","networkName":"../../victim-name"}`, true},
		{"container escapes", `{"kind":"cniCacheV1","containerId":"x/../../../victim-id","ifName":"eth0","networkName":"net"}`, true},
		{"ifname too long", `{"kind":"cniCacheV1","containerId":"id","ifName":"eth0123456789abcd","networkName":"net"}`, true},
		{"ifname with colon", `{"kind":"cniCacheV1","containerId":"id","ifName":"eth0:1","networkName":"net"}`, true},
		{"network with space", `{"kind":"cniCacheV1","containerId":"id","ifName":"eth0","networkName":"my net"}`, true},
		{"another file's names", `{"kind":"cniCacheV1","containerId":"id","ifName":"eth1","networkName":"net"}`, true},
		{"cached config of another network", good + `,"config":"` + b64(`{"name":"../../victim-name","plugins":[]}`) + `"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := parseEntry("/r/net-id-eth0", []byte(tt.data))
			require.ErrorIs(t, err, ErrCorruptEntry)
			if tt.partial {
				require.NotNil(t, e)
				assert.Equal(t, "/r/net-id-eth0", e.Path)
			} else {
				assert.Nil(t, e)
			}
		})
	}

	e, err := parseEntry("/r/net-id-eth0", []byte(good+`,"config":null,"result":{}}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{}`, string(e.RawResult))
	assert.Nil(t, e.Config)

	e, err = parseEntry("/r/net-id-eth0", []byte(good+`,"config":"`+b64(`{"name":"net","plugins":[]}`)+`"}`))
	require.NoError(t, err, "a cached config of the entry's own network")
	assert.Equal(t, "net", e.configName())
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestCheckLibcniResult(t *testing.T) {
	tests := []struct {
		name, version, result string
		ok                    bool
	}{
		{"no result", "1.0.0", ``, true},
		{"below 0.4.0 libcni reads none", "0.3.1", `{"cniVersion":"9.9.9"}`, true},
		{"1.0.0 result", "1.0.0", `{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.2/24"}]}`, true},
		{"converts down", "0.4.0", `{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.2/24"}]}`, true},
		{"unknown version", "1.0.0", `{"cniVersion":"9.9.9"}`, false},
		{"ips not a list", "1.0.0", `{"cniVersion":"1.0.0","ips":{}}`, false},
		{"null inside ips, same version", "1.0.0", `{"cniVersion":"1.0.0","ips":[null]}`, true},
		{"null inside ips, converted", "0.4.0", `{"cniVersion":"1.0.0","ips":[null]}`, false},
		{"null inside interfaces", "0.4.0", `{"cniVersion":"1.0.0","interfaces":[null],"ips":[{"address":"10.0.0.2/24","interface":0}]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &Entry{Path: "/r/net-id-eth0", Network: "net", RawResult: json.RawMessage(tt.result)}
			var err error
			require.NotPanics(t, func() { err = e.CheckLibcniResult(tt.version) })
			if tt.ok {
				require.NoError(t, err)
				return
			}
			var ee *EntryError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, "net", ee.Network)
			require.NotPanics(t, func() { _, _ = e.Result() }, "Result never panics either")
		})
	}
}

func FuzzParseEntry(f *testing.F) {
	for _, dir := range []string{"results", "corrupt"} {
		des, err := os.ReadDir(filepath.Join("testdata", dir))
		require.NoError(f, err)
		for _, de := range des {
			data, err := os.ReadFile(filepath.Join("testdata", dir, de.Name()))
			require.NoError(f, err)
			f.Add(data)
		}
	}
	f.Add([]byte(`{"kind":"cniCacheV1","containerId":"abc","ifName":"eth0","networkName":"n","result":{"cniVersion":"0.1.0","ip4":{"ip":"x"}}}`))
	f.Add([]byte(`{"kind":"cniCacheV1","containerId":"abc","ifName":"eth0","networkName":"n","result":{"CNIVersion":""}}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		c := New(t.TempDir())
		path := writeResult(t, c, "net-abc-eth0", data)

		e, err := parseEntry(path, data)
		if err == nil {
			require.NotNil(t, e)
			_, _ = e.Result()
			_ = e.CNIVersion()
		} else {
			require.ErrorIs(t, err, ErrCorruptEntry)
		}

		l, err := c.ForContainer("abc")
		require.NoError(t, err)
		if len(l.Corrupt) > 0 {
			ee := entryErrors(l)["net-abc-eth0"]
			require.NotNil(t, ee)
			require.ErrorIs(t, ee, ErrCorruptEntry)
			assert.Equal(t, nameTriple{"net", "abc", "eth0"}, nameTriple{ee.Network, ee.ContainerID, ee.IfName})
		}
		_, _ = c.List()
	})
}

func readFixtureEntry(t *testing.T, c *Cache, name string) *Entry {
	t.Helper()
	e, err := readEntry(filepath.Join(c.ResultsDir(), name))
	require.NoError(t, err)
	return e
}

func FuzzEntryResult(f *testing.F) {
	for _, r := range []string{result020, result040, result100, result110, `{}`, `null`, `{"ips":[{"address":"x"}]}`} {
		f.Add([]byte(r), []byte(`{"cniVersion":"0.4.0"}`))
	}
	f.Add([]byte(`{"ip4":{"ip":"10.0.0.1/8"}}`), []byte(``))
	f.Fuzz(func(t *testing.T, result, config []byte) {
		e := &Entry{Path: "/p", Config: config, RawResult: result}
		r, err := e.Result()
		if err != nil {
			var ee *EntryError
			require.ErrorAs(t, err, &ee)
			assert.Nil(t, r)
		}
	})
}
