package policysync

import (
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// warnStaticOnly logs, once per mapping and field, the settings the policy
// shape does not apply: a writeBudget (kube-apiserver evaluates the
// generated policies' CEL with no state across requests, so it cannot
// count writes) and verifyServing: deny (the CEL sees no probe of what an
// endpoint serves). Only the static shape's guard, which answers every
// write, applies them.
func (s *Syncer) warnStaticOnly(cfg *policy.Mappings) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range cfg.Spec.Owners {
		o := &cfg.Spec.Owners[i]
		if o.WriteBudget != nil && !s.staticOnlyWarned["writeBudget/"+o.Name] {
			s.staticOnlyWarned["writeBudget/"+o.Name] = true
			s.Log.Info("policy shape: writeBudget is not applied (the generated policies keep no state across requests); run the static shape to limit caBundle writes",
				"mapping", o.Name, "perMinute", o.WriteBudget.PerMinute)
		}
		if o.VerifyServing == guardapi.VerifyServingDeny && !s.staticOnlyWarned["verifyServing/"+o.Name] {
			s.staticOnlyWarned["verifyServing/"+o.Name] = true
			s.Log.Info("policy shape: verifyServing: deny is not applied (the generated policies see no probe); the probe series still report what each endpoint serves",
				"mapping", o.Name)
		}
	}
}
