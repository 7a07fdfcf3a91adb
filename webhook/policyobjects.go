package webhook

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// Kinds of policy mode's generated objects. Where the static webhook is
// installed with `render static-manifest --guard-service-account`, it also
// receives writes of ValidatingAdmissionPolicies and bindings labelled
// app.kubernetes.io/managed-by=webhook-guard by anyone but the guard and
// break-glass (its objectSelector and matchConditions), because VAP objects
// are exempt from VAP but not from static webhooks.
const (
	kindPolicy        = "ValidatingAdmissionPolicy"
	kindPolicyBinding = "ValidatingAdmissionPolicyBinding"
)

// RulePolicyObject is the rule label of decisions about policy mode's
// generated objects.
const RulePolicyObject policy.Rule = "policy-object"

// isPolicyObject reports whether the request is about a ValidatingAdmissionPolicy
// or binding: the only kinds besides webhook configurations the guard
// decides. Everything else is still rejected by DecodeInput with a 400.
func isPolicyObject(req *admissionv1.AdmissionRequest) bool { return isPolicyKind(req.Kind) }

// handlePolicyObject denies a write of a generated policy object by anyone
// but the guard (PolicyWriter) and break-glass. The static webhook's
// matchConditions already skip those two; the handler checks again so that
// a manifest rendered without them can never lock the guard out of its own
// objects. Objects the guard did not generate (no managed-by label on the
// old or the new object) are allowed: they are not the guard's to defend.
func (h *Handler) handlePolicyObject(ctx context.Context, req *admissionv1.AdmissionRequest) admission.Response {
	var labelled bool
	for _, raw := range [][]byte{req.Object.Raw, req.OldObject.Raw} {
		if len(raw) == 0 {
			continue
		}
		var obj webhookConfiguration // its metadata is all a policy object is read for
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &obj); err != nil {
			h.Metrics.InvalidRequests.Inc()
			return admission.Errored(http.StatusBadRequest, inputErrorf("%s does not decode: %v", req.Kind.Kind, err))
		}
		labelled = labelled || managedByGuard(&obj)
	}
	user := policy.User{Username: req.UserInfo.Username, Groups: req.UserInfo.Groups}
	return h.policyObjectDecision(ctx, string(req.Operation), req.Kind.Kind, req.Name, user, labelled)
}

// isPolicyKind is isPolicyObject for a kind (ReviewHandler's decoded request).
func isPolicyKind(k metav1.GroupVersionKind) bool {
	return k.Group == guardedGroup && k.Version == guardedVersion && (k.Kind == kindPolicy || k.Kind == kindPolicyBinding)
}

// managedByGuard reports whether a decoded object carries the guard's label.
func managedByGuard(obj *webhookConfiguration) bool {
	return obj != nil && obj.Metadata.Labels[vap.LabelManagedBy] == vap.ManagedBy
}

// policyObjectDecision is the decision of handlePolicyObject, shared by
// the generic path and ReviewHandler.
func (h *Handler) policyObjectDecision(ctx context.Context, operation, kind, name string, user policy.User, labelled bool) admission.Response {
	log := requestLog(ctx)
	cfg := h.Config.Current()
	switch {
	case !labelled:
		return h.policyObjectVerdict(policy.OutcomeAllow, nil)
	case h.PolicyWriter != "" && user.Username == h.PolicyWriter:
		return h.policyObjectVerdict(policy.OutcomeAllow, nil)
	case cfg != nil && cfg.IsBreakGlass(user):
		return h.policyObjectVerdict(policy.OutcomeBreakGlass, nil)
	}
	writer := h.PolicyWriter
	if writer == "" {
		writer = "the guard's service account"
	}
	msg := fmt.Sprintf("webhook-guard denied %s of %s %q by %q: %s: only %s may change the objects policy mode generates (label %s=%s); hint: change the owner mappings in the GuardConfig instead, the guard regenerates them",
		operation, kind, name, user.Username, RulePolicyObject, writer, vap.LabelManagedBy, vap.ManagedBy)
	log.Info("deny", "rule", RulePolicyObject, "subject", user.Username, "message", msg)
	return h.policyObjectVerdict(policy.OutcomeDeny, &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: msg})
}

func (h *Handler) policyObjectVerdict(outcome policy.Outcome, denial *metav1.Status) admission.Response {
	h.Metrics.Decisions.WithLabelValues("", string(RulePolicyObject), string(outcome)).Inc()
	if denial == nil {
		return admission.Allowed("")
	}
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: denial}}
}
