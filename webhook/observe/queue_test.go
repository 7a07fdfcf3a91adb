package observe

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

// blockingDecider decides with policyDecider once release is closed,
// telling entered each time a decision starts.
type blockingDecider struct {
	policyDecider
	entered chan struct{}
	release chan struct{}
}

func (b blockingDecider) Decide(ctx context.Context, in *policy.Input, _ time.Time) policy.Decision {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	return b.policyDecider.Decide(ctx, in, time.Time{})
}

func Test_Observer_queue(t *testing.T) {
	owner := testpki.MustCA(t, "owner-ca").PEM
	foreign := make([][]byte, 4)
	for i := range foreign {
		foreign[i] = testpki.MustCA(t, fmt.Sprintf("replica-%d-ca", i)).PEM
	}
	cfg := auditConfig(t, owner, "guarded", "other")
	at := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	named := func(name, rv string, bundle []byte, manager string) any {
		o := vwc(rv, bundle, manager, at)
		o.Name = name
		return o
	}

	t.Run("if a decision is slow, the event handler never waits for it, and N writes to one configuration are queued once and each decided, in order", func(t *testing.T) {
		rec := &recorded{}
		dec := blockingDecider{policyDecider: policyDecider{cfg: cfg}, entered: make(chan struct{}, 1), release: make(chan struct{})}
		o := &Observer{Config: staticConfig{cfg}, Decider: dec, Recorder: rec,
			Metrics: NewMetrics(prometheus.NewRegistry()), Log: logr.Discard(), Now: func() time.Time { return at }, MismatchGrace: -1}
		h := o.handler(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for o.processNext(t.Context()) {
			}
		}()

		// The worker is stuck deciding a write to another configuration.
		h.OnUpdate(named("other", "1", owner, "app-controller"), named("other", "2", foreign[0], "replica-0"))
		<-dec.entered
		const writes = 1001
		prev := named("guarded", "1", owner, "app-controller")
		for i := range writes {
			next := named("guarded", fmt.Sprint(i+2), foreign[i%len(foreign)], fmt.Sprintf("replica-%d", i%len(foreign)))
			// Were the handler to wait for a decision, this would never return.
			h.OnUpdate(prev, next)
			prev = next
		}
		assert.Equal(t, 1, o.queue.Len(), "one queue entry for one configuration however often it is written")
		assert.Equal(t, 1.0, testutil.ToFloat64(o.Metrics.QueueDepth))
		assert.Equal(t, float64(writes+1), testutil.ToFloat64(o.Metrics.Events.WithLabelValues("update")))

		close(dec.release)
		o.queue.ShutDown() // the worker decides what is queued, then stops
		<-done

		assert.Equal(t, float64(writes+1), testutil.ToFloat64(o.Metrics.Decided), "one decision per write")
		require.Len(t, rec.decisions, writes+1, "every foreign write is recorded, none overtaken")
		for i, d := range rec.decisions[1:] {
			assert.Equal(t, "guarded", d.Name)
			assert.Equal(t, fmt.Sprintf("fieldManager:replica-%d", i%len(foreign)), d.Subject, "write %d, in order", i)
			assert.Equal(t, policy.WriteID("", fmt.Sprint(i+1)), d.Write, "write %d is named by the state it replaced", i)
		}
		assert.Empty(t, o.pending, "nothing is kept of decided writes")
	})
	t.Run("if more writes wait for one configuration than the bound, the newest absorbs the next and the fold is counted", func(t *testing.T) {
		rec := &recorded{}
		dec := blockingDecider{policyDecider: policyDecider{cfg: cfg}, entered: make(chan struct{}, 1), release: make(chan struct{})}
		o := &Observer{Config: staticConfig{cfg}, Decider: dec, Recorder: rec,
			Metrics: NewMetrics(prometheus.NewRegistry()), Log: logr.Discard(), Now: func() time.Time { return at }, MismatchGrace: -1}
		h := o.handler(t.Context())
		prev := named("guarded", "1", owner, "app-controller")
		for i := range maxPending + 2 {
			next := named("guarded", fmt.Sprint(i+2), foreign[i%len(foreign)], fmt.Sprintf("replica-%d", i%len(foreign)))
			h.OnUpdate(prev, next)
			prev = next
		}
		assert.Len(t, o.pending[configKey{kind: policy.KindValidating, name: "guarded"}], maxPending)
		assert.Equal(t, 2.0, testutil.ToFloat64(o.Metrics.Events.WithLabelValues("merged")))
		close(dec.release)
		o.queue.ShutDown()
		for o.processNext(t.Context()) {
		}
		require.Len(t, rec.decisions, maxPending)
		assert.Equal(t, fmt.Sprintf("fieldManager:replica-%d", (maxPending+1)%len(foreign)), rec.decisions[maxPending-1].Subject,
			"the last fold holds the newest state")
	})
	t.Run("if a foreign CA and its revert arrive past the bound, the fold skips a state that changed nothing and keeps them", func(t *testing.T) {
		rec := &recorded{}
		dec := blockingDecider{policyDecider: policyDecider{cfg: cfg}, entered: make(chan struct{}, 1), release: make(chan struct{})}
		o := &Observer{Config: staticConfig{cfg}, Decider: dec, Recorder: rec,
			Metrics: NewMetrics(prometheus.NewRegistry()), Log: logr.Discard(), Now: func() time.Time { return at }, MismatchGrace: -1}
		h := o.handler(t.Context())
		prev := named("guarded", "1", owner, "app-controller")
		rv := 1
		write := func(bundle []byte, manager string) {
			rv++
			next := named("guarded", fmt.Sprint(rv), bundle, manager)
			h.OnUpdate(prev, next)
			prev = next
		}
		for range maxPending { // the owner's controller rewrites its CA: nothing to judge
			write(owner, "app-controller")
		}
		write(foreign[0], "replica-0") // a foreign CA...
		write(owner, "app-controller") // ...reverted at once
		assert.Len(t, o.pending[configKey{kind: policy.KindValidating, name: "guarded"}], maxPending)
		assert.Equal(t, 2.0, testutil.ToFloat64(o.Metrics.Events.WithLabelValues("merged")))
		assert.Equal(t, 0.0, testutil.ToFloat64(o.Metrics.Events.WithLabelValues("lost")))
		close(dec.release)
		o.queue.ShutDown()
		for o.processNext(t.Context()) {
		}
		var mismatches []string
		for _, d := range rec.decisions {
			if d.Rule == policy.RuleCAMismatch {
				mismatches = append(mismatches, d.Subject)
			}
		}
		assert.Equal(t, []string{"fieldManager:replica-0"}, mismatches, "the foreign write is recorded, once")
	})
	t.Run("if every pending state is distinct, a fold loses one and counts it", func(t *testing.T) {
		o := &Observer{Config: staticConfig{cfg}, Decider: policyDecider{cfg: cfg}, Recorder: &recorded{},
			Metrics: NewMetrics(prometheus.NewRegistry()), Log: logr.Discard(), Now: func() time.Time { return at }, MismatchGrace: -1}
		h := o.handler(t.Context())
		k := configKey{kind: policy.KindValidating, name: "guarded"}
		state := func(i int) any { return named("guarded", fmt.Sprint(i+2), []byte(fmt.Sprint("bundle-", i)), "replica") }
		p := make([]write, maxPending)
		for i := range p {
			cur, ok := objectOf(state(i))
			require.True(t, ok)
			p[i] = write{cur: &cur, at: at, key: trustKeyOf(&cur)}
		}
		o.mu.Lock()
		o.pending[k] = p
		o.mu.Unlock()
		h.OnUpdate(state(maxPending-1), state(maxPending))
		assert.Len(t, o.pending[k], maxPending)
		assert.Equal(t, 0.0, testutil.ToFloat64(o.Metrics.Events.WithLabelValues("merged")))
		assert.Equal(t, 1.0, testutil.ToFloat64(o.Metrics.Events.WithLabelValues("lost")))
	})
	t.Run("if a configuration is deleted and created again before the worker runs, the successor is a CREATE", func(t *testing.T) {
		rec := &recorded{}
		o := &Observer{Config: staticConfig{cfg}, Decider: policyDecider{cfg: cfg}, Recorder: rec,
			Metrics: NewMetrics(prometheus.NewRegistry()), Log: logr.Discard(), Now: func() time.Time { return at }, MismatchGrace: -1}
		h := o.handler(t.Context())
		first := vwc("1", owner, "app-controller", at)
		h.OnAdd(first, true)
		h.OnDelete(first)
		again := vwc("5", foreign[0], "replica-0", at)
		again.UID = "another"
		h.OnAdd(again, false)
		for o.queue.Len() > 0 {
			o.processNext(t.Context())
		}
		require.Len(t, rec.decisions, 1)
		assert.Equal(t, policy.OperationCreate, rec.decisions[0].Operation)
		assert.Equal(t, policy.WriteID("another", ""), rec.decisions[0].Write, "a creation is named as admission names it")
	})
	t.Run("if writes queue up, each is judged against the state it replaced and named as admission named it (uid and that resourceVersion)", func(t *testing.T) {
		rec := &recorded{}
		o := &Observer{Config: staticConfig{cfg}, Decider: policyDecider{cfg: cfg}, Recorder: rec,
			Metrics: NewMetrics(prometheus.NewRegistry()), Log: logr.Discard(), Now: func() time.Time { return at }, MismatchGrace: -1}
		h := o.handler(t.Context())
		withUID := func(rv string, bundle []byte) any {
			obj := vwc(rv, bundle, "replica-0", at)
			obj.UID = "u1"
			return obj
		}
		h.OnAdd(withUID("10", owner), true)
		h.OnUpdate(withUID("10", owner), withUID("11", foreign[0]))
		h.OnUpdate(withUID("11", foreign[0]), withUID("12", foreign[1]))
		for o.queue.Len() > 0 {
			o.processNext(t.Context())
		}
		require.Len(t, rec.decisions, 2)
		assert.Equal(t, policy.WriteID("u1", "10"), rec.decisions[0].Write)
		assert.Equal(t, policy.WriteID("u1", "11"), rec.decisions[1].Write)
	})
}

// fakeResolver records requests and answers res.
type fakeResolver struct {
	reqs  []casource.Request
	lives []bool
	res   casource.Result
}

func (f *fakeResolver) Resolve(_ context.Context, req casource.Request, live bool) casource.Result {
	f.reqs, f.lives = append(f.reqs, req), append(f.lives, live)
	return f.res
}

func Test_CADecider(t *testing.T) {
	owner := testpki.MustCA(t, "owner-ca").PEM
	foreign := testpki.MustCA(t, "foreign-ca").PEM
	cfg, err := policy.Load([]byte(`apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
defaultMode: audit
owners:
- name: declared
  match: {validating: [declared]}
  writers: {serviceAccounts: [app/controller]}
  ca: {secret: {namespace: app, name: ca}}
- name: injected
  match: {validating: [injected]}
  writers: {serviceAccounts: [cert-manager/cainjector]}
  ca: {injectedByCertManager: {}}
`))
	require.NoError(t, err)
	ownerSet, err := cabundle.NewCASet("Secret app/ca", owner)
	require.NoError(t, err)
	input := func(name string) *policy.Input {
		return &policy.Input{Operation: policy.OperationUpdate, Kind: policy.KindValidating, Name: name, Observed: true,
			Annotations: map[string]string{casource.AnnotationInjectCAFrom: "attacker/bogus-" + name},
			OldEntries:  []policy.Entry{{Name: "w", CABundle: owner}},
			Entries:     []policy.Entry{{Name: "w", CABundle: foreign}}}
	}

	t.Run("if a foreign CA is observed on a declared source, decide ca-mismatch from one cached resolve: no live re-read, no grace wait", func(t *testing.T) {
		r := &fakeResolver{res: casource.Result{CAResult: policy.CAResult{Resolved: true, Set: ownerSet}, Watched: true}}
		d := (&CADecider{Config: staticConfig{cfg}, CA: r}).Decide(t.Context(), input("declared"), time.Now())
		assert.Equal(t, policy.RuleCAMismatch, d.Rule)
		assert.Equal(t, []bool{false}, r.lives)
		assert.False(t, r.reqs[0].HeldOnly, "a declared source is resolved as admission resolves it")
	})
	t.Run("if the source is named by the object's inject annotation, resolve it only if held, else decide ca-unavailable at once", func(t *testing.T) {
		r := &fakeResolver{res: casource.Result{CAResult: policy.CAResult{Resolved: true,
			Err: &casource.SourceError{Source: "annotation", Reason: "not held", NotHeld: true}}}}
		d := (&CADecider{Config: staticConfig{cfg}, CA: r}).Decide(t.Context(), input("injected"), time.Now())
		assert.Equal(t, policy.RuleCAUnavailable, d.Rule)
		assert.True(t, d.Record)
		require.Len(t, r.reqs, 1)
		assert.True(t, r.reqs[0].HeldOnly)
		assert.Equal(t, []bool{false}, r.lives)
	})
	t.Run("if warming an existing injected configuration, resolve its annotation's source (it may start a watch); declared sources are not warmed here", func(t *testing.T) {
		r := &fakeResolver{}
		dec := &CADecider{Config: staticConfig{cfg}, CA: r}
		dec.Warm(t.Context(), policy.KindValidating, "injected", nil, map[string]string{casource.AnnotationInjectCAFrom: "cert-manager/serving"})
		dec.Warm(t.Context(), policy.KindValidating, "declared", nil, nil)
		require.Len(t, r.reqs, 1)
		assert.False(t, r.reqs[0].HeldOnly)
	})
}

// startingDecider defers the first decision of a change whose annotation
// may start a read, as CADecider does for a source not yet held.
type startingDecider struct {
	policyDecider
	mayStart []bool
	deferred int
}

func (s *startingDecider) DecideObserved(ctx context.Context, in *policy.Input, _ time.Time, mayStart bool) (policy.Decision, bool) {
	s.mayStart = append(s.mayStart, mayStart)
	if mayStart && s.deferred == 0 {
		s.deferred++
		return policy.Decision{}, false
	}
	return s.Decide(ctx, in, time.Time{}), true
}

func Test_Observer_waitsForASourceOffTheWorker(t *testing.T) {
	owner := testpki.MustCA(t, "owner-ca").PEM
	foreign := testpki.MustCA(t, "foreign-ca").PEM
	cfg := auditConfig(t, owner, "guarded")
	at := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	annotated := func(rv, annotation string, bundle []byte) any {
		o := vwc(rv, bundle, "cainjector", at)
		o.Annotations[casource.AnnotationInjectCAFrom] = annotation
		return o
	}
	setup := func() (*Observer, *recorded, *startingDecider) {
		rec := &recorded{}
		dec := &startingDecider{policyDecider: policyDecider{cfg: cfg}}
		o := &Observer{Config: staticConfig{cfg}, Decider: dec, Recorder: rec,
			Metrics: NewMetrics(prometheus.NewRegistry()), Log: logr.Discard(), Now: func() time.Time { return at }, MismatchGrace: -1}
		return o, rec, dec
	}

	t.Run("if the annotation was there before the change, the decider may start reading its source; the change waits on the queue, not in the worker, and is decided once", func(t *testing.T) {
		o, rec, dec := setup()
		h := o.handler(t.Context())
		h.OnUpdate(annotated("1", "app/serving", owner), annotated("2", "app/serving", foreign))
		o.processNext(t.Context())
		assert.Empty(t, rec.decisions, "deferred, not decided")
		assert.Equal(t, 0, o.queue.Len(), "put back after a delay, not at once")
		o.processNext(t.Context()) // returns once the delay has passed
		require.Len(t, rec.decisions, 1)
		assert.Equal(t, policy.WriteID("", "1"), rec.decisions[0].Write)
		assert.Equal(t, []bool{true, true}, dec.mayStart)
		assert.Empty(t, o.retries)
	})
	t.Run("if the change rewrites the annotation, nothing may start reading: it is decided at once on what is held", func(t *testing.T) {
		o, rec, dec := setup()
		h := o.handler(t.Context())
		h.OnUpdate(annotated("1", "app/serving", owner), annotated("2", "attacker/bogus", foreign))
		o.processNext(t.Context())
		require.Len(t, rec.decisions, 1)
		assert.Equal(t, []bool{false}, dec.mayStart)
	})
}

// gatedResolver answers NotHeld to HeldOnly requests and hands every other
// request to started.
type gatedResolver struct {
	started chan casource.Request
}

func (g gatedResolver) Resolve(_ context.Context, req casource.Request, _ bool) casource.Result {
	if req.HeldOnly {
		return casource.Result{CAResult: policy.CAResult{Resolved: true, Err: &casource.SourceError{Source: "s", Reason: "not held", NotHeld: true}}}
	}
	g.started <- req
	return casource.Result{}
}

func Test_CADecider_DecideObserved(t *testing.T) {
	owner := testpki.MustCA(t, "owner-ca").PEM
	foreign := testpki.MustCA(t, "foreign-ca").PEM
	cfg, err := policy.Load([]byte(`apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
defaultMode: audit
owners:
- name: injected
  match: {validating: [injected]}
  writers: {serviceAccounts: [cert-manager/cainjector]}
  ca: {injectedByCertManager: {}}
`))
	require.NoError(t, err)
	in := func() *policy.Input {
		return &policy.Input{Operation: policy.OperationUpdate, Kind: policy.KindValidating, Name: "injected", Observed: true,
			Annotations: map[string]string{casource.AnnotationInjectCAFrom: "app/serving"},
			OldEntries:  []policy.Entry{{Name: "w", CABundle: owner}}, Entries: []policy.Entry{{Name: "w", CABundle: foreign}}}
	}
	t.Run("if the source is not held and may be started, start reading it in the background, once per interval, and decide nothing", func(t *testing.T) {
		r := gatedResolver{started: make(chan casource.Request, 4)}
		d := &CADecider{Config: staticConfig{cfg}, CA: r, StartInterval: time.Hour}
		_, decided := d.DecideObserved(t.Context(), in(), time.Now(), true)
		assert.False(t, decided)
		req := <-r.started
		assert.False(t, req.HeldOnly, "the background read may start a watch")

		_, decided = d.DecideObserved(t.Context(), in(), time.Now(), true)
		assert.False(t, decided, "another configuration naming the source being read waits for it too")
		other := in()
		other.Annotations[casource.AnnotationInjectCAFrom] = "attacker/other"
		dec, decided := d.DecideObserved(t.Context(), other, time.Now(), true)
		assert.True(t, decided, "a second new source within the interval is decided on what is held")
		assert.Equal(t, policy.RuleCAUnavailable, dec.Rule)
		assert.Empty(t, r.started, "one read started")
	})
	t.Run("if nothing may be started, decide at once on what is held", func(t *testing.T) {
		r := gatedResolver{started: make(chan casource.Request, 4)}
		d := &CADecider{Config: staticConfig{cfg}, CA: r}
		dec, decided := d.DecideObserved(t.Context(), in(), time.Now(), false)
		assert.True(t, decided)
		assert.Equal(t, policy.RuleCAUnavailable, dec.Rule)
		assert.Empty(t, r.started)
	})
}

// rotatingDecider decides with cfgs[i] on its i-th call (the last one after
// that): a CA source whose watch delivers a rotation between two calls.
type rotatingDecider struct {
	cfgs  []*policy.Mappings
	calls int
}

func (r *rotatingDecider) Decide(_ context.Context, in *policy.Input, _ time.Time) policy.Decision {
	cfg := r.cfgs[min(r.calls, len(r.cfgs)-1)]
	r.calls++
	return cfg.Decide(in)
}

func Test_Observer_mismatchGrace(t *testing.T) {
	oldCA, nextCA := testpki.MustCA(t, "owner-ca-old").PEM, testpki.MustCA(t, "owner-ca-new").PEM
	before, after := auditConfig(t, oldCA, "guarded"), auditConfig(t, nextCA, "guarded")
	at := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	run := func(dec Decider) (*Observer, *recorded) {
		rec := &recorded{}
		o := &Observer{Config: staticConfig{before}, Decider: dec, Recorder: rec, MismatchGrace: time.Millisecond,
			Metrics: NewMetrics(prometheus.NewRegistry()), Log: logr.Discard(), Now: func() time.Time { return at }}
		h := o.handler(t.Context())
		h.OnUpdate(vwc("1", oldCA, "app-controller", at), vwc("2", nextCA, "app-controller", at))
		o.processNext(t.Context())
		assert.Empty(t, rec.decisions, "a ca-mismatch waits on the queue before it stands")
		o.processNext(t.Context()) // returns once the grace has passed
		return o, rec
	}
	t.Run("if the CA watch delivers the rotation within the grace, nothing is recorded", func(t *testing.T) {
		_, rec := run(&rotatingDecider{cfgs: []*policy.Mappings{before, after}})
		assert.Empty(t, rec.decisions)
	})
	t.Run("if the mismatch still stands after the grace, it is recorded once", func(t *testing.T) {
		o, rec := run(&rotatingDecider{cfgs: []*policy.Mappings{before}})
		require.Len(t, rec.decisions, 1)
		assert.Equal(t, policy.RuleCAMismatch, rec.decisions[0].Rule)
		assert.Equal(t, 1.0, testutil.ToFloat64(o.Metrics.Decided))
	})
	t.Run("if a foreign CA is reverted while its mismatch waits out the grace, the foreign write is recorded once and the revert is not", func(t *testing.T) {
		rec := &recorded{}
		o := &Observer{Config: staticConfig{before}, Decider: policyDecider{cfg: before}, Recorder: rec, MismatchGrace: 20 * time.Millisecond,
			Metrics: NewMetrics(prometheus.NewRegistry()), Log: logr.Discard(), Now: func() time.Time { return at }}
		h := o.handler(t.Context())
		foreign := testpki.MustCA(t, "foreign-ca").PEM
		s1, s2, s3 := vwc("1", oldCA, "cainjector", at), vwc("2", foreign, "app-controller", at), vwc("3", oldCA, "cainjector", at)
		h.OnUpdate(s1, s2)
		o.processNext(t.Context())
		assert.Empty(t, rec.decisions, "the mismatch waits out the grace")
		h.OnUpdate(s2, s3) // the owner's writer puts its CA back within the grace
		// Woken by the revert and by the end of the grace (once or twice,
		// as the two coincide); a queue that loses the write stops here.
		stop := time.AfterFunc(10*time.Second, o.queue.ShutDown)
		defer stop.Stop()
		for testutil.ToFloat64(o.Metrics.Decided) < 2 && o.processNext(t.Context()) {
		}
		require.Len(t, rec.decisions, 1)
		assert.Equal(t, policy.RuleCAMismatch, rec.decisions[0].Rule)
		assert.Equal(t, "fieldManager:app-controller", rec.decisions[0].Subject)
		assert.Equal(t, policy.WriteID("", "1"), rec.decisions[0].Write)
		assert.Equal(t, 2.0, testutil.ToFloat64(o.Metrics.Decided))
	})
}

func Test_Observer_queuedMergedRotations(t *testing.T) {
	cas := [][]byte{testpki.MustCA(t, "ca-0").PEM, testpki.MustCA(t, "ca-1").PEM, testpki.MustCA(t, "ca-2").PEM}
	// The owner's source holds ca-1 and ca-2 (an overlap), ca-0 is retired.
	cfg := auditConfig(t, bytes.Join(cas[1:], nil), "guarded")
	at := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	bundle := func(n int) []byte { return bytes.Join(cas[:n], nil) }
	rec := &recorded{}
	o := &Observer{Config: staticConfig{cfg}, Decider: policyDecider{cfg: cfg}, Recorder: rec, MismatchGrace: -1,
		Metrics: NewMetrics(prometheus.NewRegistry()), Log: logr.Discard(), Now: func() time.Time { return at }}
	h := o.handler(t.Context())
	// A merging writer (cainjector) keeps the old CAs beside the new one;
	// two rotations land before the worker runs.
	s0, s1, s2 := vwc("1", bundle(1), "cainjector", at), vwc("2", bundle(2), "cainjector", at), vwc("3", bundle(3), "cainjector", at)
	h.OnAdd(s0, true)
	h.OnUpdate(s0, s1)
	h.OnUpdate(s1, s2)
	for o.queue.Len() > 0 {
		o.processNext(t.Context())
	}
	assert.Empty(t, rec.decisions, "each write kept what its predecessor held and added the owner's: no CA is foreign")
	assert.Equal(t, 2.0, testutil.ToFloat64(o.Metrics.Decided))
}
