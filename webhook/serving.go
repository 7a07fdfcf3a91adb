package webhook

import (
	"time"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/webhook/probe"
)

// ProbedServing is the prober's last round as admission's policy.ServingCheck:
// a caBundle is compared with the chains the entry's endpoints served
// then, in memory (no network call inside admission).
type ProbedServing struct {
	Served *probe.Served
	// Now is the verification time; time.Now when nil.
	Now func() time.Time
}

// CheckServing implements policy.ServingCheck: the chains are verified for
// the server name the probe dialled, the stored entry's.
func (p ProbedServing) CheckServing(kind policy.GuardedKind, name string, entry policy.Entry) (verified, known bool, detail string) {
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	return p.Served.Check(probe.Key{Kind: string(kind), Configuration: name, Webhook: entry.Name}, entry.CABundle, now())
}
