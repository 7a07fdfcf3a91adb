package observe

import (
	"context"
	"time"
)

// The queue of pending writes: the watch's event handler appends, the
// worker decides them in order (see Observer).

// maxPending bounds the writes waiting for one configuration. The worker
// decides a write in tens of microseconds and kube-apiserver stores a few
// hundred writes a second at most, so the bound is reached only while the
// worker is stuck; past it, two adjacent pending writes are folded into one
// (their net change is judged) where that skips no state the observer
// would judge (fold), counted as a "merged" event, or as "lost" when every
// pending state was distinct.
const maxPending = 1024

// write is one change the watch delivered: the new state (nil: deleted)
// and the state it replaced (nil: a creation, or unknown).
type write struct {
	cur, old *object
	// at is when the watch delivered it: a ca-mismatch stands once
	// MismatchGrace has passed since.
	at time.Time
	// key is what the observer judges of cur (fold).
	key trustKey
	// until is when its ca-mismatch stands; zero until one was found.
	until time.Time
}

// enqueue appends the write of cur over old to k's pending writes and
// queues k. old is also the baseline of a configuration the observer has
// not seen.
func (o *Observer) enqueue(k configKey, cur, old *object) {
	o.mu.Lock()
	w := write{cur: cur, old: old, at: time.Now(), key: trustKeyOf(cur)}
	switch p := o.pending[k]; {
	case len(p) < maxPending:
		o.pending[k] = append(p, w)
	default:
		// The worker is stuck: two pending writes become one.
		folded, lost := fold(p, w)
		o.pending[k] = folded
		o.Metrics.Events.WithLabelValues(map[bool]string{false: "merged", true: "lost"}[lost]).Inc()
	}
	if _, ok := o.decided[k]; !ok && old != nil {
		o.decided[k] = *old
	}
	o.mu.Unlock()
	o.queue.Add(k)
	o.Metrics.QueueDepth.Set(float64(o.queue.Len()))
}

// processNext decides the pending writes of the next queued configuration,
// oldest first, until none is left or one must wait (it is put back on the
// queue, the writes after it behind it); false once the queue is shut
// down.
func (o *Observer) processNext(ctx context.Context) bool {
	k, shutdown := o.queue.Get()
	if shutdown {
		return false
	}
	defer o.queue.Done(k)
	o.Metrics.QueueDepth.Set(float64(o.queue.Len()))
	for {
		w, queued, prev, seen := o.oldest(k)
		if !queued {
			return true
		}
		if wait, grace := o.decideWrite(ctx, k, &w, prev, seen); wait > 0 {
			o.putBack(k, w, wait, grace)
			return true
		}
		o.done(k, w)
	}
}

// decideWrite judges one pending write of k; it returns how long the write
// must wait on the queue, having recorded nothing (grace: for its
// ca-mismatch to stand), or 0 once decided.
func (o *Observer) decideWrite(ctx context.Context, k configKey, w *write, prev object, seen bool) (wait time.Duration, grace bool) {
	switch {
	case w.cur == nil:
		o.flapDetector().Forget(k.kind, k.name)
		return 0, false
	case seen && prev.meta.ResourceVersion == w.cur.meta.ResourceVersion:
		return 0, false
	case !w.until.IsZero() && time.Now().Before(w.until):
		// Woken early (another write of k was queued): its ca-mismatch
		// still waits, undecided again.
		return time.Until(w.until), true
	}
	return o.changed(ctx, k, o.baseline(k, *w, prev, seen), w)
}

// oldest is k's oldest pending write and the state decided before it
// (prev, if seen); queued is false when none is pending.
func (o *Observer) oldest(k configKey) (w write, queued bool, prev object, seen bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.pending[k]
	if len(p) == 0 {
		delete(o.pending, k)
		return write{}, false, object{}, false
	}
	prev, seen = o.decided[k]
	return p[0], true, prev, seen
}

// done removes k's oldest pending write, decided, and moves k's decided
// state on to it (or forgets k once it is deleted).
func (o *Observer) done(k configKey, w write) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if p := o.pending[k]; len(p) > 1 {
		p[0] = write{}
		o.pending[k] = p[1:]
	} else {
		delete(o.pending, k)
	}
	delete(o.retries, k)
	if w.cur == nil {
		delete(o.decided, k)
		return
	}
	o.decided[k] = *w.cur
	o.Metrics.Decided.Inc()
}

// baseline picks the state w's change is judged against: the state the
// write replaced, else the last decided one of the same object; nil for a
// configuration deleted and created again, whose flapping history it drops.
func (o *Observer) baseline(k configKey, w write, prev object, seen bool) *object {
	switch {
	case w.old != nil && w.old.meta.UID == w.cur.meta.UID:
		return w.old // the state this write replaced
	case seen && prev.meta.UID == w.cur.meta.UID:
		return &prev
	case seen:
		// Deleted and created again since the last decision: the successor
		// starts clean.
		o.flapDetector().Forget(k.kind, k.name)
	}
	return nil
}

// putBack requeues k after wait. Waiting for a CA source read in the
// background, or for a rotation to reach the CA watch, the write stays the
// oldest pending one and is judged later against the same old state; the
// writes after it wait behind it.
func (o *Observer) putBack(k configKey, w write, wait time.Duration, grace bool) {
	o.mu.Lock()
	if p := o.pending[k]; len(p) > 0 {
		p[0] = w
	}
	if !grace {
		o.retries[k]++
	}
	o.mu.Unlock()
	o.queue.AddAfter(k, wait)
}
