package policysync

import (
	"github.com/webhook-guard/webhook-guard/policy"
)

// warnWriteBudgets logs, once per mapping, that its writeBudget is not
// applied: kube-apiserver evaluates the generated policies' CEL with no
// state across requests, so it cannot count writes. Only the static
// shape's guard, which answers every write, applies a budget.
func (s *Syncer) warnWriteBudgets(cfg *policy.Mappings) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range cfg.Spec.Owners {
		o := &cfg.Spec.Owners[i]
		if o.WriteBudget == nil || s.budgetWarned[o.Name] {
			continue
		}
		s.budgetWarned[o.Name] = true
		s.Log.Info("policy mode: writeBudget is not applied (the generated policies keep no state across requests); run the static shape to limit caBundle writes",
			"mapping", o.Name, "perMinute", o.WriteBudget.PerMinute)
	}
}
