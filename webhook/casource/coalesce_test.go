package casource

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// gatedReader blocks every GET until released, so a test can pile requests
// onto one read in flight.
type gatedReader struct {
	*countingReader
	gate chan struct{}
}

func (g *gatedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	<-g.gate
	return g.countingReader.Get(ctx, key, obj, opts...)
}

// Test_Resolver_coalescesLiveReads: a storm of denials, each asking for a
// live re-read, costs a bounded number of GETs, not one per request.
func Test_Resolver_coalescesLiveReads(t *testing.T) {
	e := newEnv(t)
	g := &gatedReader{countingReader: e.reader, gate: make(chan struct{})}
	r := New(g, Options{})
	req := e.request("secret", nil)

	const storm = 64
	var wg sync.WaitGroup
	results := make([]Result, storm)
	for i := range storm {
		wg.Go(func() {
			results[i] = r.Resolve(t.Context(), req, true)
		})
	}
	time.Sleep(50 * time.Millisecond) // let the storm pile up behind the first read
	close(g.gate)
	wg.Wait()

	for i, res := range results {
		require.NoError(t, res.Err, "request %d", i)
		assert.True(t, res.Set.Contains(e.ca.FP), "request %d", i)
	}
	// The first read, and at most one more for requests that arrived while
	// it was in flight.
	assert.LessOrEqual(t, e.reader.count(), 2)
}

// Test_Resolver_liveReadSeesChangeBeforeArrival: a request that arrives
// after the source changed never takes a read that began before it arrived.
func Test_Resolver_liveReadSeesChangeBeforeArrival(t *testing.T) {
	e := newEnv(t)
	r := New(e.reader, Options{})
	req := e.request("secret", nil)

	first := r.Resolve(t.Context(), req, true)
	require.NoError(t, first.Err)
	require.True(t, first.Set.Contains(e.ca.FP))

	s := secret("koordinator-system", "webhook-certs", nil)
	require.NoError(t, e.client.Get(t.Context(), client.ObjectKeyFromObject(s), s))
	s.Data["ca.crt"] = e.ca2.PEM
	require.NoError(t, e.client.Update(t.Context(), s))

	second := r.Resolve(t.Context(), req, true)
	require.NoError(t, second.Err)
	assert.True(t, second.Set.Contains(e.ca2.FP), "the rotated CA must be seen")
	assert.Equal(t, 2, e.reader.count())
}
