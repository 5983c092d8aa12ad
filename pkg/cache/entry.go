package cache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/types/create"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/seed-671fdd43/ocicni/internal/guard"
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

// parseEntry parses the content of the cache file at path. It accepts the
// files that libcni's GetCachedAttachments accepts, and of those only the
// ones whose names pass [ValidateNames] and agree with the file's own name
// (and with the cached config's "name", where it has one): any other value
// could steer a path, an environment variable or a plugin run. When the
// JSON decodes but the entry is still corrupt it returns the partial entry
// together with an error matching ErrCorruptEntry; the caller must not act
// on its names.
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
	if err := ValidateNames(e.Network, e.ContainerID, e.IfName); err != nil {
		return e, corrupt(err)
	}
	if base, want := filepath.Base(path), e.Network+"-"+e.ContainerID+"-"+e.IfName; base != want {
		return e, corruptf("content names %q, but the file is %q", want, base)
	}
	if name := e.configName(); name != "" && name != e.Network {
		return e, corruptf("cached config is network %q, entry is %q", name, e.Network)
	}
	return e, nil
}

// configName returns the "name" of the cached config, or "" if there is
// none or the config is not JSON.
func (e *Entry) configName() string {
	var conf struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(e.Config, &conf) != nil {
		return ""
	}
	return conf.Name
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
	// libcni's result converters have panicked on JSON nulls inside
	// "ips" or "interfaces"; a cache file must never crash the runtime.
	res, err := guard.Value("decoding the result", e.Path, e.result)
	if errors.Is(err, guard.ErrPanic) {
		return nil, e.fail(corrupt(err))
	}
	return res, err
}

func (e *Entry) result() (res types.Result, err error) {
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
		if raw, err = json.Marshal(obj); err != nil {
			return nil, e.fail(err)
		}
	}
	res, err = version.NewResult(ver, raw)
	if err != nil {
		return nil, e.fail(fmt.Errorf("decode result at version %q: %w", ver, err))
	}
	return res, nil
}

// ResultAt is [Entry.Result] converted to cniVersion (see [Convert]).
func (e *Entry) ResultAt(cniVersion string) (types.Result, error) {
	res, err := e.Result()
	if err != nil || res == nil {
		return res, err
	}
	if res, err = Convert(res, cniVersion); err != nil {
		return nil, e.fail(err)
	}
	return res, nil
}

// Convert converts a result to cniVersion. A conversion that fails, or
// panics inside libcni's converters (they have on JSON nulls inside "ips"
// or "interfaces"), gives an error matching [ErrCorruptEntry].
func Convert(res types.Result, cniVersion string) (types.Result, error) {
	out, err := guard.Value("converting the result", "", func() (types.Result, error) { return res.GetAsVersion(cniVersion) })
	switch {
	case errors.Is(err, guard.ErrPanic):
		return nil, corrupt(err)
	case err != nil:
		return nil, fmt.Errorf("convert result to %s: %w", cniVersion, err)
	}
	return out, nil
}

// CheckLibcniResult reports whether libcni can use the cached result as
// prevResult for a list at cniVersion, decoding and converting it exactly
// as its DEL and CHECK do. When it cannot, libcni's DelNetworkList removes
// the entry before it runs any plugin, so a failing DEL would lose the
// cached config; callers then keep libcni away from the file. A nil error
// also covers an entry without a result, and a cniVersion below 0.4.0, for
// which libcni reads no cached result.
func (e *Entry) CheckLibcniResult(cniVersion string) error {
	if ok, verr := version.GreaterThanOrEqualTo(cniVersion, "0.4.0"); verr != nil || !ok || len(e.RawResult) == 0 {
		return nil
	}
	err := guard.Do("libcni's result decoding", e.Path, func() error {
		res, err := create.CreateFromBytes(e.RawResult)
		if err != nil {
			return e.fail(fmt.Errorf("libcni cannot decode the cached result: %w", err))
		}
		if _, err := res.GetAsVersion(cniVersion); err != nil {
			return e.fail(fmt.Errorf("libcni cannot convert the cached result to %s: %w", cniVersion, err))
		}
		return nil
	})
	if errors.Is(err, guard.ErrPanic) {
		return e.fail(corrupt(err))
	}
	return err
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

// corrupt wraps cause so that the result matches both ErrCorruptEntry and
// cause.
func corrupt(cause error) error {
	return fmt.Errorf("%w: %w", ErrCorruptEntry, cause)
}

// corruptf is corrupt for a cause that is only a message.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorruptEntry}, args...)...)
}
