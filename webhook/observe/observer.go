package observe

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/flapping"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

// ConfigSource gives the configuration in force (webhook.ConfigStore).
type ConfigSource interface {
	Current() *policy.Mappings
}

// Decider decides an input the way admission does: it resolves the owner's
// CA through the guard's CA resolver (cached, re-read live before a
// mismatch stands) and calls policy. webhook.Handler is the real one.
type Decider interface {
	// Decide decides in, a write the watch delivered at written.
	Decide(ctx context.Context, in *policy.Input, written time.Time) policy.Decision
}

// Recorder keeps records (webhook.Recorder: the log line, ClusterReports
// and Events).
type Recorder interface {
	RecordDecision(ctx context.Context, d *policy.Decision)
	RecordFlapping(ctx context.Context, mapping string, r flapping.Report)
}

// Observer watches webhook configurations and records what their changes
// break. It is a controller-runtime manager.Runnable that runs on the
// leader only.
//
// The watch's event handler only appends a write of a configuration (its
// new state and the state it replaced) to that configuration's pending
// writes and puts its name on a workqueue (client-go's: a name queued twice
// is queued once); one worker decides each queued configuration's pending
// writes in order, each against the state it replaced, so that the
// rotation rule's "already in the stored caBundle" means what it means for
// admission. However fast configurations are written and however slow a
// decision is, the handler never waits and the queue holds at most one
// entry per configuration. Every write is judged, however soon another
// overtakes it: a foreign CA reverted within the mismatch grace is still a
// finding (in the policy shape the observer is the only recorder of
// audit-mode writes). Only past maxPending writes waiting for one
// configuration are the newest folded into one change.
type Observer struct {
	// Kube lists and watches the webhook configurations and EndpointSlices (read-only).
	Kube kubernetes.Interface
	// Dynamic lists and watches CRDs and APIServices for the health series
	// (read-only); nil: those kinds have none.
	Dynamic  dynamic.Interface
	Config   ConfigSource
	Decider  Decider
	Recorder Recorder
	Metrics  *Metrics
	Log      logr.Logger
	// Now is the clock for flapping detection; time.Now when nil.
	Now func() time.Time
	// MismatchGrace is how long a ca-mismatch waits on the queue before it
	// stands: the CA watch may not yet have delivered a rotation written just
	// before the change (admission waits for it; the observer must not wait
	// in its worker). DefaultMismatchGrace when zero; negative: no grace.
	MismatchGrace time.Duration

	flap flapping.Current

	queue workqueue.TypedDelayingInterface[configKey]
	// retries counts the times a configuration's oldest pending write was
	// put back on the queue to wait for a CA source read in the background.
	retries map[configKey]int
	mu      sync.Mutex
	// pending are the writes the watch delivered of each queued
	// configuration, oldest first, not decided yet; the worker takes them
	// in order.
	pending map[configKey][]write
	// decided is the last state decided of each configuration (the initial
	// list's at the start): what the next change is judged against.
	decided map[configKey]object
}

// configKey names one configuration.
type configKey struct {
	kind policy.GuardedKind
	name string
}

// Warmer is a Decider that resolves, off the event path, the CA sources the
// configurations of the initial list name (CADecider).
type Warmer interface {
	Warm(ctx context.Context, kind policy.GuardedKind, name string, labels, annotations map[string]string)
}

// maxWarm bounds the configurations Warm is called for at the start.
const maxWarm = 64

// SourceStarter is a Decider that may, instead of deciding, start reading a
// CA source the change names in the background and ask to be called again
// (CADecider.DecideObserved).
type SourceStarter interface {
	DecideObserved(ctx context.Context, in *policy.Input, written time.Time, mayStart bool) (policy.Decision, bool)
}

// Waiting for a source read in the background: a change is put back on the
// queue retryAfter later, at most maxRetries times, then decided on what is
// held.
const (
	retryAfter = time.Second
	maxRetries = 5
)

// DefaultMismatchGrace is admission's wait for a rotation (casource's
// DefaultGrace), spent on the queue instead.
const DefaultMismatchGrace = time.Second

// NeedLeaderElection is true: one replica observes, so each change is
// recorded once however many replicas run.
func (o *Observer) NeedLeaderElection() bool { return true }

// Start watches until ctx ends. The informers never resync (resync period
// 0): with nothing changing, the only traffic is the open watch.
//
// Not controller-runtime's cache, on purpose: the transforms store types
// of the observer's own (an EndpointSlice as a readySlice, a CRD or
// APIService as a trustObject: a count or a few strings instead of the
// object), which controller-runtime's cache reader cannot hand back (it
// copies what it holds into the type asked for, and refuses another:
// "cache had type ..."). The webhook configurations' informers share one
// factory with the EndpointSlices' so that the observer reads the cluster
// one way, and they start and stop with its leadership, as the manager's
// cache (started on every replica) would not.
func (o *Observer) Start(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(o.Kube, 0, informers.WithTransform(trim))
	ctx = logf.IntoContext(ctx, o.Log)
	handler := o.handler(ctx)
	defer o.queue.ShutDown()
	infs := []toolscache.SharedIndexInformer{
		factory.Admissionregistration().V1().ValidatingWebhookConfigurations().Informer(),
		factory.Admissionregistration().V1().MutatingWebhookConfigurations().Informer(),
	}
	for _, inf := range infs {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok && ctx.Err() == nil {
			return errors.New("the observer's watch of " + typ.String() + " did not sync")
		}
	}
	endpoints, err := watchEndpointSlices(factory, ctx.Done())
	if err != nil {
		return err
	}
	trust, stopTrust := o.watchTrustObjects(ctx.Done())
	defer o.exportHealth(infs, endpoints, trust)()
	worker := make(chan struct{})
	go func() {
		defer close(worker)
		for o.processNext(ctx) {
		}
	}()
	if w, ok := o.Decider.(Warmer); ok {
		go o.warm(ctx, w)
	}
	o.Log.Info("observing webhook configurations")
	<-ctx.Done()
	o.queue.ShutDown()
	<-worker
	o.shutdown(factory.Shutdown, stopTrust)
	return nil
}

// warm lets the decider resolve the CA sources the initial list names.
func (o *Observer) warm(ctx context.Context, w Warmer) {
	o.mu.Lock()
	baseline := make([]object, 0, min(len(o.decided), maxWarm))
	for _, obj := range o.decided {
		if len(baseline) == maxWarm {
			break
		}
		baseline = append(baseline, obj)
	}
	o.mu.Unlock()
	for _, obj := range baseline {
		if ctx.Err() != nil {
			return
		}
		w.Warm(ctx, obj.kind, obj.meta.Name, obj.meta.Labels, obj.meta.Annotations)
	}
}

// handler turns watch events into queued configurations. Objects of the
// initial list are the baseline, not changes; an update that changes no
// resourceVersion (a relist of an unchanged object) is no change. It never
// blocks: it appends the write to the pending ones and queues the name.
func (o *Observer) handler(ctx context.Context) toolscache.ResourceEventHandler {
	o.queue = workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[configKey]{})
	o.pending, o.decided, o.retries = map[configKey][]write{}, map[configKey]object{}, map[configKey]int{}
	context.AfterFunc(ctx, o.queue.ShutDown)
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			cur, ok := objectOf(obj)
			if !ok {
				return
			}
			if isInInitialList {
				o.mu.Lock()
				o.decided[cur.key()] = cur
				o.mu.Unlock()
				return
			}
			o.Metrics.Events.WithLabelValues("add").Inc()
			o.enqueue(cur.key(), &cur, nil)
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := objectOf(oldObj)
			cur, ok2 := objectOf(newObj)
			if !ok1 || !ok2 || old.meta.ResourceVersion == cur.meta.ResourceVersion {
				return
			}
			o.Metrics.Events.WithLabelValues("update").Inc()
			o.enqueue(cur.key(), &cur, &old)
		},
		DeleteFunc: func(obj any) {
			if gone, ok := objectOf(obj); ok {
				o.Metrics.Events.WithLabelValues("delete").Inc()
				o.enqueue(gone.key(), nil, nil)
			}
		},
	}
}

// changed judges one observed write w (old is nil for a creation) and
// records what it broke. Changes that write no caBundle, and
// configurations no single mapping owns, cost a comparison and a match.
// It returns how long the write should wait on the queue, having recorded
// nothing: for a CA source the decider started reading, or for a
// ca-mismatch to stand (grace is true then): it is decided again once
// MismatchGrace has passed since the write was delivered, and at least once
// after it was first found; 0 once decided.
func (o *Observer) changed(ctx context.Context, k configKey, old *object, w *write) (wait time.Duration, grace bool) {
	cur := w.cur
	in := observedInput(old, cur)
	changes := policy.ChangedBundles(in)
	if len(changes) == 0 {
		return 0, false
	}
	if m := o.Config.Current().Match(in.Kind, in.Name, in.Labels); m.Owner == nil || len(m.Conflicting) > 0 {
		return 0, false
	}
	names := make([]string, len(changes))
	for i, c := range changes {
		names[i] = c.Webhook
	}
	managers := caBundleManagers(cur.meta, names)
	in.User.Username = policy.ObservedSubject(managers)

	d, decided := o.decide(ctx, k, in, old, w)
	if !decided {
		return retryAfter, false
	}
	if grace := o.mismatchGrace(); grace > 0 && slices.ContainsFunc(d.Violations, func(v policy.Violation) bool {
		return v.Rule == policy.RuleCAMismatch
	}) {
		now := time.Now()
		if w.until.IsZero() {
			w.until = w.at.Add(grace)
			if !w.until.After(now) { // the worker was behind: decide once more anyway
				w.until = now.Add(time.Nanosecond)
			}
		}
		if now.Before(w.until) {
			return w.until.Sub(now), true
		}
	}
	d.FieldManagers, d.Write = managers, in.Write
	o.record(ctx, &d)
	return 0, false
}

// observedInput builds the decision's input for an observed change: a
// creation when old is nil, else an update of old.
func observedInput(old, cur *object) *policy.Input {
	op := policy.OperationUpdate
	if old == nil {
		op = policy.OperationCreate
	}
	in := &policy.Input{
		Operation: op, Kind: cur.kind, Name: cur.meta.Name, Labels: cur.meta.Labels, Annotations: cur.meta.Annotations,
		Entries: cur.webhooks, Observed: true,
	}
	if old != nil {
		in.OldEntries = old.webhooks
		in.Write = policy.WriteID(string(cur.meta.UID), old.meta.ResourceVersion)
	} else {
		in.Write = policy.WriteID(string(cur.meta.UID), "")
	}
	return in
}

// decide asks the decider about in; false when it started reading a CA
// source and the change must wait for it.
func (o *Observer) decide(ctx context.Context, k configKey, in *policy.Input, old *object, w *write) (policy.Decision, bool) {
	starter, ok := o.Decider.(SourceStarter)
	if !ok {
		return o.Decider.Decide(ctx, in, w.at), true
	}
	cur := w.cur
	// Only an annotation the object carried before this change may make
	// the guard start reading a source; a writer changing both at once
	// is decided on what is held.
	mayStart := old != nil && sameInjectAnnotations(old, cur) && o.retryCount(k) < maxRetries
	return starter.DecideObserved(ctx, in, w.at, mayStart)
}

// record counts a decided change, records it when it says so, and feeds
// the owning mapping's flapping detector.
func (o *Observer) record(ctx context.Context, d *policy.Decision) {
	o.Metrics.Changes.WithLabelValues(d.Mapping, string(d.Rule), string(d.Outcome)).Inc()
	if d.Record {
		o.Recorder.RecordDecision(ctx, d)
	}
	if d.Mapping == "" {
		return
	}
	if report, flapping := o.flapDetector().Observe(d, o.now()); flapping {
		report.Observed = true
		o.Metrics.Flapping.WithLabelValues(d.Mapping).Inc()
		o.Recorder.RecordFlapping(ctx, d.Mapping, report)
	}
}

func (o *Observer) mismatchGrace() time.Duration {
	if o.MismatchGrace == 0 {
		return DefaultMismatchGrace
	}
	return o.MismatchGrace
}

func (o *Observer) retryCount(k configKey) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.retries[k]
}

// sameInjectAnnotations: the change leaves cert-manager's inject
// annotations as they were.
func sameInjectAnnotations(old, cur *object) bool {
	for _, a := range []string{casource.AnnotationInjectCAFrom, casource.AnnotationInjectCAFromSecret} {
		if old.meta.Annotations[a] != cur.meta.Annotations[a] {
			return false
		}
	}
	return true
}

// flapDetector returns the detector for the flapping settings in force,
// replacing it when a reload changed them. It is the observer's own: the
// stream of observed changes is not the stream of admission requests.
func (o *Observer) flapDetector() *flapping.Detector {
	return o.flap.For(o.Config.Current().Spec.Flapping)
}

func (o *Observer) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}
