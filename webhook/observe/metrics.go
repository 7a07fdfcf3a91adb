package observe

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the observer's collectors. Their labels are bounded by the
// configuration (mapping names) and fixed value sets, never by object names.
type Metrics struct {
	// Changes counts observed changes of guarded configurations that wrote
	// a caBundle.
	//   mapping: the owner mapping's name
	//   rule: none | ca-mismatch | ca-unavailable
	//   decision: allow | deny | audit (what the mapping's mode says about
	//             the change; observed changes have happened either way)
	Changes *prometheus.CounterVec
	// Flapping counts flapping reports from observed changes, by mapping.
	Flapping *prometheus.CounterVec
	// Events counts the watch events handled, by type: add | update |
	// delete (the initial list is not counted).
	Events *prometheus.CounterVec
	// QueueDepth is how many configurations wait for a decision: at most
	// one per configuration however often it is written.
	QueueDepth prometheus.Gauge
	// Decided counts configurations taken off the queue and decided (a
	// burst of writes to one configuration is decided once or twice).
	Decided prometheus.Counter
}

// NewMetrics creates the collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_guard_observed_changes_total",
			Help: "Changes of guarded webhook configurations' caBundles seen by the observer's watch, by owner mapping, primary rule and decision.",
		}, []string{"mapping", "rule", "decision"}),
		Flapping: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_guard_observed_flapping_total",
			Help: "Configurations the observer found flapping (too many distinct caBundles within the window), by owner mapping.",
		}, []string{"mapping"}),
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_guard_observer_events_total",
			Help: "Watch events of webhook configurations the observer handled, by type (add, update, delete); the initial list is not counted.",
		}, []string{"type"}),
		QueueDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "webhook_guard_observer_queue_depth",
			Help: "Webhook configurations waiting for the observer's decision (one entry per configuration, latest state wins).",
		}),
		Decided: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhook_guard_observer_decided_total",
			Help: "Changed webhook configurations the observer took off its queue and decided, latest state against the last decided.",
		}),
	}
	reg.MustRegister(m.Changes, m.Flapping, m.Events, m.QueueDepth, m.Decided)
	return m
}
