package casource

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// historyEnv is a watching resolver over the fake API of
// newFaultyWatchClient (e.client writes to it) on a test clock, its
// "secret" (CA e.ca) and "certificate" (CA e.ca2) sources watched.
func historyEnv(t *testing.T, window time.Duration) (*env, *clock, *WatchReader, *Resolver) {
	t.Helper()
	e := newEnv(t)
	fc := newFaultyWatchClient(t, e)
	e.client = fc
	c := &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	w := NewWatchReader(fc, WatchOptions{Now: c.Now, HistoryWindow: window})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = w.Start(ctx) }()
	t.Cleanup(cancel)
	r := NewWatching(w, Options{Now: c.Now})
	for _, owner := range []string{"secret", "certificate"} {
		require.NoError(t, r.Resolve(t.Context(), e.request(owner, nil), false).Err, owner)
	}
	return e, c, w, r
}

// setSecretCA writes ca into ca.crt of namespace/name and waits for the
// watch to deliver it.
func setSecretCA(t *testing.T, e *env, w *WatchReader, namespace, name string, ca []byte) {
	t.Helper()
	var s corev1.Secret
	require.NoError(t, e.client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, &s))
	replacedRV := s.ResourceVersion
	s.Data["ca.crt"] = ca
	require.NoError(t, e.client.Update(t.Context(), &s))
	// Wait until the handler has kept the replaced version: the store is
	// updated before the handlers run, and the generation also moves for a
	// relist of the fake API's short watches. Only then may the test move
	// its clock.
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, v := range w.history[secretWatch(namespace, name)] {
			if m, err := meta.Accessor(v.obj); err == nil && m.GetName() == name && m.GetResourceVersion() == replacedRV {
				return true
			}
		}
		return false
	}, 10*time.Second, time.Millisecond, "the watch delivers the update")
}

func fingerprints(t *testing.T, pems ...[]byte) []cabundle.Fingerprint {
	t.Helper()
	var out cabundle.CASet
	for _, p := range pems {
		s, err := cabundle.NewCASet("test", p)
		require.NoError(t, err)
		out = out.Union(s)
	}
	return out.Fingerprints()
}

// Test_Resolver_since: a request with Since is answered with every CA the
// source held from Since on (through a Certificate and its Secret too);
// versions replaced before Since, or older than the history window, add
// nothing; a request without Since gets the CA held now.
func Test_Resolver_since(t *testing.T) {
	// rotation: after advancing the clock by after, the Secret
	// namespace/name (secret: koordinator-system/webhook-certs,
	// certificate: team-a/webhook-tls) gets the CA of the env's named CA.
	type rotation struct {
		after time.Duration
		ca    string
	}
	tests := map[string]struct {
		owner     string
		rotations []rotation
		// since is the number of rotations made before Since is taken.
		since int
		want  []string
	}{
		"if the Secret rotated twice after Since, answer all three CAs": {
			owner: "secret", rotations: []rotation{{time.Second, "ca2"}, {time.Second, "other"}}, since: 0,
			want: []string{"ca", "ca2", "other"},
		},
		"if Since falls between the rotations, answer the CA held at Since and the CA now": {
			owner: "secret", rotations: []rotation{{time.Second, "ca2"}, {time.Second, "other"}}, since: 1,
			want: []string{"ca2", "other"},
		},
		"if the Certificate's Secret rotated, answer both CAs of the Certificate": {
			owner: "certificate", rotations: []rotation{{time.Second, "ca"}}, since: 0,
			want: []string{"ca2", "ca"},
		},
		"if the replaced version is older than the window, answer without it": {
			owner: "secret", rotations: []rotation{{time.Second, "ca2"}, {11 * time.Second, "other"}}, since: 0,
			want: []string{"ca2", "other"},
		},
		"if nothing rotated, answer the CA now": {
			owner: "secret", since: 0, want: []string{"ca"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e, c, w, r := historyEnv(t, 10*time.Second)
			cas := map[string][]byte{"ca": e.ca.PEM, "ca2": e.ca2.PEM, "other": e.other.PEM}
			secret := map[string][2]string{"secret": {"koordinator-system", "webhook-certs"}, "certificate": {"team-a", "webhook-tls"}}[tc.owner]
			req := e.request(tc.owner, nil)
			for i, rot := range tc.rotations {
				if i == tc.since {
					req.Since = c.Now()
				}
				c.Add(rot.after)
				setSecretCA(t, e, w, secret[0], secret[1], cas[rot.ca])
			}
			if req.Since.IsZero() {
				req.Since = c.Now()
			}
			var want [][]byte
			for _, n := range tc.want {
				want = append(want, cas[n])
			}
			now := r.Resolve(t.Context(), e.request(tc.owner, nil), false)
			require.NoError(t, now.Err)
			assert.Equal(t, fingerprints(t, want[len(want)-1]), now.Set.Fingerprints(), "without Since: the CA now")
			res := r.Resolve(t.Context(), req, false)
			require.NoError(t, res.Err)
			assert.ElementsMatch(t, fingerprints(t, want...), res.Set.Fingerprints())
		})
	}
}

// secretWatch is the watch of the Secret namespace/name.
func secretWatch(namespace, name string) watchKey {
	return watchKey{gvk: corev1.SchemeGroupVersion.WithKind("Secret"), namespace: namespace, name: name}
}

// Test_WatchReader_historyIsBounded: however fast a source rotates, the
// history keeps at most maxHistory versions of it, the newest, and none of
// an object no longer watched.
func Test_WatchReader_historyIsBounded(t *testing.T) {
	e, c, w, _ := historyEnv(t, time.Hour)
	k := secretKey
	for i := range maxHistory + 10 {
		c.Add(time.Millisecond)
		ca := e.ca.PEM
		if i%2 == 0 {
			ca = e.ca2.PEM
		}
		setSecretCA(t, e, w, k.namespace, k.name, ca)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Len(t, w.history[k], maxHistory)
	assert.Equal(t, c.Now(), w.history[k][maxHistory-1].at, "the newest version is kept")
	for key, h := range w.history {
		assert.LessOrEqual(t, len(h), maxHistory, "%s", key)
		assert.Contains(t, w.watches, key, "a history is kept only for a watched object")
	}
}

// Test_WatchReader_historyIsPerSource: a storm of updates of one source
// evicts none of another source's replaced versions: a write under the
// other source's CA before its rotation is still judged against that CA.
func Test_WatchReader_historyIsPerSource(t *testing.T) {
	e, c, w, r := historyEnv(t, 10*time.Second)
	req := e.request("certificate", nil)
	req.Since = c.Now()
	c.Add(time.Second)
	setSecretCA(t, e, w, "team-a", "webhook-tls", e.ca.PEM) // the Certificate's Secret rotates from ca2 to ca
	for i := range maxHistory + 10 {
		ca := e.ca.PEM
		if i%2 == 0 {
			ca = e.other.PEM
		}
		setSecretCA(t, e, w, "koordinator-system", "webhook-certs", ca)
	}
	res := r.Resolve(t.Context(), req, false)
	require.NoError(t, res.Err)
	assert.ElementsMatch(t, fingerprints(t, e.ca2.PEM, e.ca.PEM), res.Set.Fingerprints(),
		"the Certificate's CA before its rotation is still in its history")
}
