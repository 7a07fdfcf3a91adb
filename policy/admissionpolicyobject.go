package policy

import (
	"fmt"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// The kinds of the policy shape's generated objects: ValidatingAdmissionPolicies
// and their bindings (admissionregistration.k8s.io/v1). Besides webhook
// configurations they are the only kinds the guard decides: the static
// webhook receives their writes because they are exempt from admission
// policies but not from static webhooks.
const (
	KindAdmissionPolicy        GuardedKind = "ValidatingAdmissionPolicy"
	KindAdmissionPolicyBinding GuardedKind = "ValidatingAdmissionPolicyBinding"
)

// IsAdmissionPolicyObject reports whether k is one of the policy shape's
// generated kinds rather than a webhook configuration.
func (k GuardedKind) IsAdmissionPolicyObject() bool {
	return k == KindAdmissionPolicy || k == KindAdmissionPolicyBinding
}

// RuleAdmissionPolicyObject: someone other than the guard and break-glass
// wrote one of the admission policies or bindings the policy shape generates.
const RuleAdmissionPolicyObject Rule = "policy-object"

// AdmissionPolicyObjectInput is a write of a ValidatingAdmissionPolicy or
// binding, as far as the decision reads it.
type AdmissionPolicyObjectInput struct {
	Operation Operation
	Kind      GuardedKind
	Name      string
	User      User
	DryRun    bool
	// Generated: the object before or after the write carries the guard's
	// managed-by label. Objects the guard did not generate are not its to
	// defend and are allowed.
	Generated bool
	// Writer is the guard's own username, the one subject besides
	// break-glass that may change generated objects; "" when not configured
	// (then only break-glass may).
	Writer string
}

// DecideAdmissionPolicyObject decides a write of a generated admission
// policy or binding: the guard and break-glass may, anyone else is denied.
// The static webhook's matchConditions already skip the guard and
// break-glass; deciding again here means a manifest rendered without them
// can never lock the guard out of its own objects. It is always enforced:
// there is no owner mapping, so no mode to audit in.
func (c *Mappings) DecideAdmissionPolicyObject(in *AdmissionPolicyObjectInput) Decision {
	d := newDecision(in.Operation, in.Kind, in.Name, in.User, in.DryRun)
	d.Mode, d.Rule = guardapi.ModeEnforce, RuleAdmissionPolicyObject
	switch {
	case !in.Generated:
		d.Mode, d.Outcome, d.Rule = "", OutcomeAllow, RuleNone
		return d
	case in.Writer != "" && in.User.Username == in.Writer:
		d.Outcome = OutcomeAllow
		return d
	case c.IsBreakGlass(in.User):
		d.Outcome = OutcomeBreakGlass
		d.Record = !in.DryRun
		return d
	}
	writer := in.Writer
	if writer == "" {
		writer = "the guard's service account"
	}
	d.Outcome = OutcomeDeny
	// Recorded like every denial: the report of the object says who tried.
	d.Record = !in.DryRun
	d.Violations = []Violation{{
		Rule:   RuleAdmissionPolicyObject,
		Detail: fmt.Sprintf("only %s may change the objects the policy shape generates (label %s)", writer, generatedLabel),
		Hint:   RuleAdmissionPolicyObject.Info().Hint,
	}}
	return d
}

// generatedLabel is how the policy shape marks what it generates (kept in step
// with policy/vap's LabelManagedBy and ManagedBy; vap imports this package).
const generatedLabel = "app.kubernetes.io/managed-by=webhook-guard"
