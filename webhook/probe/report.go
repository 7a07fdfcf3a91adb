package probe

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhook-guard/webhook-guard/webhook/metrics"
)

// Reporter sets the probe series from each round's results and deletes the
// series of entries a round no longer probes (no longer guarded, or gone),
// so the series stay bounded by the guarded entries.
type Reporter struct {
	Metrics *metrics.Probe
	last    map[Key]struct{}
}

// Report records one round (results must hold every guarded path) and
// counts it.
func (r *Reporter) Report(results []Result) {
	now := make(map[Key]struct{}, len(results))
	for _, res := range results {
		k := res.Path.Key()
		now[k] = struct{}{}
		v := 0.0
		if res.Verified() {
			v = 1
		} else {
			r.Metrics.Failures.WithLabelValues(k.Kind, k.Configuration, k.Webhook, string(res.Reason)).Inc()
		}
		r.Metrics.Verified.WithLabelValues(k.Kind, k.Configuration, k.Webhook).Set(v)
	}
	for k := range r.last {
		if _, ok := now[k]; ok {
			continue
		}
		r.Metrics.Verified.DeleteLabelValues(k.Kind, k.Configuration, k.Webhook)
		r.Metrics.Failures.DeletePartialMatch(prometheus.Labels{"kind": k.Kind, "configuration": k.Configuration, "webhook": k.Webhook})
	}
	r.last = now
	r.Metrics.Rounds.Inc()
}
