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
	reg.MustRegister(m.Writes, m.Syncs)
	for _, k := range []string{kindAdmissionPolicy, kindAdmissionPolicyBinding} {
		for _, v := range []string{VerbCreate, VerbUpdate, VerbDelete} {
			m.Writes.WithLabelValues(k, v)
		}
	}
	m.Syncs.WithLabelValues("success")
	m.Syncs.WithLabelValues("error")
	return m
}
