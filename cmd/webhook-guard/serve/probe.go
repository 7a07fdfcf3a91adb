package serve

import (
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/endpointslices"
	"github.com/webhook-guard/webhook-guard/webhook/metrics"
	"github.com/webhook-guard/webhook-guard/webhook/probe"
)

// addProber runs the trust path prober on every replica every interval
// (each keeps the served chains in served for its admissions; only the
// leader exports the series and keeps the trust-path ClusterReport). It
// lists the webhook configurations, and the metadata of CRDs and
// APIServices, from the manager's cache (the chart grants list and watch
// on all four), gets the guarded CRDs and APIServices directly (a CRD's
// schemas stay out of the cache) and lists each probed Service's
// EndpointSlices directly, by label: the cache would hold every slice of
// the cluster whole.
func addProber(mgr ctrl.Manager, store webhook.ConfigSource, served *probe.Served, interval time.Duration, log logr.Logger) error {
	// The report is read and written directly, as the records are: no
	// informer on ClusterReports (and no watch permission needed).
	reportClient, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	m := metrics.NewProbe(ctrlmetrics.Registry)
	return mgr.Add(&probe.Runner{
		Served:   served,
		Elected:  mgr.Elected(),
		Config:   store,
		Cached:   mgr.GetClient(),
		Direct:   mgr.GetAPIReader(),
		Prober:   &probe.Prober{Endpoints: endpointslices.Reader{Client: mgr.GetAPIReader()}},
		Reporter: &probe.Reporter{Metrics: m},
		Publisher: &probe.Publisher{Client: reportClient,
			Writes: func(result string) { m.ReportWrites.WithLabelValues(result).Inc() }},
		Interval: interval,
		Log:      log,
	})
}
