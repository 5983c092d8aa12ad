package cache

import (
	"slices"
	"sync"
)

// maxWarmConfigs bounds the saved configs one Cache keeps although no
// record links them.
const maxWarmConfigs = 16

// warmConfigs are the digests of the configs a Cache saved most recently,
// newest last. [Cache.ReleaseConfigs] keeps their shared copies when the
// last record that linked one goes, so that the next setup of the same
// config links the copy instead of writing it again: writing it durably
// costs two more syncs, which a node that sets pods up one at a time would
// otherwise pay for every pod. What it keeps is bounded by
// maxWarmConfigs; a garbage collector removes copies no record links
// ([Cache.ListConfigs]).
type warmConfigs struct {
	mu      sync.Mutex // guards digests
	digests []string
}

func newWarmConfigs() *warmConfigs {
	return &warmConfigs{digests: make([]string, 0, maxWarmConfigs)}
}

// touch makes digest the most recent, dropping the oldest when full.
func (w *warmConfigs) touch(digest string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.digests); n > 0 && w.digests[n-1] == digest {
		return // the common case: the same config as the last setup
	}
	if i := slices.Index(w.digests, digest); i >= 0 {
		w.digests = slices.Delete(w.digests, i, i+1)
	} else if len(w.digests) == maxWarmConfigs {
		w.digests = slices.Delete(w.digests, 0, 1)
	}
	w.digests = append(w.digests, digest)
}

// has reports whether digest is among the recent ones.
func (w *warmConfigs) has(digest string) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Contains(w.digests, digest)
}
