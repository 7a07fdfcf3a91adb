// Package metrics defines every Prometheus series webhook-guard exports: its
// name, help and labels, with the values each label takes. The packages that
// count (webhook, webhook/observe, webhook/records, webhook/policysync,
// webhook/probe) use these definitions; `serve` registers them on
// controller-runtime's metrics registry, beside controller-runtime's own
// webhook series (controller_runtime_webhook_*: latency, requests total by
// code, in flight, panics).
//
// The names are an interface: the e2e suite, the chart's PrometheusRules and
// dashboards and docs/observability.md use them.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Webhook are the admission handler's collectors.
type Webhook struct {
	// Decisions counts every decided request.
	//   mapping: the owner mapping's name, "" when unmanaged.
	//   rule: a policy.Rule, each listed in policy's rule table (policy/rules.go):
	//         none | not-owner | ca-mismatch | ca-unavailable | ambiguous-owner | unmanaged | break-glass
	//         | policy-object (writes of the policy shape's generated objects, mapping "")
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
		Decisions: counterVec("webhook_guard_decisions_total",
			"Admission decisions on webhook configurations, by owner mapping, primary rule and decision.",
			"mapping", "rule", "decision"),
		Records: counterVec("webhook_guard_records_total",
			"Decisions recorded (audit, deny, break-glass; never dry runs).",
			"mapping", "rule", "decision"),
		DecisionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "webhook_guard_decision_duration_seconds",
			Help:    "Time to decide one request, CA resolution included.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1},
		}, []string{"decision"}),
		InvalidRequests: counter("webhook_guard_invalid_requests_total",
			"AdmissionReviews rejected as malformed."),
		CASourceErrors: counterVec("webhook_guard_ca_source_errors_total",
			"Failed reads of owners' CA sources.",
			"mapping", "source"),
		CALiveRereads: counterVec("webhook_guard_ca_live_rereads_total",
			"Second looks at the owner's CA before a ca-mismatch denial, by outcome (confirmed, rotated, recent).",
			"outcome"),
		FlappingDetected: counterVec("webhook_guard_flapping_detected_total",
			"Configurations reported as flapping: more distinct caBundle values written within the window than allowed.",
			"mapping", "kind", "name"),
		WriteBudgetExceeded: counterVec("webhook_guard_write_budget_exceeded_total",
			"caBundle-changing writes beyond a mapping's writeBudget, by mapping and mode (enforce: refused with a 429; audit: recorded).",
			"mapping", "mode"),
		ConfigReloads: counterVec("webhook_guard_config_reloads_total",
			"Config file reloads by result (success, error).",
			"result"),
		ConfigLastReloadSuccess: gauge("webhook_guard_config_last_reload_successful",
			"1 when the last config reload succeeded, 0 when the last good config is still in force after a bad file."),
		OwnerCAExpiry: gaugeVec("webhook_guard_owner_ca_expiry_timestamp_seconds",
			"Earliest expiry (Unix time) of the certificates in each mapping's CA.",
			"mapping"),
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
	// delete (the initial list is not counted), and merged: a write folded
	// into the one before it because maxPending writes of its
	// configuration were already waiting (the worker is stuck).
	Events *prometheus.CounterVec
	// QueueDepth is how many configurations wait for a decision: at most
	// one per configuration however often it is written.
	QueueDepth prometheus.Gauge
	// Decided counts the writes the observer decided, each against the
	// state it replaced (a burst of writes to one configuration is decided
	// write by write).
	Decided prometheus.Counter
	// Health describes every webhook entry of every configuration the
	// observer's watch holds, and the one entry of each CRD and APIService
	// kube-apiserver calls (see WebhookHealth).
	Health *WebhookHealth
}

// NewObserver creates the observer's collectors and registers them with reg.
func NewObserver(reg prometheus.Registerer) *Observer {
	m := &Observer{
		Changes: counterVec("webhook_guard_observed_changes_total",
			"Changes of guarded webhook configurations' caBundles seen by the observer's watch, by owner mapping, primary rule and decision.",
			"mapping", "rule", "decision"),
		Flapping: counterVec("webhook_guard_observed_flapping_total",
			"Configurations the observer found flapping (too many distinct caBundles within the window), by owner mapping.",
			"mapping"),
		Events: counterVec("webhook_guard_observer_events_total",
			"Watch events of webhook configurations the observer handled, by type (add, update, delete; merged: two pending writes folded into one, skipping a state another holds, while too many waited; lost: such a fold when every pending state differed); the initial list is not counted.",
			"type"),
		QueueDepth: gauge("webhook_guard_observer_queue_depth",
			"Webhook configurations with writes waiting for the observer's decision (one entry per configuration, however many of its writes wait)."),
		Decided: counter("webhook_guard_observer_decided_total",
			"Writes of webhook configurations the observer decided, each against the state it replaced."),
	}
	m.Health = NewWebhookHealth()
	reg.MustRegister(m.Changes, m.Flapping, m.Events, m.QueueDepth, m.Decided, m.Health)
	return m
}

// WebhookEntry is one webhook entry of a Validating- or
// MutatingWebhookConfiguration, or the one entry of a
// CustomResourceDefinition's conversion webhook or of an APIService's
// service, as the health series describe it.
type WebhookEntry struct {
	// Kind is ValidatingWebhookConfiguration, MutatingWebhookConfiguration,
	// CustomResourceDefinition or APIService.
	Kind string
	// Configuration is the object's name.
	Configuration string
	// Webhook is the entry's name: kube-apiserver's
	// apiserver_admission_webhook_* series call it name. A CRD's entry is
	// "conversion", an APIService's "service", as decisions name them.
	Webhook string
	// FailurePolicy is Fail or Ignore; always Fail for a CRD's and an
	// APIService's entry, which have no failure policy and fail closed.
	FailurePolicy string
	// TimeoutSeconds is the entry's timeout, in whole seconds (1 to 30);
	// "" for a CRD's and an APIService's entry: kube-apiserver sets no
	// timeout of its own on those calls (the request's deadline bounds
	// them).
	TimeoutSeconds string
	// Mapping is the owner mapping's name; "" when unmanaged, the names
	// joined with "," when several mappings claim the configuration.
	Mapping string
	// CAFingerprint names the caBundle's certificates by short fingerprint
	// (see WebhookHealth); "" for an empty bundle, "invalid" for one with no
	// certificate kube-apiserver can use.
	CAFingerprint string
	// CAExpiry is the earliest NotAfter of the bundle's certificates; zero
	// when it has none.
	CAExpiry time.Time
	// ServiceNamespace and ServiceName name the Service kube-apiserver
	// calls (clientConfig.service, an APIService's spec.service); "" for
	// an entry called by URL.
	ServiceNamespace, ServiceName string
	// ReadyEndpoints counts the Service's ready endpoints across its
	// EndpointSlices; meaningful only when EndpointsKnown.
	ReadyEndpoints int
	// EndpointsKnown is false while the watch of EndpointSlices has not
	// synced (or may not list them): a count of 0 would then be a guess.
	EndpointsKnown bool
}

// WebhookHealth is a collector computed at each scrape from the
// observer's watches, so a configuration or entry that is gone has no series
// and a reload of the mappings relabels at once. It exports nothing while
// no source is set: on followers, and before the leader's watch is
// started.
//
// Series: one info series, at most one expiry series and at most one
// ready-endpoints series per webhook entry of the cluster (a CRD with a
// conversion webhook and an APIService with a service have one entry).
// Every label value comes from a bounded set: names of existing objects
// and mappings, two failure policies, 30 timeouts and "", and a
// fingerprint label of at most three short fingerprints (see
// CAFingerprint).
type WebhookHealth struct {
	// Info is 1 for each webhook entry.
	//   kind: ValidatingWebhookConfiguration | MutatingWebhookConfiguration |
	//         CustomResourceDefinition | APIService
	//   configuration, webhook: the object's and the entry's name
	//         (conversion for a CRD, service for an APIService)
	//   failure_policy: Fail | Ignore (Fail for a CRD and an APIService)
	//   timeout_seconds: 1..30, "" for a CRD and an APIService
	//   mapping: the owner mapping, "" when unmanaged
	//   ca_fingerprint: see WebhookEntry.CAFingerprint
	Info *prometheus.Desc
	// CABundleExpiry is the earliest NotAfter (Unix seconds) of the entry's
	// caBundle certificates; no series for a bundle without one.
	CABundleExpiry *prometheus.Desc
	// ServiceReadyEndpoints is the number of ready endpoints of the Service
	// an entry calls (0: kube-apiserver cannot reach it, and with
	// failurePolicy Fail every request the entry intercepts is rejected);
	// no series for an entry called by URL, nor before the watch of
	// EndpointSlices has synced.
	//   kind, configuration, webhook: as Info
	//   service_namespace, service_name: clientConfig.service (an
	//         APIService's spec.service)
	ServiceReadyEndpoints *prometheus.Desc

	mu     sync.Mutex
	source func() []WebhookEntry
}

// NewWebhookHealth creates the collector with no source.
func NewWebhookHealth() *WebhookHealth {
	return &WebhookHealth{
		Info: prometheus.NewDesc("webhook_guard_webhook_info",
			"1 for every webhook entry of every Validating- and MutatingWebhookConfiguration, every CustomResourceDefinition's conversion webhook and every APIService's service, with its failure policy, timeout, owner mapping and caBundle fingerprints; exported by the leader only.",
			[]string{"kind", "configuration", "webhook", "failure_policy", "timeout_seconds", "mapping", "ca_fingerprint"}, nil),
		CABundleExpiry: prometheus.NewDesc("webhook_guard_webhook_cabundle_expiry_timestamp_seconds",
			"Earliest expiry (Unix time) of the certificates in each webhook entry's caBundle; no series for a bundle without a usable certificate. Exported by the leader only.",
			[]string{"kind", "configuration", "webhook"}, nil),
		ServiceReadyEndpoints: prometheus.NewDesc("webhook_guard_webhook_service_ready_endpoints",
			"Ready endpoints (across its EndpointSlices) of the Service each webhook entry calls; no series for an entry called by URL. Exported by the leader only.",
			[]string{"kind", "configuration", "webhook", "service_namespace", "service_name"}, nil),
	}
}

// SetSource sets what Collect describes; nil exports nothing.
func (h *WebhookHealth) SetSource(source func() []WebhookEntry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.source = source
}

// Describe implements prometheus.Collector.
func (h *WebhookHealth) Describe(ch chan<- *prometheus.Desc) {
	ch <- h.Info
	ch <- h.CABundleExpiry
	ch <- h.ServiceReadyEndpoints
}

// Collect implements prometheus.Collector.
func (h *WebhookHealth) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	source := h.source
	h.mu.Unlock()
	if source == nil {
		return
	}
	for _, e := range source() {
		ch <- prometheus.MustNewConstMetric(h.Info, prometheus.GaugeValue, 1,
			e.Kind, e.Configuration, e.Webhook, e.FailurePolicy, e.TimeoutSeconds, e.Mapping, e.CAFingerprint)
		if !e.CAExpiry.IsZero() {
			ch <- prometheus.MustNewConstMetric(h.CABundleExpiry, prometheus.GaugeValue, float64(e.CAExpiry.Unix()),
				e.Kind, e.Configuration, e.Webhook)
		}
		if e.ServiceName != "" && e.EndpointsKnown {
			ch <- prometheus.MustNewConstMetric(h.ServiceReadyEndpoints, prometheus.GaugeValue, float64(e.ReadyEndpoints),
				e.Kind, e.Configuration, e.Webhook, e.ServiceNamespace, e.ServiceName)
		}
	}
}

// Probe are the trust path prober's collectors (webhook/probe), set by the
// leader only. Their series exist for guarded entries alone (a webhook
// entry, a CRD's conversion webhook, an APIService an owner mapping
// claims), so they are bounded by the configuration; the series of an
// entry no longer guarded are deleted.
type Probe struct {
	// Verified is 1 when the entry's caBundle verified the chain its
	// endpoint served at the last probe, 0 when it did not.
	//   kind: ValidatingWebhookConfiguration | MutatingWebhookConfiguration |
	//         CustomResourceDefinition | APIService
	//   configuration, webhook: the object's and the entry's name
	//         (conversion for a CRD, service for an APIService)
	Verified *prometheus.GaugeVec
	// Failures counts failed probes by entry (as Verified) and reason:
	//   unknown-authority | expired | name-mismatch | unreachable |
	//   no-endpoints | no-ca-bundle
	Failures *prometheus.CounterVec
	// ReportWrites counts the leader's writes of the trust-path
	// ClusterReport by result: created | updated | unchanged (a round that
	// changed no verdict: nothing written) | not-installed | error.
	ReportWrites *prometheus.CounterVec
	// Rounds counts the leader's completed probe rounds: a rate of 0 is a
	// prober that stopped, and a test can tell which round saw a change.
	Rounds prometheus.Counter
}

// NewProbe creates the prober's collectors and registers them with reg.
func NewProbe(reg prometheus.Registerer) *Probe {
	m := &Probe{
		Verified: gaugeVec("webhook_guard_trust_path_verified",
			"1 when a guarded entry's caBundle verified the certificate chain its endpoint served at the leader's last probe, 0 when it did not.",
			"kind", "configuration", "webhook"),
		Failures: counterVec("webhook_guard_trust_path_probe_failures_total",
			"Failed probes of guarded entries' trust paths, by entry and reason (unknown-authority, expired, name-mismatch, unreachable, no-endpoints, no-ca-bundle).",
			"kind", "configuration", "webhook", "reason"),
		ReportWrites: counterVec("webhook_guard_trust_path_report_writes_total",
			"Rounds of the leader's prober by what they did to the trust-path ClusterReport (created, updated, unchanged, not-installed, error).",
			"result"),
		Rounds: counter("webhook_guard_trust_path_probe_rounds_total",
			"Probe rounds the leader completed and reported (every guarded entry probed once each)."),
	}
	reg.MustRegister(m.Verified, m.Failures, m.ReportWrites, m.Rounds)
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
		ReportWrites: counterVec("webhook_guard_report_writes_total",
			"ClusterReport writes (create or update) by result: created, updated, conflict, error.",
			"result"),
		EventsEmitted: counterVec("webhook_guard_events_total",
			"Aggregated Kubernetes Events emitted on guarded configurations, by reason.",
			"reason"),
		DroppedResults: counter("webhook_guard_report_results_dropped_total",
			"Report results dropped (oldest first) to keep each ClusterReport within its bound."),
		AbandonedResults: counterVec("webhook_guard_report_results_abandoned_total",
			"Report results given up on because their ClusterReport could not be written, by reason: invalid (refused as invalid), attempts (failed too many flushes).",
			"reason"),
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
	// kube-apiserver refused (invalid, too large, forbidden).
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
	// WorstWriteCost is, for each webhook configuration a mapping names,
	// what the costlier of its owner's worst writes (a rotation's merge, an
	// ordinary write on merged bundles) costs kube-apiserver in the
	// mapping's policies, as a share of kube-apiserver's CEL cost limit: at
	// 1 kube-apiserver refuses the write. At the syncer's margin (0.8) the
	// mapping's policies are written with failurePolicy Ignore.
	//   mapping: the mapping
	//   configuration: Kind/name of the configuration
	// Set by the leader only; a series is deleted once its configuration
	// is no longer guarded.
	WorstWriteCost *prometheus.GaugeVec
}

// NewPolicySync creates the syncer's collectors, registers them with reg
// and initialises every series of Writes and Syncs to 0, so that "no
// writes" is visible on every replica, leaders and followers alike.
func NewPolicySync(reg prometheus.Registerer) *PolicySync {
	m := &PolicySync{
		Writes: counterVec("webhook_guard_policy_writes_total",
			"Writes of the policy shape's generated objects (ValidatingAdmissionPolicies and their bindings), by kind and verb.",
			"kind", "verb"),
		Syncs: counterVec("webhook_guard_policy_syncs_total",
			"Policy shape sync passes by result (success, error); only the leader syncs.",
			"result"),
		Refusals: counterVec("webhook_guard_policy_write_refusals_total",
			"Writes of a mapping's generated objects that kube-apiserver refused (invalid, too large, forbidden), by mapping.",
			"mapping"),
		Refused: gaugeVec("webhook_guard_policy_mapping_refused",
			"1 for each mapping whose generated objects kube-apiserver refused at the leader's last pass: its caBundle changes fail closed (ca-unavailable).",
			"mapping"),
		AnchorPresent: gaugeVec("webhook_guard_policy_anchor_present",
			"1 while the anchor ClusterRole that owns the generated objects exists, 0 when it is missing or being deleted (the generated objects are garbage collected). Set by the leader only.",
			"anchor"),
		Conflicts: counterVec("webhook_guard_policy_apply_conflicts_total",
			"Server-side apply conflicts of the guard's writes of its generated objects (another field manager changed a field the guard owns; the guard then applied with force), by mapping, kind and name.",
			"mapping", "kind", "name"),
		WorstWriteCost: gaugeVec("webhook_guard_policy_worst_write_cost_ratio",
			"What the costlier of the owner's worst writes (a rotation's merge, an ordinary write on merged bundles) costs kube-apiserver in the mapping's generated policies, as a share of its CEL cost limit (1: refused), by mapping and configuration (Kind/name). Set by the leader only.",
			"mapping", "configuration"),
	}
	reg.MustRegister(m.Writes, m.Syncs, m.Refusals, m.Refused, m.AnchorPresent, m.Conflicts, m.WorstWriteCost)
	for _, k := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		for _, v := range []string{VerbCreate, VerbUpdate, VerbDelete} {
			m.Writes.WithLabelValues(k, v)
		}
	}
	m.Syncs.WithLabelValues("success")
	m.Syncs.WithLabelValues("error")
	return m
}

// counterVec, gaugeVec, counter and gauge build a collector from its name,
// help and labels: every series here takes nothing else (only the
// histogram sets buckets).
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}
