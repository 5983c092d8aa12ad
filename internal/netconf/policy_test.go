package netconf

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPolicyFromBytes(t *testing.T) {
	p, err := PolicyFromBytes([]byte(`{"name":"n"}`))
	require.NoError(t, err)
	assert.Equal(t, TeardownPolicy(""), p)
	p, err = PolicyFromBytes([]byte(`{"name":"n","ocicni.teardownPolicy":"tolerant"}`))
	require.NoError(t, err)
	assert.Equal(t, Tolerant, p)
	_, err = PolicyFromBytes([]byte(`{"ocicni.teardownPolicy":"lenient"}`))
	require.ErrorIs(t, err, ErrInvalidConfig)
}
