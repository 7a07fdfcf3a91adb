package static

import (
	"fmt"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// Manifest is the static ValidatingWebhookConfiguration as the YAML file
// kube-apiserver loads from its staticManifestsDir.
func Manifest(in Input) ([]byte, error) {
	vwc, err := ValidatingWebhookConfiguration(in)
	if err != nil {
		return nil, err
	}
	return yaml.Marshal(vwc)
}

// ValidatingWebhookConfiguration is the static ValidatingWebhookConfiguration:
// the enforcing entry, with break-glass subjects excluded and sent to a
// fail-open entry of their own, and with Input.GuardServiceAccount the
// entry guarding the policy shape's generated objects.
func ValidatingWebhookConfiguration(in Input) (*admv1.ValidatingWebhookConfiguration, error) {
	if errs := in.validate(); len(errs) > 0 {
		return nil, fmt.Errorf("static webhook: %w", errs.ToAggregate())
	}
	vwc := &admv1.ValidatingWebhookConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   ConfigName,
			Labels: map[string]string{"app.kubernetes.io/name": "webhook-guard", "app.kubernetes.io/managed-by": "webhook-guard-render"},
		},
		Webhooks: []admv1.ValidatingWebhook{guardEntry(in)},
	}
	if expr, ok := vap.SubjectsExpression(in.BreakGlass); ok {
		vwc.Webhooks[0].MatchConditions = append(vwc.Webhooks[0].MatchConditions, admv1.MatchCondition{Name: "not-break-glass", Expression: "!(" + expr + ")"})
		vwc.Webhooks = append(vwc.Webhooks, breakGlassEntry(in, expr))
	}
	// On the enforcing entry alone: break-glass writes are always sent
	// to their own entry, to be warned about and recorded.
	if in.Skip != nil {
		cond, err := in.Skip.condition()
		if err != nil {
			return nil, fmt.Errorf("static webhook: %w", err)
		}
		if cond != "" {
			vwc.Webhooks[0].MatchConditions = append(vwc.Webhooks[0].MatchConditions, admv1.MatchCondition{Name: SkipConditionName, Expression: cond})
		}
	}
	if in.GuardServiceAccount != "" {
		vwc.Webhooks = append(vwc.Webhooks, policyObjectsEntry(in))
	}
	return vwc, nil
}

// guardEntry is the enforcing entry: writes of webhook configurations, with
// the caller's failure policy. The other entries start from it, each from
// its own copy, so that changing one entry of the result never changes
// another through a shared pointer.
func guardEntry(in Input) admv1.ValidatingWebhook {
	url := in.URL
	fp := in.FailurePolicy
	timeout := in.TimeoutSeconds
	sideEffects := admv1.SideEffectClassNoneOnDryRun
	matchPolicy := admv1.Equivalent
	return admv1.ValidatingWebhook{
		Name:                    WebhookName,
		AdmissionReviewVersions: []string{"v1"},
		ClientConfig:            admv1.WebhookClientConfig{URL: &url, CABundle: in.CABundle},
		Rules:                   append(wholeObjectRules(), in.trustObjectRules()...),
		MatchConditions:         in.trustObjectConditions(),
		FailurePolicy:           &fp,
		MatchPolicy:             &matchPolicy,
		SideEffects:             &sideEffects,
		TimeoutSeconds:          &timeout,
	}
}

// breakGlassEntry sends break-glass writes to the guard through an entry
// that fails open: while the guard is up they are warned about and
// recorded; while it is down they pass. That is how "always allowed, always
// recorded" and "never locked out by a guard outage" both hold.
func breakGlassEntry(in Input, breakGlass string) admv1.ValidatingWebhook {
	e := guardEntry(in)
	e.Name = BreakGlassWebhookName
	ignore := admv1.Ignore
	e.FailurePolicy = &ignore
	e.MatchConditions = append(e.MatchConditions, admv1.MatchCondition{Name: "break-glass", Expression: breakGlass})
	return e
}

// policyObjectsEntry lets only the guard change the objects the policy shape
// generates. ValidatingAdmissionPolicies and their bindings are exempt from
// ValidatingAdmissionPolicy but not from static webhooks: where the static
// webhook is installed, deleting a generated binding (the way to switch
// the policy shape off) is a guarded write like any other. The objectSelector
// (evaluated on the old and the new object) sends only objects labelled
// app.kubernetes.io/managed-by=webhook-guard, and matchConditions skip the
// guard's own writes and break-glass subjects, so kube-apiserver calls the
// guard only for the writes it denies.
func policyObjectsEntry(in Input) admv1.ValidatingWebhook {
	e := guardEntry(in)
	e.Name = PolicyObjectsWebhookName
	e.Rules = writesOf("validatingadmissionpolicies", "validatingadmissionpolicybindings")
	e.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{vap.LabelManagedBy: vap.ManagedBy}}
	e.MatchConditions = []admv1.MatchCondition{{Name: "not-the-guard", Expression: "request.userInfo.username != " + vap.CELString(guardapi.ServiceAccountUsername(in.GuardServiceAccount))}}
	if expr, ok := vap.SubjectsExpression(in.BreakGlass); ok {
		e.MatchConditions = append(e.MatchConditions, admv1.MatchCondition{Name: "not-break-glass", Expression: "!(" + expr + ")"})
	}
	return e
}

// wholeObjectRules are the rules of the kinds of guardapi.Kinds whose
// objects a mapping owns whole, the webhook configurations: every write of
// every object of them, so that `unmanaged: audit` sees each. One rule per
// group, in Kinds' order.
func wholeObjectRules() []admv1.RuleWithOperations {
	var out []admv1.RuleWithOperations
	for _, info := range guardapi.Kinds {
		switch n := len(out); {
		case info.OwnsTrustOnly:
		case n > 0 && out[n-1].APIGroups[0] == info.Group:
			out[n-1].Resources = append(out[n-1].Resources, info.Resource)
		default:
			out = append(out, writesIn(info.Group, info.Resource))
		}
	}
	return out
}

// writesOf is every write of the given cluster-scoped
// admissionregistration.k8s.io/v1 resources.
func writesOf(resources ...string) []admv1.RuleWithOperations {
	return []admv1.RuleWithOperations{writesIn("admissionregistration.k8s.io", resources...)}
}

// writesIn is every write of the given cluster-scoped resources of group's v1.
func writesIn(group string, resources ...string) admv1.RuleWithOperations {
	scope := admv1.ClusterScope
	return admv1.RuleWithOperations{
		Operations: []admv1.OperationType{admv1.Create, admv1.Update, admv1.Delete},
		Rule: admv1.Rule{
			APIGroups:   []string{group},
			APIVersions: []string{"v1"},
			Resources:   resources,
			Scope:       &scope,
		},
	}
}
