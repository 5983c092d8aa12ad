package locks

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// This file is the stamps of a key's lock file: who released it last and
// when (at offset 0), and who holds it and since when (at holderAt, see
// takeover.go).

// stampLen is the fixed length of a release stamp: the owner, a space,
// the release time in Unix nanoseconds, padded with spaces, a newline.
const stampLen = 64

// liveOwners holds the owners of this process that are not retired.
var liveOwners sync.Map

// Retire ends the owner's life: the stamps it left no longer count as a
// live holder's (see [Stamp.Live]). Its locks keep working.
func (fl *Files) Retire() { liveOwners.Delete(fl.owner) }

// Live reports whether the owner that stamped s may still be at work: its
// process runs and, when it is this process, it has not retired. The
// zero Stamp is not live.
func (s Stamp) Live() bool {
	pidStr, _, ok := strings.Cut(s.Owner, "-")
	pid, err := strconv.Atoi(pidStr)
	switch {
	case !ok || err != nil || pid <= 0:
		return false
	case pid == os.Getpid():
		_, live := liveOwners.Load(s.Owner)
		return live
	}
	return processAlive(pid)
}

// Stamp is who last released a key's lock, and when.
type Stamp struct {
	Owner string
	At    time.Time
}

// Stamp returns who last released the key's lock and when: the zero
// Stamp when no holder has stamped it (or its stamp cannot be read).
func (l *FileLock) Stamp() Stamp { return readStamp(l.f) }

func writeStamp(f *os.File, owner string, at time.Time) { writeStampAt(f, 0, owner, at) }

func writeStampAt(f *os.File, off int64, owner string, at time.Time) {
	line := owner + " " + strconv.FormatInt(at.UnixNano(), 10)
	buf := []byte(fmt.Sprintf("%-*s\n", stampLen-1, line))
	// A stamp that cannot be written leaves the last one: readers then
	// take the key as released earlier, which only a GC reads.
	_, _ = f.WriteAt(buf[:stampLen], off)
}

func readStamp(f *os.File) Stamp { return readStampAt(f, 0) }

// clearStamp blanks the release stamp: no holder of this key released it.
func clearStamp(f *os.File) {
	_, _ = f.WriteAt([]byte(fmt.Sprintf("%*s\n", stampLen-1, "")), 0) // as writeStamp, best effort
}

func readStampAt(f *os.File, off int64) Stamp {
	buf := make([]byte, stampLen)
	n, _ := f.ReadAt(buf, off)
	owner, at, ok := strings.Cut(strings.TrimSpace(string(buf[:n])), " ")
	if !ok {
		return Stamp{}
	}
	ns, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return Stamp{}
	}
	return Stamp{Owner: owner, At: time.Unix(0, ns)}
}
