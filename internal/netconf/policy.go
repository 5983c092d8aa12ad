package netconf

import (
	"encoding/json"
	"fmt"
	"time"
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

// TimeoutsKey is the top-level key of a network configuration file that
// bounds the plugin runs of each verb for that network, for example
// "ocicni.timeouts": {"add": "30s", "del": "10s", "check": "5s"}. Each
// value is a Go duration above zero; a verb left out takes the manager's
// default.
const TimeoutsKey = "ocicni.timeouts"

// Timeouts bound a network's plugin runs for one verb: all the plugins of
// its list, for one ADD, DEL or CHECK of one attachment. Zero means no
// bound of its own. The caller's deadline still applies: the shorter one
// ends the runs.
type Timeouts struct {
	Add, Del, Check time.Duration
}

// Or returns t with each verb it leaves at zero taken from def.
func (t Timeouts) Or(def Timeouts) Timeouts {
	pick := func(own, d time.Duration) time.Duration {
		if own > 0 {
			return own
		}
		return d
	}
	return Timeouts{Add: pick(t.Add, def.Add), Del: pick(t.Del, def.Del), Check: pick(t.Check, def.Check)}
}

// Valid returns an error when a timeout is negative.
func (t Timeouts) Valid() error {
	if t.Add < 0 || t.Del < 0 || t.Check < 0 {
		return fmt.Errorf("negative timeout in %+v", t)
	}
	return nil
}

// Overrides are what a network's config file sets for that network over
// the manager's options, under the keys [TeardownPolicyKey] and
// [TimeoutsKey]. Their zero value leaves every option as it is.
type Overrides struct {
	Policy   TeardownPolicy // "": the manager's default
	Timeouts Timeouts       // a zero verb: the manager's default
}

// OverridesFromBytes reads the override keys of a config. A key with a
// value that cannot be used is an error matching [ErrInvalidConfig].
func OverridesFromBytes(b []byte) (Overrides, error) {
	var o Overrides
	var v map[string]json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		return o, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if raw, ok := v[TeardownPolicyKey]; ok {
		if err := json.Unmarshal(raw, &o.Policy); err != nil || !ValidPolicy(o.Policy) {
			return Overrides{}, fmt.Errorf("%w: %s must be %q or %q, got %s", ErrInvalidConfig, TeardownPolicyKey, Strict, Tolerant, raw)
		}
	}
	if raw, ok := v[TimeoutsKey]; ok {
		t, err := timeoutsFromJSON(raw)
		if err != nil {
			return Overrides{}, fmt.Errorf("%w: %s: %w", ErrInvalidConfig, TimeoutsKey, err)
		}
		o.Timeouts = t
	}
	return o, nil
}

// timeoutVerbs are the keys of [TimeoutsKey]'s object.
var timeoutVerbs = []string{"add", "del", "check"}

func timeoutsFromJSON(raw json.RawMessage) (Timeouts, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return Timeouts{}, fmt.Errorf("want an object such as {\"add\": \"30s\", \"del\": \"10s\"}, got %s", raw)
	}
	var t Timeouts
	for k, rv := range m {
		var d *time.Duration
		switch k {
		case "add":
			d = &t.Add
		case "del":
			d = &t.Del
		case "check":
			d = &t.Check
		default:
			return Timeouts{}, fmt.Errorf("unknown verb %q (want one of %v)", k, timeoutVerbs)
		}
		var s string
		if err := json.Unmarshal(rv, &s); err != nil {
			return Timeouts{}, fmt.Errorf("%q: want a duration string such as \"30s\", got %s", k, rv)
		}
		v, err := time.ParseDuration(s)
		if err != nil || v <= 0 {
			return Timeouts{}, fmt.Errorf("%q: %q is not a duration above zero", k, s)
		}
		*d = v
	}
	return t, nil
}
