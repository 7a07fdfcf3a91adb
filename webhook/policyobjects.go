package webhook

import (
	"context"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/webhook-guard/webhook-guard/policy"
)

// decideAdmissionPolicyObject decides a write of one of the policy shape's
// generated ValidatingAdmissionPolicies or bindings. Where the static
// webhook is installed with `render static-manifest
// --guard-service-account`, it also receives those writes (labelled
// app.kubernetes.io/managed-by=webhook-guard, by anyone but the guard and
// break-glass), because admission policy objects are exempt from admission
// policies but not from static webhooks. The decision is policy's; it is
// observed like every other.
func (h *Handler) decideAdmissionPolicyObject(ctx context.Context, in *policy.AdmissionPolicyObjectInput) (policy.Decision, admissionv1.AdmissionResponse) {
	start := time.Now()
	d := h.Config.Current().DecideAdmissionPolicyObject(in)
	h.Metrics.DecisionDuration.WithLabelValues(string(d.Outcome)).Observe(time.Since(start).Seconds())
	h.observe(ctx, &d)
	return d, Response(&d)
}
