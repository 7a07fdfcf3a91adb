package casource

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// Test_endWatch: events pass through unchanged, and the end of the stream
// is reported only when the stream ended on its own.
func Test_endWatch(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ca"}}
	expired := apierrors.NewResourceExpired("too old resource version")
	// A 410 Gone status as older API servers sent it (apierrors.NewGone is deprecated).
	gone := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonGone}
	tests := map[string]struct {
		// end ends the watch the way the case says, given the fake stream,
		// the wrapper and the wrapper's context's cancel.
		end   func(inner *watch.FakeWatcher, w watch.Interface, cancel context.CancelFunc)
		ended bool
	}{
		"if the API server closes the stream, report the end": {
			end:   func(inner *watch.FakeWatcher, _ watch.Interface, _ context.CancelFunc) { inner.Stop() },
			ended: true,
		},
		"if the stream ends after an error that is no expiry, report the end": {
			end: func(inner *watch.FakeWatcher, w watch.Interface, _ context.CancelFunc) {
				go inner.Error(&apierrors.NewInternalError(assert.AnError).ErrStatus)
				<-w.ResultChan()
				inner.Stop()
			},
			ended: true,
		},
		"if the consumer stops the watch, report nothing": {
			end: func(_ *watch.FakeWatcher, w watch.Interface, _ context.CancelFunc) { w.Stop() },
		},
		"if the context ends, report nothing": {
			end: func(inner *watch.FakeWatcher, _ watch.Interface, cancel context.CancelFunc) { cancel(); inner.Stop() },
		},
		"if the resourceVersion expired, report nothing: the reflector lists again": {
			end: func(inner *watch.FakeWatcher, w watch.Interface, _ context.CancelFunc) {
				go inner.Error(&expired.ErrStatus)
				<-w.ResultChan()
				inner.Stop()
			},
		},
		"if the resource is gone, report nothing: the reflector lists again": {
			end: func(inner *watch.FakeWatcher, w watch.Interface, _ context.CancelFunc) {
				go inner.Error(gone)
				<-w.ResultChan()
				inner.Stop()
			},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			inner := watch.NewFake()
			var ends atomic.Int32
			w := newEndWatch(ctx, inner, func() { ends.Add(1) })

			go inner.Add(secret)
			ev := <-w.ResultChan()
			assert.Equal(t, watch.Added, ev.Type)
			assert.Same(t, secret, ev.Object, "events pass through unchanged")

			test.end(inner, w, cancel)
			select {
			case _, open := <-w.ResultChan():
				require.False(t, open, "the stream is closed once the watch ended")
			case <-time.After(10 * time.Second):
				t.Fatal("the stream was not closed after the watch ended")
			}
			if test.ended {
				assert.Equal(t, int32(1), ends.Load())
			} else {
				assert.Zero(t, ends.Load())
			}
		})
	}
}
