package fakecni

import (
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
)

// Call is one recorded plugin call, taken from what the plugin would have
// received: its environment and its stdin.
type Call struct {
	Verb        string            // CNI_COMMAND: ADD, DEL, CHECK, GC, STATUS, VERSION
	Network     string            // "name" of the stdin config; "" for VERSION
	PluginType  string            // the plugin binary's file name, the config's "type"
	PluginPath  string            // the path FindInPath returned
	ContainerID string            // CNI_CONTAINERID
	NetNS       string            // CNI_NETNS
	IfName      string            // CNI_IFNAME
	Args        map[string]string // CNI_ARGS split into keys and values; never nil
	Path        string            // CNI_PATH
	Env         []string          // the whole environment, as the plugin got it
	Stdin       []byte            // the stdin config as sent
	// Config is Stdin decoded, nil when it is not a JSON object: the
	// plugin's config with "name", "cniVersion", "runtimeConfig" and
	// "prevResult" as libcni injected them.
	Config map[string]any
}

func newCall(pluginPath string, stdin []byte, environ []string) Call {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "CNI_") {
			env[k] = v // later values win, as in the plugin's environment
		}
	}
	c := Call{
		Verb:        env["CNI_COMMAND"],
		PluginType:  filepath.Base(pluginPath),
		PluginPath:  pluginPath,
		ContainerID: env["CNI_CONTAINERID"],
		NetNS:       env["CNI_NETNS"],
		IfName:      env["CNI_IFNAME"],
		Args:        argsOf(env["CNI_ARGS"]),
		Path:        env["CNI_PATH"],
		Env:         append([]string(nil), environ...),
		Stdin:       append([]byte(nil), stdin...),
	}
	if err := json.Unmarshal(stdin, &c.Config); err != nil {
		c.Config = nil // recorded anyway; a test can still read Stdin
	}
	c.Network, _ = c.Config["name"].(string)
	return c
}

// Getenv returns the value of key in the call's environment, the last
// one if it is set more than once, as the plugin would read it.
func (c Call) Getenv(key string) string {
	v := ""
	for _, kv := range c.Env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// String gives the verb, network, ifname and container ID, those that
// are set: "ADD net eth0 pod1", "GC net".
func (c Call) String() string {
	parts := []string{c.Verb}
	for _, s := range []string{c.Network, c.IfName, c.ContainerID} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, " ")
}

// ValidAttachments returns what a GC call was told to keep
// ("cni.dev/valid-attachments"), nil for other verbs. An empty, non-nil
// slice means that GC was told to keep nothing.
func (c Call) ValidAttachments() []types.GCAttachment {
	raw, ok := c.Config["cni.dev/valid-attachments"]
	if !ok {
		return nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	out := []types.GCAttachment{}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil
	}
	return out
}
