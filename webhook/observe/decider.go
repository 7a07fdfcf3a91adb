package observe

import (
	"context"
	"sync"
	"time"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

// CAResolver resolves an owner's CA; casource.Resolver is the real one.
type CAResolver interface {
	Resolve(ctx context.Context, req casource.Request, live bool) casource.Result
}

// CADecider is the observer's Decider: admission's decision (the same
// policy code, the same CA resolver) without anything that waits.
//
// Admission re-reads the owner's CA before a ca-mismatch stands, waiting up
// to a second for its watches to deliver a CA written just before the
// request; the observer does not: a change it sees has happened already,
// and a writer storming distinct foreign CAs would hold it a second per CA,
// one event at a time, while the watch's notifications pile up in memory.
//
// A mapping's declared source (a Secret, a Certificate, an Issuer, ...) is
// resolved as admission resolves it: one source per mapping, so the first
// read of each is bounded by the configuration. The source of an
// injectedByCertManager mapping is named by the observed object itself (its
// inject annotation), so a writer can name a new one per write; the
// observer resolves it only from what the guard already holds (HeldOnly: a
// running watch, a cached read) and otherwise decides ca-unavailable at
// once. The sources that matter are held: admission resolves the stored
// object's annotation on every writer's request (static shape), and Warm
// resolves those of the configurations that existed when the observer
// started. In the policy shape nothing else reads a configuration created
// later, so one more case may start reading: an annotation the object
// already carried before the change being judged (a writer that changes
// the annotation and the caBundle in one write never gets that), at most one
// new source per StartInterval, read in the background while the change
// waits on the queue (DecideObserved). An annotation pointing somewhere no
// request and no existing configuration pointed is itself worth a finding.
type CADecider struct {
	Config ConfigSource
	CA     CAResolver
	// Fingerprints memoizes caBundle parsing (admission's cache); nil
	// parses every bundle.
	Fingerprints *cabundle.FingerprintCache
	// StartInterval is the least time between two sources started in the
	// background; DefaultStartInterval when zero.
	StartInterval time.Duration
	// Lookback is how long before the watch delivered a write the owner's
	// CA may have been another and still count (DefaultLookback when zero):
	// the writer read its CA before it wrote, and both it and the guard
	// see a rotation of the source late.
	Lookback time.Duration

	mu        sync.Mutex
	lastStart time.Time
	lastKey   string
	reading   chan casource.Request
}

// DefaultStartInterval bounds how often an observed object's annotation
// may make the guard start reading a new CA source.
const DefaultStartInterval = time.Second

// DefaultLookback covers the observer's own delay in seeing a write and a
// writer's delay in seeing a rotation (both watches, each well under a
// second in practice), with room for a loaded machine. It is shorter than
// the CA source's history (casource.DefaultHistoryWindow) by more than the
// mismatch grace, so the CAs it asks for are still held when the grace
// ends.
const DefaultLookback = 5 * time.Second

// Decide implements Decider: it never starts reading a source.
func (d *CADecider) Decide(ctx context.Context, in *policy.Input, written time.Time) policy.Decision {
	dec, _ := d.DecideObserved(ctx, in, written, false)
	return dec
}

// DecideObserved decides like Decide: the owner's CA is every CA its source
// held from Lookback before written (when the watch delivered the write)
// until now, so a write made under a CA that rotated again before the
// observer got to it is judged against the CA its writer read. When the
// inject annotation's source is not held and mayStart is set, it instead
// starts reading the source in the background (unless one was started less
// than StartInterval ago) and returns false: the caller decides again
// later, without having waited.
func (d *CADecider) DecideObserved(ctx context.Context, in *policy.Input, written time.Time, mayStart bool) (policy.Decision, bool) {
	if in.Fingerprints == nil {
		in.Fingerprints = d.Fingerprints
	}
	lookup := &observedLookup{ctx: ctx, d: d, since: written.Add(-d.lookback()), mayStart: mayStart}
	dec := d.Config.Current().Evaluate(in, policy.Env{CA: lookup})
	if lookup.started {
		return policy.Decision{}, false
	}
	return dec, true
}

func (d *CADecider) lookback() time.Duration {
	if d.Lookback <= 0 {
		return DefaultLookback
	}
	return d.Lookback
}

// observedLookup is how the observer looks an owner's CA up for
// policy.Evaluate, one per decision: one resolve, never live (its answers
// do not lag: a change the observer sees has happened already), every CA
// the source held since the write's lookback, and an injectedByCertManager
// source only if held (or started in the background, see DecideObserved).
type observedLookup struct {
	ctx      context.Context //nolint:containedctx // one decision's lookup, discarded with it
	d        *CADecider
	since    time.Time
	mayStart bool
	// started is set when the lookup started reading the source instead
	// of answering: the decision is to be made again later.
	started bool
}

// LookupCA implements policy.CALookup.
func (l *observedLookup) LookupCA(q policy.CAQuery) policy.CAAnswer {
	injected := q.Owner.CA.InjectedByCertManager != nil
	req := casource.Request{Owner: q.Owner, Annotations: q.Annotations, ClusterResourceNamespace: q.ClusterResourceNamespace,
		HeldOnly: injected, Since: l.since}
	res := l.d.CA.Resolve(l.ctx, req, false)
	if injected && l.mayStart && casource.IsNotHeld(res.Err) && l.d.startReading(l.ctx, req) {
		l.started = true
	}
	return policy.CAAnswer{CAResult: res.CAResult}
}

// startReading hands req to the background reader, at most once per
// StartInterval and never blocking; false when it did not.
func (d *CADecider) startReading(ctx context.Context, req casource.Request) bool {
	interval := d.StartInterval
	if interval <= 0 {
		interval = DefaultStartInterval
	}
	key := req.Annotations[casource.AnnotationInjectCAFrom] + "\x00" + req.Annotations[casource.AnnotationInjectCAFromSecret]
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	if now.Sub(d.lastStart) < interval {
		// The source being read (another configuration naming it) is
		// waited for too; any other waits for the next interval's start.
		return key == d.lastKey
	}
	if d.reading == nil {
		d.reading = make(chan casource.Request, 1)
		go d.read(ctx, d.reading)
	}
	req.HeldOnly = false
	select {
	case d.reading <- req:
		d.lastStart, d.lastKey = now, key
		return true
	default:
		return false
	}
}

// read resolves the requests it is handed, one at a time: each may start a
// CA watch and wait for its initial list, off the observer's worker.
func (d *CADecider) read(ctx context.Context, reqs <-chan casource.Request) {
	for {
		select {
		case <-ctx.Done():
			return
		case req := <-reqs:
			d.CA.Resolve(ctx, req, false)
		}
	}
}

// Warm resolves the CA source the inject annotation of an existing
// configuration names, so that later changes of it find the source held.
// It may start a watch and wait for it: the observer calls it for the
// configurations of its initial list only, off the event path.
func (d *CADecider) Warm(ctx context.Context, kind policy.GuardedKind, name string, labels, annotations map[string]string) {
	cfg := d.Config.Current()
	m := cfg.Match(kind, name, labels)
	if m.Owner == nil || len(m.Conflicting) > 0 || m.Owner.CA.InjectedByCertManager == nil {
		return
	}
	d.CA.Resolve(ctx, casource.Request{Owner: m.Owner, Annotations: annotations, ClusterResourceNamespace: cfg.Spec.CertManager.ClusterResourceNamespace}, false)
}
