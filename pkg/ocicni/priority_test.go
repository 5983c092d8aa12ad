package ocicni

import (
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/pluginexec"
	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
)

// GC's DELs of stale attachments (unpaced) and healing's retries run at
// the background nice value, so that they leave the CPU to pods being set up;
// a runtime's setup and teardown, and the GC verbs that pods wait for,
// run at the manager's own.
func TestBackgroundDELsRunAtLowPriority(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.addConf("neta", e.gcConflist("neta", nil, nil))
	flag := e.failingDELNet("flaky")
	// Pacing off: GC's DELs beside setups keep the normal priority (see
	// TestGCGivesWayToSetupInFlight), and this GC follows setups at once.
	m := e.start(WithHealing(fastHeal), withGCPace(gcPace{}))
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	require.NoError(t, err)
	own := 20 - prio // Linux's getpriority returns 20 minus the nice value
	require.Less(t, own, pluginexec.LowNice, "the test process must not already run at the background nice value")

	kept, stale := e.pod("kept"), e.pod("stale")
	e.setUp(kept)
	e.setUp(stale)
	require.NoError(t, m.GC(e.ctx(), []*PodNetwork{&kept}))
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), kept))

	flaky := e.pod("flaky")
	flaky.Networks = []NetAttachment{{Name: "flaky"}}
	e.setUp(flaky)
	require.Error(t, m.TearDownPodWithContext(e.ctx(), flaky))
	e.runtimeGivesUp(flaky)
	require.NoError(t, os.Remove(flag))
	e.requireHealed(m, flaky, "flaky")

	nice := func(verb, id string) []int {
		var out []int
		for _, c := range e.calls(verb) {
			if c.ContainerID == id {
				out = append(out, c.Nice)
			}
		}
		return out
	}
	// Every thread of a background DEL's plugin runs at SCHED_IDLE and
	// the background nice value, from its start: its Go runtime's
	// threads too, which the plugin started before it could be lowered
	// from outside. Other runs' threads keep the normal policy.
	background := calllog.Priority{Nice: pluginexec.LowNice, Policy: calllog.SchedIdle}
	flakyDELs := 0
	for _, c := range e.calls("") {
		require.NotEmpty(t, c.Threads, "the recorder reads its threads' priorities")
		low := c.Verb == "DEL" && c.ContainerID == stale.ID
		if c.Verb == "DEL" && c.ContainerID == flaky.ID {
			low = flakyDELs > 0 // the first is the runtime's teardown
			flakyDELs++
		}
		for _, th := range c.Threads {
			if low {
				assert.Equal(t, background, th, "a thread of the background %s of %s", c.Verb, c.Network)
			} else {
				assert.Equal(t, calllog.Priority{Nice: own, Policy: calllog.SchedOther}, th, "a thread of the %s of %s", c.Verb, c.Network)
			}
		}
	}
	assert.Equal(t, []int{own}, nice("ADD", stale.ID), "setup")
	assert.Equal(t, []int{pluginexec.LowNice}, nice("DEL", stale.ID), "GC's DEL of a stale attachment")
	assert.Equal(t, []int{own}, nice("DEL", kept.ID), "the runtime's teardown")
	gcs := calllog.Filter(e.calls("GC"), "GC")
	require.Len(t, gcs, 1)
	assert.Equal(t, own, gcs[0].Nice, "the GC verb, which pods wait for")
	dels := nice("DEL", flaky.ID)
	require.GreaterOrEqual(t, len(dels), 2, "the failed teardown, then at least one retry")
	assert.Equal(t, own, dels[0], "the runtime's teardown")
	for _, n := range dels[1:] {
		assert.Equal(t, pluginexec.LowNice, n, "healing's retries")
	}
}
