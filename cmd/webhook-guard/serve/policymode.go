package serve

import (
	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
	"github.com/webhook-guard/webhook-guard/webhook/policysync"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// addPolicySync adds the policy shape's controller to the manager: leader
// elected (only the leader watches and writes), a pass at every change of
// a generated object or of a CA source, after every configuration reload,
// and every --policy-sync-interval.
func addPolicySync(mgr ctrl.Manager, o *Options, store *webhook.ConfigStore, reloader *webhook.ConfigReloader, log logr.Logger) error {
	// The generated objects, watched by label.
	objects, err := policysync.NewObjectCache(mgr.GetConfig(), mgr.GetScheme(), mgr.GetRESTMapper())
	if err != nil {
		return err
	}
	if err := mgr.Add(objects); err != nil {
		return err
	}
	// The CA sources, each watched by name as admissions watch them: the
	// watches start at the leader's first pass.
	c, err := client.NewWithWatch(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	sources := casource.NewWatchReader(c, casource.WatchOptions{})
	if err := mgr.Add(sources); err != nil {
		return err
	}
	resolver := casource.NewWatching(sources, casource.Options{MaxStale: o.CAMaxStale})
	syncer := &policysync.Syncer{
		Client:        mgr.GetClient(),
		Reader:        mgr.GetAPIReader(),
		Objects:       objects,
		Sources:       sources,
		Changes:       sources,
		Config:        store.Current,
		CA:            resolver,
		Anchor:        o.PolicyAnchor,
		ProtectAnchor: o.PolicyAnchorProtection,
		Interval:      o.PolicySyncInterval,
		Metrics:       policysync.NewMetrics(ctrlmetrics.Registry),
		Log:           log,
		// Refusals, conflicts and a missing anchor, in the Events
		// namespace the guard's other Events use.
		Events: records.NewEventWriter(mgr.GetClient(), "webhook-guard", eventInstance(), log.WithName("events")),
	}
	prev := reloader.OnReload
	reloader.OnReload = func(cfg *policy.Mappings) {
		if prev != nil {
			prev(cfg)
		}
		resolver.Invalidate()
		syncer.Trigger()
	}
	return syncer.SetupWithManager(mgr, objects)
}
