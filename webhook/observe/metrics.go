package observe

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhook-guard/webhook-guard/webhook/metrics"
)

// Metrics are the observer's collectors, defined with every other series
// the guard exports in webhook/metrics.
type Metrics = metrics.Observer

// NewMetrics creates the observer's collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics { return metrics.NewObserver(reg) }
