package webhook

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhook-guard/webhook-guard/webhook/metrics"
)

// Metrics are the handler's collectors, defined with every other series
// the guard exports in webhook/metrics.
type Metrics = metrics.Webhook

// NewMetrics creates the handler's collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics { return metrics.NewWebhook(reg) }
