package serve

import (
	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
	"github.com/webhook-guard/webhook-guard/webhook/policysync"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// addPolicySync adds policy mode's controller to the manager: leader
// elected (only the leader writes), reads straight from the API server,
// and a pass right after every configuration reload.
func addPolicySync(mgr ctrl.Manager, o *Options, store *webhook.ConfigStore, resolver *casource.Resolver, reloader *webhook.ConfigReloader, log logr.Logger) error {
	syncer := &policysync.Syncer{
		Client:        mgr.GetClient(),
		Reader:        mgr.GetAPIReader(),
		Config:        store.Current,
		CA:            resolver,
		Anchor:        o.PolicyAnchor,
		ProtectAnchor: o.PolicyAnchorProtection,
		Interval:      o.PolicySyncInterval,
		Metrics:       policysync.NewMetrics(ctrlmetrics.Registry),
		Log:           log,
		// Refusals and a missing anchor, once per change, in the Events
		// namespace the guard's other Events use.
		Events: records.NewEventWriter(mgr.GetClient(), "webhook-guard", eventInstance(), log.WithName("events")),
	}
	prev := reloader.OnReload
	reloader.OnReload = func(cfg *policy.Mappings) {
		if prev != nil {
			prev(cfg)
		}
		syncer.Trigger()
	}
	return mgr.Add(syncer)
}
