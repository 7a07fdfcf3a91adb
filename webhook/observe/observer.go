package observe

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/webhook-guard/webhook-guard/policy"
)

// ConfigSource gives the configuration in force (webhook.ConfigStore).
type ConfigSource interface {
	Current() *policy.Config
}

// Decider decides an input the way admission does: it resolves the owner's
// CA through the guard's CA resolver (cached, re-read live before a
// mismatch stands) and calls policy. webhook.Handler is the real one.
type Decider interface {
	Decide(ctx context.Context, in *policy.Input) policy.Decision
}

// Recorder keeps records (webhook.Recorder: the log line, ClusterReports
// and Events).
type Recorder interface {
	RecordDecision(ctx context.Context, d *policy.Decision)
	RecordFlapping(ctx context.Context, mapping string, r policy.FlapReport)
}

// Observer watches webhook configurations and records what their changes
// break. It is a controller-runtime manager.Runnable that runs on the
// leader only.
type Observer struct {
	// Kube lists and watches the webhook configurations (read-only).
	Kube     kubernetes.Interface
	Config   ConfigSource
	Decider  Decider
	Recorder Recorder
	Metrics  *Metrics
	Log      logr.Logger
	// Now is the clock for flapping detection; time.Now when nil.
	Now func() time.Time

	flap policy.CurrentFlapDetector
}

// NeedLeaderElection is true: one replica observes, so each change is
// recorded once however many replicas run.
func (o *Observer) NeedLeaderElection() bool { return true }

// Start watches until ctx ends. The informers never resync (resync period
// 0): with nothing changing, the only traffic is the open watch.
func (o *Observer) Start(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(o.Kube, 0, informers.WithTransform(trim))
	ctx = logf.IntoContext(ctx, o.Log)
	handler := o.handler(ctx)
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
	o.Log.Info("observing webhook configurations")
	<-ctx.Done()
	o.shutdown(factory)
	return nil
}

// shutdownWait bounds how long stopping waits for the informers.
const shutdownWait = time.Second

// shutdown stops the informers, waiting at most shutdownWait for them.
// client-go's reflector backs off from a failed watch-list request with a
// sleep that does not watch its context, so with the API server unreachable
// Shutdown blocked for the rest of that back-off (4–9 s measured, up to its
// 30 s cap), holding up the whole process's exit. What is left is a
// goroutine sleeping until the process ends.
func (o *Observer) shutdown(factory informers.SharedInformerFactory) {
	done := make(chan struct{})
	go func() {
		factory.Shutdown()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(shutdownWait):
		o.Log.Info("not waiting for the watch of webhook configurations to stop: it is backing off from a failed request", "waited", shutdownWait)
	}
}

// handler turns watch events into observed changes. Objects of the initial
// list are the baseline, not changes; an update that changes no
// resourceVersion (a relist of an unchanged object) is no change.
func (o *Observer) handler(ctx context.Context) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if isInInitialList {
				return
			}
			if cur, ok := objectOf(obj); ok {
				o.Metrics.Events.WithLabelValues("add").Inc()
				o.changed(ctx, policy.OperationCreate, nil, &cur)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := objectOf(oldObj)
			cur, ok2 := objectOf(newObj)
			if !ok1 || !ok2 || old.meta.ResourceVersion == cur.meta.ResourceVersion {
				return
			}
			o.Metrics.Events.WithLabelValues("update").Inc()
			o.changed(ctx, policy.OperationUpdate, &old, &cur)
		},
		DeleteFunc: func(obj any) {
			if gone, ok := objectOf(obj); ok {
				o.Metrics.Events.WithLabelValues("delete").Inc()
				o.flapDetector().Forget(gone.kind, gone.meta.Name)
			}
		},
	}
}

// changed judges one observed change (old is nil for a creation) and
// records what it broke. Changes that write no caBundle, and
// configurations no single mapping owns, cost a comparison and a match.
func (o *Observer) changed(ctx context.Context, op policy.Operation, old, cur *object) {
	in := &policy.Input{
		Operation: op, Kind: cur.kind, Name: cur.meta.Name, Labels: cur.meta.Labels, Annotations: cur.meta.Annotations,
		Webhooks: cur.webhooks, Observed: true,
	}
	if old != nil {
		in.OldWebhooks = old.webhooks
	}
	changes := policy.ChangedBundles(in)
	if len(changes) == 0 {
		return
	}
	if m := o.Config.Current().Match(in.Kind, in.Name, in.Labels); m.Owner == nil || len(m.Conflicting) > 0 {
		return
	}
	names := make([]string, len(changes))
	for i, c := range changes {
		names[i] = c.Webhook
	}
	managers := caBundleManagers(cur.meta, names)
	in.User.Username = policy.ObservedSubject(managers)

	d := o.Decider.Decide(ctx, in)
	d.FieldManagers = managers
	o.Metrics.Changes.WithLabelValues(d.Mapping, string(d.Rule), string(d.Outcome)).Inc()
	if d.Record {
		o.Recorder.RecordDecision(ctx, &d)
	}
	if d.Mapping == "" {
		return
	}
	if report, flapping := o.flapDetector().Observe(&d, o.now()); flapping {
		report.Observed = true
		o.Metrics.Flapping.WithLabelValues(d.Mapping).Inc()
		o.Recorder.RecordFlapping(ctx, d.Mapping, report)
	}
}

// flapDetector returns the detector for the flapping settings in force,
// replacing it when a reload changed them. It is the observer's own: the
// stream of observed changes is not the stream of admission requests.
func (o *Observer) flapDetector() *policy.FlapDetector {
	return o.flap.For(o.Config.Current().Spec.Flapping)
}

func (o *Observer) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}
