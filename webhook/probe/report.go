package probe

import (
	"slices"

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
			r.Metrics.Failures.WithLabelValues(k.Kind, k.Configuration, k.Webhook, reasonLabel(res.Reason)).Inc()
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

// ReasonOther is the reason label of a failure whose reason is none of
// Reasons (none is produced; the label's values stay a closed set all the
// same).
const ReasonOther = "other"

// reasonLabel is r as a label value: one of Reasons, or ReasonOther.
func reasonLabel(r Reason) string {
	if slices.Contains(Reasons(), r) {
		return string(r)
	}
	return ReasonOther
}
