package casource

import (
	"context"
	"errors"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
)

// errWatchEnded is the reason a watch is stale from the moment its stream
// ends until one of its list or watch calls succeeds again; its next failed
// call replaces it with its own error (Forbidden once the guard may no
// longer read the object).
var errWatchEnded = errors.New("the watch stream ended and has not been restarted")

// endWatch passes a watch's events through and calls onEnd when the stream
// ends on its own: the API server closed it, or the connection to it broke.
// That is when the store stops being fresh, so --ca-max-stale counts from
// there, for the sources read from this watch only. It is measured here, on
// the stream, because client-go's reflector only logs most watch endings
// ("watch ended with error") and tells no handler; the first failed call
// after its back-off (0.8 s to 30 s later) was the earliest sign before.
//
// No end is reported for a watch stopped by its consumer, for one whose
// context ended, or for one that ended with an expired resourceVersion (the
// reflector lists again; nothing is unreachable).
type endWatch struct {
	inner    watch.Interface
	out      chan watch.Event
	stopped  chan struct{}
	stopOnce sync.Once
}

func newEndWatch(ctx context.Context, inner watch.Interface, onEnd func()) watch.Interface {
	w := &endWatch{inner: inner, out: make(chan watch.Event), stopped: make(chan struct{})}
	go w.pass(ctx, onEnd)
	return w
}

func (w *endWatch) pass(ctx context.Context, onEnd func()) {
	defer close(w.out)
	expired := false
	for ev := range w.inner.ResultChan() {
		if ev.Type == watch.Error {
			err := apierrors.FromObject(ev.Object)
			expired = apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
		}
		select {
		case w.out <- ev:
		case <-w.stopped:
			return
		}
	}
	select {
	case <-w.stopped:
		return
	default:
	}
	if ctx.Err() == nil && !expired {
		onEnd()
	}
}

// ResultChan implements watch.Interface.
func (w *endWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop implements watch.Interface.
func (w *endWatch) Stop() {
	w.stopOnce.Do(func() { close(w.stopped) })
	w.inner.Stop()
}
