package cache

import (
	"errors"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// indexSupported: inotify is there.
const indexSupported = true

// dirWatch is an inotify instance watching at most one directory for
// files created, removed and renamed. Its methods are called with the
// index's lock held.
type dirWatch struct {
	fd  int
	wd  int // -1 when watching nothing
	buf []byte
}

const dirWatchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

func newDirWatch() (*dirWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, errors.Join(ErrNoIndex, os.NewSyscallError("inotify_init1", err))
	}
	return &dirWatch{fd: fd, wd: -1, buf: make([]byte, 64<<10)}, nil
}

// add watches dir; false when it cannot (dir missing, say).
func (w *dirWatch) add(dir string) bool {
	wd, err := unix.InotifyAddWatch(w.fd, dir, dirWatchMask)
	if err != nil {
		return false
	}
	w.wd = wd
	return true
}

// remove stops watching, and drops the events queued so far.
func (w *dirWatch) remove() {
	if w.wd >= 0 {
		_, _ = unix.InotifyRmWatch(w.fd, uint32(w.wd))
		w.wd = -1
	}
	for {
		if n, err := unix.Read(w.fd, w.buf); n <= 0 || err != nil {
			return
		}
	}
}

// drain applies every queued event to x. It returns false when x can no
// longer mirror the directory: events were lost, the directory went or
// was replaced, or the queue could not be read.
func (w *dirWatch) drain(x *nameIndex) bool {
	for {
		n, err := unix.Read(w.fd, w.buf)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return true
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil || n <= 0:
			return false
		}
		if !w.apply(x, w.buf[:n]) {
			return false
		}
	}
}

// apply applies the events in b to x.
func (w *dirWatch) apply(x *nameIndex, b []byte) bool {
	for off := 0; off+unix.SizeofInotifyEvent <= len(b); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[off]))
		nameStart := off + unix.SizeofInotifyEvent
		nameEnd := nameStart + int(ev.Len)
		if nameEnd > len(b) {
			return false
		}
		off = nameEnd
		switch {
		case ev.Mask&(unix.IN_Q_OVERFLOW|unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0:
			return false
		case int(ev.Wd) != w.wd || ev.Mask&unix.IN_ISDIR != 0:
			continue // an old watch's, or a subdirectory: never an entry
		}
		name := cString(b[nameStart:nameEnd])
		if ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
			x.add(name)
		} else {
			x.remove(name)
		}
	}
	return true
}

func (w *dirWatch) close() error {
	return os.NewSyscallError("close", unix.Close(w.fd))
}

// cString returns the NUL-padded name of an inotify event.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
