package serve

import (
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/metrics"
	"github.com/webhook-guard/webhook-guard/webhook/probe"
)

// addProber runs the trust path prober on every replica every interval
// (each keeps the served chains in served for its admissions; only the
// leader exports the series). It
// lists the webhook configurations, and the metadata of CRDs and
// APIServices, from the manager's cache (the chart grants list and watch
// on all four), gets the guarded CRDs and APIServices directly (a CRD's
// schemas stay out of the cache) and lists each probed Service's
// EndpointSlices directly, by label: the cache would hold every slice of
// the cluster whole.
func addProber(mgr ctrl.Manager, store webhook.ConfigSource, served *probe.Served, interval time.Duration, log logr.Logger) error {
	return mgr.Add(&probe.Runner{
		Served:   served,
		Elected:  mgr.Elected(),
		Config:   store,
		Cached:   mgr.GetClient(),
		Direct:   mgr.GetAPIReader(),
		Prober:   &probe.Prober{Endpoints: probe.SliceEndpoints{Reader: mgr.GetAPIReader()}},
		Reporter: &probe.Reporter{Metrics: metrics.NewProbe(ctrlmetrics.Registry)},
		Interval: interval,
		Log:      log,
	})
}
