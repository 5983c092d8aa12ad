// Package conflist holds the one builder of network configuration lists
// that the tests share: [ocicnitest.Conflist] (public), testenv.Conflist
// and the internal tests of the manager, the config loader and the cache
// all call [Build]. It imports nothing of this module, so that every one
// of them can.
//
// [ocicnitest.Conflist]: https://pkg.go.dev/github.com/seed-671fdd43/ocicni/pkg/ocicni/ocicnitest#Conflist
package conflist

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Build returns the JSON of a network configuration list named name at
// cniVersion, with one plugin per entry of plugins. An entry that starts
// with "{" is taken as that plugin's whole JSON config (to add
// capabilities or plugin keys); any other is a plugin type.
func Build(name, cniVersion string, plugins ...string) []byte {
	raw := make([]json.RawMessage, len(plugins))
	for i, p := range plugins {
		if strings.HasPrefix(strings.TrimSpace(p), "{") {
			raw[i] = json.RawMessage(p)
			continue
		}
		b, _ := json.Marshal(map[string]string{"type": p}) // a map of strings always marshals
		raw[i] = b
	}
	b, err := json.Marshal(map[string]any{"cniVersion": cniVersion, "name": name, "plugins": raw})
	if err != nil {
		// Only an invalid verbatim plugin config gets here; keep it
		// visible to the reader, which rejects the list as invalid.
		return []byte(fmt.Sprintf(`{"cniVersion":%q,"name":%q,"plugins":[%s]}`, cniVersion, name, strings.Join(plugins, ",")))
	}
	return b
}
