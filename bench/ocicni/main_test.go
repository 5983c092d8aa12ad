package ocicni_test

import (
	"os"
	"testing"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// pluginDir holds the reference plugins and the recorder when the
// benchmarks run as root; it is empty otherwise.
var pluginDir string

func TestMain(m *testing.M) { os.Exit(testenv.MainWithPlugins(m, &pluginDir)) }
