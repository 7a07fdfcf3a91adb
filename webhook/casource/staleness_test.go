package casource

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// The watched objects of the staleness tests: a Secret source, and a
// Certificate source that reads a second Secret.
var (
	secretKey      = watchKey{gvk: corev1.SchemeGroupVersion.WithKind("Secret"), namespace: "koordinator-system", name: "webhook-certs"}
	certificateKey = watchKey{gvk: cmapi.SchemeGroupVersion.WithKind("Certificate"), namespace: "team-a", name: "webhook"}
	certSecretKey  = watchKey{gvk: corev1.SchemeGroupVersion.WithKind("Secret"), namespace: "team-a", name: "webhook-tls"}
)

var errForbiddenSecret = apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "webhook-certs",
	errors.New(`the guard's Role no longer grants list and watch on it`))

// faultyWatchClient is a fake API whose list and watch calls for a name in
// its fail map fail with that name's error, and whose watch streams the test can end,
// as kube-apiserver ends them.
type faultyWatchClient struct {
	client.WithWatch

	mu      sync.Mutex
	fail    map[string]error
	refused map[string]int // failed calls, by name
	streams map[string][]*cuttableWatch
}

func newFaultyWatchClient(t *testing.T, e *env) *faultyWatchClient {
	t.Helper()
	byName := func(o client.Object) []string { return []string{o.GetName()} }
	c := fake.NewClientBuilder().WithScheme(newScheme(t)).
		WithIndex(&corev1.Secret{}, "metadata.name", byName).
		WithIndex(&cmapi.Certificate{}, "metadata.name", byName).
		WithObjects(
			secret("koordinator-system", "webhook-certs", map[string][]byte{"ca.crt": e.ca.PEM}),
			&cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "webhook"}, Spec: cmapi.CertificateSpec{SecretName: "webhook-tls"}},
			secret("team-a", "webhook-tls", map[string][]byte{"ca.crt": e.ca2.PEM}),
		).Build()
	return &faultyWatchClient{WithWatch: c, fail: map[string]error{}, refused: map[string]int{}, streams: map[string][]*cuttableWatch{}}
}

// IsWatchListSemanticsUnSupported tells client-go's reflector to list and
// then watch: the fake API cannot stream the initial list.
func (c *faultyWatchClient) IsWatchListSemanticsUnSupported() bool { return true }

func nameOf(opts []client.ListOption) string {
	var o client.ListOptions
	o.ApplyOptions(opts)
	sel, err := fields.ParseSelector(o.Raw.FieldSelector)
	if err != nil {
		return ""
	}
	name, _ := sel.RequiresExactMatch("metadata.name")
	return name
}

func (c *faultyWatchClient) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	if err := c.refuse(nameOf(opts)); err != nil {
		return err
	}
	return c.WithWatch.List(ctx, l, opts...)
}

// Watch passes the fake's events through a stream the test can end.
func (c *faultyWatchClient) Watch(ctx context.Context, l client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
	name := nameOf(opts)
	if err := c.refuse(name); err != nil {
		return nil, err
	}
	inner, err := c.WithWatch.Watch(ctx, l, opts...)
	if err != nil {
		return nil, err
	}
	out := newCuttableWatch(inner)
	c.mu.Lock()
	c.streams[name] = append(c.streams[name], out)
	c.mu.Unlock()
	return out, nil
}

// refuse returns the error calls for name fail with, and counts it.
func (c *faultyWatchClient) refuse(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.fail[name]
	if err != nil {
		c.refused[name]++
	}
	return err
}

func (c *faultyWatchClient) refusals(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused[name]
}

// cuttableWatch passes a watch through until it is stopped, by its
// consumer or by the test (then its stream ends as if the server closed it).
type cuttableWatch struct {
	inner watch.Interface
	out   chan watch.Event
	done  chan struct{}
	once  sync.Once
}

func newCuttableWatch(inner watch.Interface) *cuttableWatch {
	w := &cuttableWatch{inner: inner, out: make(chan watch.Event), done: make(chan struct{})}
	go func() {
		defer close(w.out)
		for {
			select {
			case ev, open := <-inner.ResultChan():
				if !open {
					return
				}
				select {
				case w.out <- ev:
				case <-w.done:
					return
				}
			case <-w.done:
				return
			}
		}
	}()
	return w
}

func (w *cuttableWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *cuttableWatch) Stop() {
	w.once.Do(func() { close(w.done) })
	w.inner.Stop()
}

// cut makes every list and watch of name fail with err from now on, and
// ends its open streams, as kube-apiserver does when it closes a watch that
// the guard may not open again.
func (c *faultyWatchClient) cut(name string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail[name] = err
	for _, s := range c.streams[name] {
		s.Stop()
	}
	c.streams[name] = nil
}

// newWatchingEnv is a watching Resolver over the faulty fake API, with both
// sources read once (their watches running), on a test clock.
func newWatchingEnv(t *testing.T, maxStale time.Duration) (*env, *faultyWatchClient, *clock, *WatchReader, *Resolver) {
	t.Helper()
	return newWatchingEnvSync(t, maxStale, 30*time.Second)
}

// newWatchingEnvSync is newWatchingEnv with a bound on the wait for a new
// watch's initial list.
func newWatchingEnvSync(t *testing.T, maxStale, syncTimeout time.Duration) (*env, *faultyWatchClient, *clock, *WatchReader, *Resolver) {
	t.Helper()
	e := newEnv(t)
	fc := newFaultyWatchClient(t, e)
	c := &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	w := NewWatchReader(fc, WatchOptions{Now: c.Now, SyncTimeout: syncTimeout})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = w.Start(ctx) }()
	t.Cleanup(cancel)
	r := NewWatching(w, Options{MaxStale: maxStale, Now: c.Now})
	for _, owner := range []string{"secret", "certificate"} {
		res := r.Resolve(t.Context(), e.request(owner, nil), false)
		require.NoError(t, res.Err, owner)
		require.False(t, res.Stale, owner)
	}
	return e, fc, c, w, r
}

// health returns the health of the watch of k.
func health(t *testing.T, w *WatchReader, k watchKey) *watchHealth {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	ow, ok := w.watches[k]
	require.True(t, ok, "%s is watched", k)
	return &ow.health
}

// Each source is as fresh as the watches it was read from: one failing
// watch makes only its own sources stale, then unavailable after MaxStale,
// and no other watch's success makes it fresh again.
func Test_Resolver_watchStalenessIsPerSource(t *testing.T) {
	const maxStale = time.Minute
	type outcome struct{ stale, unavailable bool }
	tests := map[string]struct {
		// act fails or heals watches and moves the clock.
		act func(t *testing.T, c *clock, w *WatchReader)
		exp map[string]outcome // by owner
	}{
		"if nothing fails, no source is stale": {
			act: func(*testing.T, *clock, *WatchReader) {},
			exp: map[string]outcome{"secret": {}, "certificate": {}, "inline": {}},
		},
		"if one source's watch fails, within MaxStale only that source is served stale": {
			act: func(t *testing.T, c *clock, w *WatchReader) {
				health(t, w, secretKey).observe(errForbiddenSecret, c.Now())
				c.Add(maxStale)
			},
			exp: map[string]outcome{"secret": {stale: true}, "certificate": {}, "inline": {}},
		},
		"if one source's watch has failed past MaxStale, only that source is unavailable": {
			act: func(t *testing.T, c *clock, w *WatchReader) {
				health(t, w, secretKey).observe(errForbiddenSecret, c.Now())
				c.Add(maxStale + time.Second)
			},
			exp: map[string]outcome{"secret": {unavailable: true}, "certificate": {}, "inline": {}},
		},
		"if another source's watches succeed meanwhile, the failing source still goes unavailable": {
			act: func(t *testing.T, c *clock, w *WatchReader) {
				health(t, w, secretKey).observe(errForbiddenSecret, c.Now())
				c.Add(maxStale / 2)
				health(t, w, certificateKey).observe(nil, c.Now())
				health(t, w, certSecretKey).observe(nil, c.Now())
				c.Add(maxStale/2 + time.Second)
			},
			exp: map[string]outcome{"secret": {unavailable: true}, "certificate": {}, "inline": {}},
		},
		"if the Secret behind a Certificate fails, the Certificate's source goes unavailable": {
			act: func(t *testing.T, c *clock, w *WatchReader) {
				health(t, w, certSecretKey).observe(errForbiddenSecret, c.Now())
				c.Add(maxStale + time.Second)
			},
			exp: map[string]outcome{"secret": {}, "certificate": {unavailable: true}, "inline": {}},
		},
		"if a failing watch succeeds again before MaxStale, its source is fresh": {
			act: func(t *testing.T, c *clock, w *WatchReader) {
				health(t, w, secretKey).observe(errWatchEnded, c.Now())
				c.Add(maxStale / 2)
				health(t, w, secretKey).observe(nil, c.Now())
				c.Add(maxStale)
			},
			exp: map[string]outcome{"secret": {}, "certificate": {}, "inline": {}},
		},
		"if a watch keeps failing, its clock runs from the first failure": {
			act: func(t *testing.T, c *clock, w *WatchReader) {
				health(t, w, secretKey).observe(errWatchEnded, c.Now())
				c.Add(maxStale / 2)
				health(t, w, secretKey).observe(errForbiddenSecret, c.Now())
				c.Add(maxStale/2 + time.Second)
			},
			exp: map[string]outcome{"secret": {unavailable: true}, "certificate": {}, "inline": {}},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			e, _, c, w, r := newWatchingEnv(t, maxStale)
			test.act(t, c, w)
			for owner, exp := range test.exp {
				res := r.Resolve(t.Context(), e.request(owner, nil), false)
				assert.Equal(t, exp.stale, res.Stale, "%s: stale", owner)
				if exp.unavailable {
					assert.Error(t, res.Err, owner)
					assert.Zero(t, res.Set.Len(), "%s: an unavailable source serves no CA", owner)
				} else {
					assert.NoError(t, res.Err, owner)
					assert.NotZero(t, res.Set.Len(), owner)
				}
			}
		})
	}
}

// The message of a source whose watch failed past MaxStale names the
// watched object, how long it has failed, the bound and the last error.
func Test_Resolver_watchStalenessMessage(t *testing.T) {
	e, _, c, w, r := newWatchingEnv(t, time.Minute)
	health(t, w, secretKey).observe(errForbiddenSecret, c.Now())
	c.Add(90 * time.Second)
	res := r.Resolve(t.Context(), e.request("secret", nil), false)
	assert.Equal(t, &SourceError{
		Source: "Secret koordinator-system/webhook-certs (key ca.crt)",
		Reason: "the watch of Secret koordinator-system/webhook-certs has failed for 1m30s (--ca-max-stale 1m0s): " + errForbiddenSecret.Error(),
	}, res.Err)
	assert.False(t, IsDefinitive(res.Err), "a stale source may recover: it is not an answer about the source")
}

// The calls of one watch count for that watch only: the guard loses the
// right to read one CA Secret (its stream ends, and listing and watching it
// again is forbidden), and only the mapping reading it goes unavailable
// after MaxStale; the other source, whose watch ends and is restarted
// meanwhile (a success between the forbidden calls), stays fresh.
func Test_WatchReader_failingCallsCountForTheirWatchOnly(t *testing.T) {
	const maxStale = time.Minute
	e, fc, c, _, r := newWatchingEnv(t, maxStale)
	fresh := func(owner string) bool {
		res := r.Resolve(t.Context(), e.request(owner, nil), false)
		return res.Err == nil && !res.Stale
	}

	fc.cut("webhook-certs", errForbiddenSecret)
	fc.cut("webhook-tls", nil)
	require.Eventually(t, func() bool { return fc.refusals("webhook-certs") > 0 && fresh("certificate") }, 30*time.Second, 10*time.Millisecond,
		"the forbidden watch is refused, the other one restarted")
	// One more refusal after the healthy restart: the failing watch is
	// still failing, whatever the other watch did.
	refused := fc.refusals("webhook-certs")
	require.Eventually(t, func() bool { return fc.refusals("webhook-certs") > refused }, 60*time.Second, 10*time.Millisecond,
		"the forbidden watch is retried")
	assert.False(t, fresh("secret"), "within MaxStale the forbidden source serves its last CA, counted stale")

	c.Add(maxStale + time.Second)
	res := r.Resolve(t.Context(), e.request("secret", nil), false)
	require.Error(t, res.Err)
	assert.True(t, strings.HasPrefix(res.Err.Error(), "cannot read the owner's CA from Secret koordinator-system/webhook-certs (key ca.crt): the watch of Secret koordinator-system/webhook-certs has failed for 1m"), res.Err.Error())
	res = r.Resolve(t.Context(), e.request("certificate", nil), false)
	assert.NoError(t, res.Err)
	assert.False(t, res.Stale)
	assert.Equal(t, []cabundle.Fingerprint{e.ca2.FP}, res.Set.Fingerprints())
}

// A watch stopped to make room (MaxWatches) delivers no change of its
// object, so an answer read from it is read again (restarting the watch)
// rather than served from the memo until some other object changes.
func Test_Resolver_watchedAnswerIsReadAgainOnceItsWatchStopped(t *testing.T) {
	e, fc, _, w, r := newWatchingEnv(t, time.Minute)
	// One bump per watch's initial list (three objects): the memo below is
	// then taken at a generation nothing else moves.
	require.Eventually(t, func() bool { return w.Generation() == 3 }, 30*time.Second, 10*time.Millisecond)
	res := r.Resolve(t.Context(), e.request("secret", nil), false)
	require.Equal(t, []cabundle.Fingerprint{e.ca.FP}, res.Set.Fingerprints())

	// Stopped as the least recently read watch is, then the Secret rotates.
	w.mu.Lock()
	w.watches[secretKey].stop()
	delete(w.watches, secretKey)
	w.mu.Unlock()
	var s corev1.Secret
	require.NoError(t, fc.Get(t.Context(), client.ObjectKey{Namespace: "koordinator-system", Name: "webhook-certs"}, &s))
	s.Data = map[string][]byte{"ca.crt": e.ca2.PEM}
	require.NoError(t, fc.Update(t.Context(), &s))

	res = r.Resolve(t.Context(), e.request("secret", nil), false)
	require.NoError(t, res.Err)
	assert.Equal(t, []cabundle.Fingerprint{e.ca2.FP}, res.Set.Fingerprints(), "the rotated CA, read through a new watch")
	assert.Equal(t, 3, w.Watched())
}

// A source the guard was never allowed to read (named by a writer's
// cert-manager.io/inject-ca-from-secret annotation) is denied at once, and
// its watch, failing on and on, makes no other source stale.
func Test_Resolver_forbiddenInjectedSourceStaysItsOwn(t *testing.T) {
	const maxStale = time.Minute
	e, fc, c, _, r := newWatchingEnvSync(t, maxStale, time.Second)
	fc.mu.Lock()
	fc.fail["not-ours"] = errForbiddenSecret
	fc.mu.Unlock()

	res := r.Resolve(t.Context(), e.request("injected", map[string]string{AnnotationInjectCAFromSecret: "kube-system/not-ours"}), false)
	require.Error(t, res.Err)
	assert.True(t, IsDefinitive(res.Err), "forbidden is an answer about the source: %v", res.Err)
	require.Eventually(t, func() bool { return fc.refusals("not-ours") > 1 }, 30*time.Second, 10*time.Millisecond, "the forbidden watch is retried")

	c.Add(maxStale + time.Second)
	for _, owner := range []string{"secret", "certificate", "inline"} {
		res := r.Resolve(t.Context(), e.request(owner, nil), false)
		assert.NoError(t, res.Err, owner)
		assert.False(t, res.Stale, owner)
	}
}

// A held answer (the observer's) is memoized for admission too, so it
// carries the watches it was read from: when one of them fails past
// MaxStale, admission's next answer for that source is unavailable.
func Test_Resolver_heldAnswerGoesStaleWithItsWatch(t *testing.T) {
	const maxStale = time.Minute
	e, _, c, w, r := newWatchingEnv(t, maxStale)
	r.mu.Lock()
	clear(r.cache)
	r.mu.Unlock()
	held := e.request("secret", nil)
	held.HeldOnly = true
	require.NoError(t, r.Resolve(t.Context(), held, false).Err)

	health(t, w, secretKey).observe(errForbiddenSecret, c.Now())
	c.Add(maxStale + time.Second)
	res := r.Resolve(t.Context(), e.request("secret", nil), false)
	require.Error(t, res.Err)
	assert.Zero(t, res.Set.Len())
}
