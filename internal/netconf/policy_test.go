package netconf

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOverridesFromBytes(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		want       Overrides
		bad        string // a part of the error; "" for none
	}{
		{name: "none", conf: `{"name":"n"}`},
		{name: "tolerant", conf: `{"name":"n","ocicni.teardownPolicy":"tolerant"}`, want: Overrides{Policy: Tolerant}},
		{name: "bad policy", conf: `{"ocicni.teardownPolicy":"lenient"}`, bad: `must be "strict" or "tolerant", got "lenient"`},
		{
			name: "every verb", conf: `{"ocicni.timeouts":{"add":"30s","del":"10s","check":"1m30s"}}`,
			want: Overrides{Timeouts: Timeouts{Add: 30 * time.Second, Del: 10 * time.Second, Check: 90 * time.Second}},
		},
		{
			name: "policy and one verb", conf: `{"ocicni.teardownPolicy":"strict","ocicni.timeouts":{"del":"250ms"}}`,
			want: Overrides{Policy: Strict, Timeouts: Timeouts{Del: 250 * time.Millisecond}},
		},
		{name: "empty object", conf: `{"ocicni.timeouts":{}}`},
		{name: "not an object", conf: `{"ocicni.timeouts":"30s"}`, bad: "want an object"},
		{name: "null", conf: `{"ocicni.timeouts":null}`, bad: "want an object"},
		{name: "unknown verb", conf: `{"ocicni.timeouts":{"dle":"1s"}}`, bad: `unknown verb "dle"`},
		{name: "number", conf: `{"ocicni.timeouts":{"add":30}}`, bad: `"add": want a duration string`},
		{name: "not a duration", conf: `{"ocicni.timeouts":{"del":"ten"}}`, bad: `"del": "ten" is not a duration above zero`},
		{name: "zero", conf: `{"ocicni.timeouts":{"check":"0s"}}`, bad: `"check": "0s" is not a duration above zero`},
		{name: "negative", conf: `{"ocicni.timeouts":{"add":"-1s"}}`, bad: "is not a duration above zero"},
		{name: "not JSON", conf: `{`, bad: "unexpected end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := OverridesFromBytes([]byte(tc.conf))
			if tc.bad != "" {
				require.ErrorIs(t, err, ErrInvalidConfig)
				assert.Contains(t, err.Error(), tc.bad)
				assert.Equal(t, Overrides{}, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestTimeoutsOr(t *testing.T) {
	def := Timeouts{Add: time.Minute, Del: 20 * time.Second}
	assert.Equal(t, Timeouts{Add: time.Second, Del: 20 * time.Second, Check: 3 * time.Second},
		Timeouts{Add: time.Second, Check: 3 * time.Second}.Or(def))
	assert.Equal(t, def, Timeouts{}.Or(def))
	require.NoError(t, def.Valid())
	require.Error(t, Timeouts{Del: -time.Second}.Valid())
}
