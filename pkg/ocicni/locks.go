package ocicni

import (
	"time"

	"github.com/seed-671fdd43/ocicni/internal/locks"
)

// defaultGatePatience lets pods in for a second before GC holds them
// back, for at most a fifth of a second at a time (see locks.Gate).
var defaultGatePatience = locks.Patience{Idle: time.Second, Hold: 200 * time.Millisecond}
