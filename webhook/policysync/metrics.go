package policysync

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhook-guard/webhook-guard/policy"
)

// Kinds and verbs of Metrics.Writes.
const (
	kindAdmissionPolicy        = string(policy.KindAdmissionPolicy)
	kindAdmissionPolicyBinding = string(policy.KindAdmissionPolicyBinding)

	VerbCreate = "create"
	VerbUpdate = "update"
	VerbDelete = "delete"
)

// Metrics are the syncer's collectors.
type Metrics struct {
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

// NewMetrics creates the collectors, registers them with reg and
// initialises every series to 0, so that "no writes" is visible on every
// replica, leaders and followers alike.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_guard_policy_writes_total",
			Help: "Writes of policy mode's generated objects (ValidatingAdmissionPolicies and their bindings), by kind and verb.",
		}, []string{"kind", "verb"}),
		Syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_guard_policy_syncs_total",
			Help: "Policy mode sync passes by result (success, error); only the leader syncs.",
		}, []string{"result"}),
	}
	m.Refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhook_guard_policy_write_refusals_total",
		Help: "Writes of a mapping's generated objects that kube-apiserver refused (invalid, too large, forbidden, a name taken by a foreign object), by mapping.",
	}, []string{"mapping"})
	m.Refused = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "webhook_guard_policy_mapping_refused",
		Help: "1 for each mapping whose generated objects kube-apiserver refused at the leader's last pass: its caBundle changes fail closed (ca-unavailable).",
	}, []string{"mapping"})
	m.AnchorPresent = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "webhook_guard_policy_anchor_present",
		Help: "1 while the anchor ClusterRole that owns the generated objects exists, 0 when it is missing or being deleted (the generated objects are garbage collected). Set by the leader only.",
	}, []string{"anchor"})
	m.Conflicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhook_guard_policy_apply_conflicts_total",
		Help: "Server-side apply conflicts of the guard's writes of its generated objects (another field manager changed a field the guard owns; the guard then applied with force), by mapping, kind and name.",
	}, []string{"mapping", "kind", "name"})
	reg.MustRegister(m.Writes, m.Syncs, m.Refusals, m.Refused, m.AnchorPresent, m.Conflicts)
	for _, k := range []string{kindAdmissionPolicy, kindAdmissionPolicyBinding} {
		for _, v := range []string{VerbCreate, VerbUpdate, VerbDelete} {
			m.Writes.WithLabelValues(k, v)
		}
	}
	m.Syncs.WithLabelValues("success")
	m.Syncs.WithLabelValues("error")
	return m
}
