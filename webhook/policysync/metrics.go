package policysync

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/webhook/metrics"
)

// Kinds and verbs of Metrics.Writes.
const (
	kindAdmissionPolicy        = string(policy.KindAdmissionPolicy)
	kindAdmissionPolicyBinding = string(policy.KindAdmissionPolicyBinding)

	VerbCreate = metrics.VerbCreate
	VerbUpdate = metrics.VerbUpdate
	VerbDelete = metrics.VerbDelete
)

// Metrics are the syncer's collectors, defined with every other series the
// guard exports in webhook/metrics.
type Metrics = metrics.PolicySync

// NewMetrics creates the syncer's collectors, registers them with reg and
// initialises every series of Writes and Syncs to 0.
func NewMetrics(reg prometheus.Registerer) *Metrics { return metrics.NewPolicySync(reg) }
