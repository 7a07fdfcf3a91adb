// Package metrics defines every Prometheus series webhook-guard exports: its
// name, help and labels, with the values each label takes. The packages that
// count (webhook, webhook/observe, webhook/records, webhook/policysync) use
// these definitions; `serve` registers them on controller-runtime's metrics
// registry, beside controller-runtime's own webhook series
// (controller_runtime_webhook_*: latency, requests total by code, in flight,
// panics).
//
// The names are an interface: the e2e suite, the chart's PrometheusRules and
// dashboards and docs/observability.md use them.
package metrics

import "github.com/prometheus/client_golang/prometheus"

// Webhook are the admission handler's collectors.
type Webhook struct {
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
	// WriteBudgetExceeded counts caBundle-changing writes beyond a
	// mapping's writeBudget, by mapping and mode: enforce (refused with a
	// 429) | audit (allowed, recorded as would-deny).
	WriteBudgetExceeded *prometheus.CounterVec
	// ConfigReloads counts config file reloads by result: success | error.
	ConfigReloads *prometheus.CounterVec
	// ConfigLastReloadSuccess is 1 when the last reload attempt succeeded.
	ConfigLastReloadSuccess prometheus.Gauge
	// OwnerCAExpiry is the earliest NotAfter (Unix seconds) of each
	// mapping's CA, refreshed periodically and on every CA read.
	OwnerCAExpiry *prometheus.GaugeVec
}

// NewWebhook creates the handler's collectors and registers them with reg.
func NewWebhook(reg prometheus.Registerer) *Webhook {
	m := &Webhook{
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
		WriteBudgetExceeded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_guard_write_budget_exceeded_total",
			Help: "caBundle-changing writes beyond a mapping's writeBudget, by mapping and mode (enforce: refused with a 429; audit: recorded).",
		}, []string{"mapping", "mode"}),
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
		m.CALiveRereads, m.FlappingDetected, m.WriteBudgetExceeded, m.ConfigReloads, m.ConfigLastReloadSuccess, m.OwnerCAExpiry)
	m.ConfigLastReloadSuccess.Set(1)
	return m
}

// Observer are the observer's collectors. Their labels are bounded by the
// configuration (mapping names) and fixed value sets, never by object names.
type Observer struct {
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

// NewObserver creates the observer's collectors and registers them with reg.
func NewObserver(reg prometheus.Registerer) *Observer {
	m := &Observer{
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

// Records count what the recorder writes, so the guard's own write load on
// the API server is observable (it must never become a write amplifier).
type Records struct {
	// ReportWrites counts ClusterReport writes by result:
	// created | updated | conflict | error.
	ReportWrites *prometheus.CounterVec
	// EventsEmitted counts aggregated Events by reason:
	// WouldDeny | Denied | BreakGlass | UnmanagedWrite | CABundleFlapping.
	EventsEmitted *prometheus.CounterVec
	// DroppedResults counts results dropped to keep reports bounded.
	DroppedResults prometheus.Counter
	// AbandonedResults counts results whose report could not be written, by
	// reason: invalid (refused as invalid, never retried) | attempts (failed
	// maxWriteAttempts flushes).
	AbandonedResults *prometheus.CounterVec
}

// NewRecords creates the recorder's collectors and registers them with reg.
func NewRecords(reg prometheus.Registerer) *Records {
	m := &Records{
		ReportWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_guard_report_writes_total",
			Help: "ClusterReport writes (create or update) by result: created, updated, conflict, error.",
		}, []string{"result"}),
		EventsEmitted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_guard_events_total",
			Help: "Aggregated Kubernetes Events emitted on guarded configurations, by reason.",
		}, []string{"reason"}),
		DroppedResults: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhook_guard_report_results_dropped_total",
			Help: "Report results dropped (oldest first) to keep each ClusterReport within its bound.",
		}),
		AbandonedResults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_guard_report_results_abandoned_total",
			Help: "Report results given up on because their ClusterReport could not be written, by reason: invalid (refused as invalid), attempts (failed too many flushes).",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.ReportWrites, m.EventsEmitted, m.DroppedResults, m.AbandonedResults)
	return m
}

// Verbs of PolicySync.Writes.
const (
	VerbCreate = "create"
	VerbUpdate = "update"
	VerbDelete = "delete"
)

// PolicySync are the policy shape's syncer's collectors.
type PolicySync struct {
	// Writes counts the syncer's successful writes of generated objects.
	//   kind: ValidatingAdmissionPolicy | ValidatingAdmissionPolicyBinding
	//   verb: create | update | delete
	// With no change to the mappings or the CAs it stays flat: the guard
	// must never become a write amplifier itself.
	Writes *prometheus.CounterVec
	// Syncs counts sync passes by result: success | error.
	Syncs *prometheus.CounterVec
	// Refusals counts, by mapping, the writes of its generated objects
	// kube-apiserver refused (invalid, too large, forbidden, a name taken by
	// an object the guard did not create).
	Refusals *prometheus.CounterVec
	// Refused is 1 for each mapping whose last pass had a write refused:
	// its caBundle changes fail closed (ca-unavailable), or, when even the
	// fail-closed policy was refused, the mapping runs on whatever is live.
	Refused *prometheus.GaugeVec
	// AnchorPresent is 1 while the anchor ClusterRole exists, 0 once it is
	// missing or being deleted (the garbage collector then deletes every
	// generated object and the guard writes nothing). Only the leader sets
	// it, after its first pass: followers export no series.
	AnchorPresent *prometheus.GaugeVec
	// Conflicts counts the server-side apply conflicts of the guard's
	// writes: another field manager had changed a field the guard owns in
	// a generated object, and the guard applied it again with force.
	//   mapping: the mapping whose object it is ("" for the anchor's own)
	//   kind: ValidatingAdmissionPolicy | ValidatingAdmissionPolicyBinding
	//   name: the object's name
	Conflicts *prometheus.CounterVec
}

// NewPolicySync creates the syncer's collectors, registers them with reg
// and initialises every series of Writes and Syncs to 0, so that "no
// writes" is visible on every replica, leaders and followers alike.
func NewPolicySync(reg prometheus.Registerer) *PolicySync {
	m := &PolicySync{
		Writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_guard_policy_writes_total",
			Help: "Writes of policy mode's generated objects (ValidatingAdmissionPolicies and their bindings), by kind and verb.",
		}, []string{"kind", "verb"}),
		Syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_guard_policy_syncs_total",
			Help: "Policy mode sync passes by result (success, error); only the leader syncs.",
		}, []string{"result"}),
		Refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_guard_policy_write_refusals_total",
			Help: "Writes of a mapping's generated objects that kube-apiserver refused (invalid, too large, forbidden, a name taken by a foreign object), by mapping.",
		}, []string{"mapping"}),
		Refused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "webhook_guard_policy_mapping_refused",
			Help: "1 for each mapping whose generated objects kube-apiserver refused at the leader's last pass: its caBundle changes fail closed (ca-unavailable).",
		}, []string{"mapping"}),
		AnchorPresent: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "webhook_guard_policy_anchor_present",
			Help: "1 while the anchor ClusterRole that owns the generated objects exists, 0 when it is missing or being deleted (the generated objects are garbage collected). Set by the leader only.",
		}, []string{"anchor"}),
		Conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_guard_policy_apply_conflicts_total",
			Help: "Server-side apply conflicts of the guard's writes of its generated objects (another field manager changed a field the guard owns; the guard then applied with force), by mapping, kind and name.",
		}, []string{"mapping", "kind", "name"}),
	}
	reg.MustRegister(m.Writes, m.Syncs, m.Refusals, m.Refused, m.AnchorPresent, m.Conflicts)
	for _, k := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		for _, v := range []string{VerbCreate, VerbUpdate, VerbDelete} {
			m.Writes.WithLabelValues(k, v)
		}
	}
	m.Syncs.WithLabelValues("success")
	m.Syncs.WithLabelValues("error")
	return m
}
