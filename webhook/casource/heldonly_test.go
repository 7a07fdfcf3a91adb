package casource

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// Test_Resolve_HeldOnly: a HeldOnly request never reads, starts a watch or
// waits; it answers from what the resolver holds or says the source is not
// held.
func Test_Resolve_HeldOnly(t *testing.T) {
	annotation := map[string]string{AnnotationInjectCAFromSecret: "koordinator-system/webhook-certs"}

	t.Run("if a reading resolver has not read the source, answer NotHeld without a read", func(t *testing.T) {
		e := newEnv(t)
		r := New(e.reader, Options{})
		req := e.request("injected", annotation)
		req.HeldOnly = true
		res := r.Resolve(t.Context(), req, false)
		require.Error(t, res.Err)
		assert.True(t, IsNotHeld(res.Err), "%v", res.Err)
		assert.False(t, IsDefinitive(res.Err))
		assert.Equal(t, 0, e.reader.gets)
	})
	t.Run("if a reading resolver has read the source, answer from its cache without a read", func(t *testing.T) {
		e := newEnv(t)
		r := New(e.reader, Options{})
		req := e.request("injected", annotation)
		require.NoError(t, r.Resolve(t.Context(), req, false).Err)
		gets := e.reader.gets
		req.HeldOnly = true
		res := r.Resolve(t.Context(), req, false)
		require.NoError(t, res.Err)
		assert.True(t, res.Cached)
		assert.Equal(t, gets, e.reader.gets)
	})
	t.Run("if a watching resolver does not watch the source, answer NotHeld and start no watch", func(t *testing.T) {
		e := newEnv(t)
		w := NewWatchReader(e.client.(client.WithWatch), WatchOptions{})
		r := NewWatching(w, Options{})
		req := e.request("injected", annotation)
		req.HeldOnly = true
		for _, live := range []bool{false, true} {
			res := r.Resolve(t.Context(), req, live)
			assert.True(t, IsNotHeld(res.Err), "%v", res.Err)
		}
		assert.Equal(t, 0, w.Watched())
	})
}

var _ client.WithWatch = fake.NewClientBuilder().Build()
