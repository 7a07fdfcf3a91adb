package casource

import (
	"context"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// watchHealth is one watch's freshness: since when its list and watch calls
// have been failing (or its stream ended without being restarted), and the
// last reason. Each watched object keeps its own, so a source the guard may
// no longer read goes stale on its own clock, and a healthy watch never
// makes it look fresh again (nor does it make a healthy one look stale).
type watchHealth struct {
	mu    sync.Mutex
	since time.Time // zero while the watch is fresh
	err   error
}

// observe records the outcome of one list or watch call (or the end of the
// stream, as errWatchEnded) at now. A success makes the watch fresh; the
// first failure after one starts the clock, later failures keep it running
// and replace the reason.
func (h *watchHealth) observe(err error, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		h.since, h.err = time.Time{}, nil
		return
	}
	if h.since.IsZero() {
		h.since = now
	}
	h.err = err
}

// state reports since when the watch has been failing and why; a zero time
// while it is fresh.
func (h *watchHealth) state() (time.Time, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.since, h.err
}

// recordingReader reads through a WatchReader and remembers the watches one
// source's read used (a Certificate and its Secret, an Issuer and its
// Secret), so the source's staleness is theirs and no other watch's.
type recordingReader struct {
	*WatchReader
	keys []watchKey
}

// Get implements client.Reader.
func (r *recordingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if k, err := r.keyOf(key, obj); err == nil {
		r.keys = append(r.keys, k)
	}
	return r.WatchReader.Get(ctx, key, obj, opts...)
}
