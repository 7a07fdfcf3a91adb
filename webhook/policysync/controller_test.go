package policysync

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func Test_Syncer_Reconcile(t *testing.T) {
	t.Run("if a pass succeeds, count it and ask for the next one after the interval", func(t *testing.T) {
		e := newEnv(t, testConfig)
		e.syncer.Interval = 3 * time.Second
		got, err := e.syncer.Reconcile(t.Context(), passRequest)
		require.NoError(t, err)
		assert.Equal(t, reconcile.Result{RequeueAfter: 3 * time.Second}, got)
		assert.Equal(t, 1.0, e.syncs("success"))
		assert.Equal(t, 0.0, e.syncs("error"))
	})
	t.Run("if a pass fails, count it and retry at the same cadence, not with backoff", func(t *testing.T) {
		e := newEnv(t, testConfig)
		e.syncer.Anchor = "missing"
		got, err := e.syncer.Reconcile(t.Context(), passRequest)
		require.NoError(t, err, "an error would make controller-runtime retry with its own backoff")
		assert.Equal(t, reconcile.Result{RequeueAfter: DefaultInterval}, got)
		assert.Equal(t, 1.0, e.syncs("error"))
	})
}

// changes is a SourceChanges whose generation the test moves.
type changes struct {
	mu  sync.Mutex
	gen uint64
	ch  chan struct{}
}

func (c *changes) Generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

func (c *changes) WaitForChange(ctx context.Context, gen uint64, timeout time.Duration) bool {
	if c.Generation() != gen {
		return true
	}
	select {
	case <-c.ch:
		return true
	case <-ctx.Done():
	case <-time.After(timeout):
	}
	return false
}

func (c *changes) bump() {
	c.mu.Lock()
	c.gen++
	c.mu.Unlock()
	c.ch <- struct{}{}
}

func Test_Syncer_triggers(t *testing.T) {
	e := newEnv(t, testConfig)
	src := &changes{ch: make(chan struct{})}
	e.syncer.Changes = src
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(q.ShutDown)
	require.NoError(t, e.syncer.triggers(t.Context(), q))
	next := func() reconcile.Request {
		r, shutdown := q.Get()
		require.False(t, shutdown)
		q.Done(r)
		return r
	}
	assert.Equal(t, passRequest, next(), "a pass at start")
	e.syncer.Trigger()
	assert.Equal(t, passRequest, next(), "a pass at a configuration reload")
	src.bump()
	assert.Equal(t, passRequest, next(), "a pass at a change of a CA source")
}

func (e *env) syncs(result string) float64 {
	return testutil.ToFloat64(e.metrics.Syncs.WithLabelValues(result))
}
