package webhook

import (
	"context"
	"time"

	"github.com/go-logr/logr"

	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

// CAExpiryInterval is how often the owners' CAs are read for the expiry gauge.
const CAExpiryInterval = 5 * time.Minute

// CAExpiryWatcher keeps webhook_guard_owner_ca_expiry_timestamp_seconds
// current without waiting for a caBundle write: it resolves every mapping's
// CA (through the resolver's cache) at start and every interval. Mappings
// whose CA comes from the configuration's inject-ca-from annotation are
// only measured when a write resolves them.
type CAExpiryWatcher struct {
	Config   ConfigSource
	CA       CAResolver
	Metrics  *Metrics
	Interval time.Duration
	Log      logr.Logger
}

// NeedLeaderElection is false: every replica exports the gauge.
func (w *CAExpiryWatcher) NeedLeaderElection() bool { return false }

// Start refreshes the gauge until ctx ends.
func (w *CAExpiryWatcher) Start(ctx context.Context) error {
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	for {
		w.refresh(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (w *CAExpiryWatcher) refresh(ctx context.Context) {
	cfg := w.Config.Current()
	for i := range cfg.Spec.Owners {
		o := &cfg.Spec.Owners[i]
		if o.CA.InjectedByCertManager != nil {
			continue
		}
		res := w.CA.Resolve(ctx, casource.Request{Owner: o, ClusterResourceNamespace: cfg.Spec.CertManager.ClusterResourceNamespace}, false)
		if res.Err != nil {
			w.Log.V(1).Info("cannot read the owner's CA for the expiry gauge", "mapping", o.Name, "reason", res.Err.Error())
			continue
		}
		if na := res.Set.NotAfter(); !na.IsZero() {
			w.Metrics.OwnerCAExpiry.WithLabelValues(o.Name).Set(float64(na.Unix()))
		}
	}
}
