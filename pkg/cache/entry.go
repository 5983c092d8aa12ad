package cache

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// KindV1 is the "kind" of every cache file libcni writes.
const KindV1 = libcni.CNICacheV1

// Entry is one parsed libcni cache file.
type Entry struct {
	Path           string // absolute file path
	ContainerID    string
	Network        string
	IfName         string
	NetNS          string
	Config         []byte // the network config list bytes that ADD used
	CNIArgs        [][2]string
	CapabilityArgs map[string]interface{}
	RawResult      json.RawMessage // "result" as stored; nil if absent or null
}

// fileFormat mirrors libcni's unexported cachedInfo field for field, except
// that the result is kept raw so that it can be decoded at its own version.
type fileFormat struct {
	Kind           string                 `json:"kind"`
	ContainerID    string                 `json:"containerId"`
	Config         []byte                 `json:"config"`
	IfName         string                 `json:"ifName"`
	NetworkName    string                 `json:"networkName"`
	NetNS          string                 `json:"netns,omitempty"`
	CniArgs        [][2]string            `json:"cniArgs,omitempty"`
	CapabilityArgs map[string]interface{} `json:"capabilityArgs,omitempty"`
	RawResult      json.RawMessage        `json:"result,omitempty"`
}

// parseEntry parses the content of the cache file at path. It accepts
// exactly the files that libcni's GetCachedAttachments accepts. When the
// JSON decodes but the entry is still corrupt (wrong kind, missing field,
// result that is not an object) it returns the partial entry together with
// an error matching ErrCorruptEntry, so that callers can learn names from it.
func parseEntry(path string, data []byte) (*Entry, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, corruptf("empty file")
	}
	var f fileFormat
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, corrupt(err)
	}
	e := &Entry{
		Path:           path,
		ContainerID:    f.ContainerID,
		Network:        f.NetworkName,
		IfName:         f.IfName,
		NetNS:          f.NetNS,
		Config:         f.Config,
		CNIArgs:        f.CniArgs,
		CapabilityArgs: f.CapabilityArgs,
	}
	raw := bytes.TrimSpace(f.RawResult)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
	case raw[0] != '{':
		// libcni decodes "result" into a map and rejects anything else.
		return e, corruptf("result is not a JSON object")
	default:
		e.RawResult = raw
	}
	if f.Kind != KindV1 {
		return e, corruptf("kind is %q, want %q", f.Kind, KindV1)
	}
	var missing []string
	for _, m := range []struct{ name, value string }{
		{"networkName", f.NetworkName},
		{"containerId", f.ContainerID},
		{"ifName", f.IfName},
	} {
		if m.value == "" {
			missing = append(missing, m.name)
		}
	}
	if len(missing) > 0 {
		return e, corruptf("missing %s", strings.Join(missing, ", "))
	}
	return e, nil
}

// CNIVersion returns the cniVersion of the cached config, or "" if the
// config is absent or does not name one.
func (e *Entry) CNIVersion() string {
	var conf struct {
		CNIVersion string `json:"cniVersion"`
	}
	if json.Unmarshal(e.Config, &conf) != nil {
		return ""
	}
	return conf.CNIVersion
}

// Result decodes [Entry.RawResult] into a types.Result of the version named
// by the result's own "cniVersion". A result without one is decoded at
// [Entry.CNIVersion], the way libcni treats prevResult, and at "0.1.0" when
// the config names no version either. Result returns (nil, nil) when there
// is no result; failures are *[EntryError] values.
func (e *Entry) Result() (types.Result, error) {
	if len(e.RawResult) == 0 {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(e.RawResult, &obj); err != nil {
		return nil, e.fail(corrupt(err))
	}
	if obj == nil {
		return nil, nil
	}
	var head struct {
		CNIVersion string `json:"cniVersion"`
	}
	if err := json.Unmarshal(e.RawResult, &head); err != nil {
		return nil, e.fail(corrupt(err))
	}
	raw := []byte(e.RawResult)
	ver := head.CNIVersion
	if ver == "" {
		ver = e.CNIVersion()
		if ver == "" {
			ver = "0.1.0"
		}
		for k := range obj {
			if strings.EqualFold(k, "cniVersion") {
				delete(obj, k)
			}
		}
		obj["cniVersion"], _ = json.Marshal(ver)
		var err error
		if raw, err = json.Marshal(obj); err != nil {
			return nil, e.fail(err)
		}
	}
	res, err := version.NewResult(ver, raw)
	if err != nil {
		return nil, e.fail(fmt.Errorf("decode result at version %q: %w", ver, err))
	}
	return res, nil
}

func (e *Entry) fail(err error) *EntryError {
	return &EntryError{
		Path:        e.Path,
		Network:     e.Network,
		ContainerID: e.ContainerID,
		IfName:      e.IfName,
		Err:         err,
	}
}

// Duplicates groups entries by (ContainerID, IfName) and returns the groups
// that hold more than one distinct Network: one interface name claimed by
// several networks, which a correct ADD never produces. Groups come in the
// order of their first entry; entries keep their input order. Nil entries
// are ignored.
func Duplicates(entries []*Entry) [][]*Entry {
	type key struct{ id, ifname string }
	groups := make(map[key][]*Entry)
	var order []key
	for _, e := range entries {
		if e == nil {
			continue
		}
		k := key{e.ContainerID, e.IfName}
		if _, seen := groups[k]; !seen {
			order = append(order, k)
		}
		groups[k] = append(groups[k], e)
	}
	var out [][]*Entry
	for _, k := range order {
		g := groups[k]
		nets := make(map[string]struct{}, len(g))
		for _, e := range g {
			nets[e.Network] = struct{}{}
		}
		if len(nets) > 1 {
			out = append(out, g)
		}
	}
	return out
}
