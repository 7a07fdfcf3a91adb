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
	}
	reg.MustRegister(m.Changes, m.Flapping, m.Events)
	return m
}
