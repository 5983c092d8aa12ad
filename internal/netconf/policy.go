package netconf

import (
	"encoding/json"
	"fmt"
)

// TeardownPolicy chooses what happens to DEL failures. A network's config
// file may set one (see [TeardownPolicyKey]); package ocicni applies it.
type TeardownPolicy string

const (
	// Strict returns DEL failures to the caller so that it retries.
	Strict TeardownPolicy = "strict"
	// Tolerant logs DEL failures and reports success. The failed
	// attachments' cache entries are kept, so a retry or GC still has
	// their config.
	Tolerant TeardownPolicy = "tolerant"
)

// TeardownPolicyKey is the top-level key of a network configuration file
// that overrides the manager's teardown policy for that network, for
// example "ocicni.teardownPolicy": "tolerant".
const TeardownPolicyKey = "ocicni.teardownPolicy"

// ValidPolicy reports whether p is [Strict] or [Tolerant].
func ValidPolicy(p TeardownPolicy) bool { return p == Strict || p == Tolerant }

// PolicyFromBytes reads the per-network teardown policy key of a config
// ("" when the config has none).
func PolicyFromBytes(b []byte) (TeardownPolicy, error) {
	var v map[string]json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	raw, ok := v[TeardownPolicyKey]
	if !ok {
		return "", nil
	}
	var p TeardownPolicy
	if err := json.Unmarshal(raw, &p); err != nil || !ValidPolicy(p) {
		return "", fmt.Errorf("%w: %s must be %q or %q, got %s", ErrInvalidConfig, TeardownPolicyKey, Strict, Tolerant, raw)
	}
	return p, nil
}
