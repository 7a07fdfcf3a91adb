package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are webhook-guard's own collectors. They sit beside
// controller-runtime's free webhook metrics (controller_runtime_webhook_*:
// latency, requests total by code, in flight, panics).
type Metrics struct {
	// Decisions counts every decided request.
	//   mapping: the owner mapping's name, "" when unmanaged.
	//   rule: a policy.Rule, each listed in policy's rule table (policy/rules.go):
	//         none | not-owner | ca-mismatch | ca-unavailable | ambiguous-owner | unmanaged | break-glass
	//         | policy-object (writes of policy mode's generated objects, mapping "")
	//   decision: allow | deny | audit | break-glass
	Decisions *prometheus.CounterVec
	// Records counts decisions written to the records (audit, deny and
	// break-glass, never dry runs); same labels as Decisions.
	Records *prometheus.CounterVec
	// DecisionDuration is the time from decoded request to decision,
	// including CA resolution; label decision as above.
	DecisionDuration *prometheus.HistogramVec
	// InvalidRequests counts requests rejected as malformed (400).
	InvalidRequests prometheus.Counter
	// CASourceErrors counts failed CA source reads by mapping and source
	// (the source description, e.g. "Secret ns/name (key ca.crt)").
	CASourceErrors *prometheus.CounterVec
	// CALiveRereads counts the second looks at the owner's CA before a
	// ca-mismatch denial (a wait for the CA watches to catch up), by
	// outcome: confirmed (still a mismatch) | rotated (the fresh CA allowed
	// it) | recent (the same mismatch was confirmed moments ago: no wait).
	CALiveRereads *prometheus.CounterVec
	// FlappingDetected counts flapping reports by mapping, kind and name.
	FlappingDetected *prometheus.CounterVec
	// ConfigReloads counts config file reloads by result: success | error.
	ConfigReloads *prometheus.CounterVec
	// ConfigLastReloadSuccess is 1 when the last reload attempt succeeded.
	ConfigLastReloadSuccess prometheus.Gauge
	// OwnerCAExpiry is the earliest NotAfter (Unix seconds) of each
	// mapping's CA, refreshed periodically and on every CA read.
	OwnerCAExpiry *prometheus.GaugeVec
}

// NewMetrics creates the collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_guard_decisions_total",
			Help: "Admission decisions on webhook configurations, by owner mapping, primary rule and decision.",
		}, []string{"mapping", "rule", "decision"}),
		Records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_guard_records_total",
			Help: "Decisions recorded (audit, deny, break-glass; never dry runs).",
		}, []string{"mapping", "rule", "decision"}),
		DecisionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "webhook_guard_decision_duration_seconds",
			Help:    "Time to decide one request, CA resolution included.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1},
		}, []string{"decision"}),
		InvalidRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhook_guard_invalid_requests_total",
			Help: "AdmissionReviews rejected as malformed.",
		}),
		CASourceErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_guard_ca_source_errors_total",
			Help: "Failed reads of owners' CA sources.",
		}, []string{"mapping", "source"}),
		CALiveRereads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_guard_ca_live_rereads_total",
			Help: "Second looks at the owner's CA before a ca-mismatch denial, by outcome (confirmed, rotated, recent).",
		}, []string{"outcome"}),
		FlappingDetected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_guard_flapping_detected_total",
			Help: "Configurations reported as flapping: more distinct caBundle values written within the window than allowed.",
		}, []string{"mapping", "kind", "name"}),
		ConfigReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_guard_config_reloads_total",
			Help: "Config file reloads by result (success, error).",
		}, []string{"result"}),
		ConfigLastReloadSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "webhook_guard_config_last_reload_successful",
			Help: "1 when the last config reload succeeded, 0 when the last good config is still in force after a bad file.",
		}),
		OwnerCAExpiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "webhook_guard_owner_ca_expiry_timestamp_seconds",
			Help: "Earliest expiry (Unix time) of the certificates in each mapping's CA.",
		}, []string{"mapping"}),
	}
	reg.MustRegister(m.Decisions, m.Records, m.DecisionDuration, m.InvalidRequests, m.CASourceErrors,
		m.CALiveRereads, m.FlappingDetected, m.ConfigReloads, m.ConfigLastReloadSuccess, m.OwnerCAExpiry)
	m.ConfigLastReloadSuccess.Set(1)
	return m
}
