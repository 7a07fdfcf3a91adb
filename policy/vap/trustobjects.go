package vap

import (
	"fmt"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap/vapname"
)

// The policies of a mapping's CRDs (their conversion webhook) and
// APIServices, one per kind: each object has one caBundle, so the checks
// are the webhook configurations' for a single entry, with the same rules
// as the static shape (policy.GuardedKind.OwnsTrustOnly): a subject that is
// not a writer may write the object as long as it leaves the trust alone.
// Where the owner's CA is a Secret key and the guard may read Secrets as
// params, the checks are split as the webhook configurations' are
// (policyPart, rotation.go): -crds decides not-owner and the entry rule,
// -crds-ca checks writers' caBundles against the Secret as its param, so
// that kube-apiserver sees a rotation as soon as the writer does and a
// missing Secret never switches not-owner off.

// trustKind is what differs between the two kinds in CEL.
type trustKind struct {
	kind   policy.GuardedKind
	suffix string
	names  func(m mappingPolicy) []string
	entry  func(obj string) string
	// bundle is the caBundle of obj, where entry is CEL that is true when
	// obj has the entry (k.entry(obj), or the variable that holds it).
	bundle   func(obj, entry string) string
	insecure func(obj string) string
	// sameEndpoint is CEL that is true when objects a and b, which both
	// have the entry, call the same endpoint.
	sameEndpoint   func(a, b string) string
	bundleField    string
	entryFieldName string
}

var trustKinds = []trustKind{
	{
		kind: policy.KindCRD, suffix: vapname.CRDSuffix,
		names: func(m mappingPolicy) []string { return m.owner.Match.CustomResourceDefinitions },
		entry: func(obj string) string {
			return fmt.Sprintf(`(%[1]s != null && has(%[1]s.spec.conversion) && has(%[1]s.spec.conversion.webhook))`, obj)
		},
		bundle: func(obj, entry string) string {
			return fmt.Sprintf(`(%[2]s && has(%[1]s.spec.conversion.webhook.clientConfig) && has(%[1]s.spec.conversion.webhook.clientConfig.caBundle) ? string(%[1]s.spec.conversion.webhook.clientConfig.caBundle) : "")`, obj, entry)
		},
		insecure:       func(string) string { return "false" },
		sameEndpoint:   crdSameEndpoint,
		bundleField:    "spec.conversion.webhook.clientConfig.caBundle",
		entryFieldName: policy.EntryConversion,
	},
	{
		kind: policy.KindAPIService, suffix: vapname.APIServiceSuffix,
		names: func(m mappingPolicy) []string { return m.owner.Match.APIServices },
		entry: func(obj string) string { return fmt.Sprintf(`(%[1]s != null && has(%[1]s.spec.service))`, obj) },
		// The caBundle stands beside the service, not in it.
		bundle: func(obj, _ string) string {
			return fmt.Sprintf(`(%[1]s != null && has(%[1]s.spec.caBundle) ? string(%[1]s.spec.caBundle) : "")`, obj)
		},
		insecure: func(obj string) string {
			return fmt.Sprintf(`(%[1]s != null && has(%[1]s.spec.insecureSkipTLSVerify) && %[1]s.spec.insecureSkipTLSVerify)`, obj)
		},
		sameEndpoint:   apiServiceSameEndpoint,
		bundleField:    "spec.caBundle",
		entryFieldName: policy.EntryService,
	},
}

// buildTrust is the policy and binding of one part of the mapping's
// objects of kind k.
func (m mappingPolicy) buildTrust(k trustKind, part policyPart) (*admv1.ValidatingAdmissionPolicy, *admv1.ValidatingAdmissionPolicyBinding) {
	name := PolicyName(m.owner.Name) + k.suffix + part.suffix()
	info, _ := guardapi.KindInfoOf(string(k.kind))
	conds := []admv1.MatchCondition{{Name: "owned-object", Expression: RequestName + " in " + celList(k.names(m))}}
	if bg, ok := SubjectsExpression(m.spec.BreakGlass); ok {
		conds = append(conds, admv1.MatchCondition{Name: "not-break-glass", Expression: "!(" + bg + ")"})
	}
	p := &admv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: Labels(m.owner.Name)},
		Spec: admv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{},
				ObjectSelector:    &metav1.LabelSelector{},
				ResourceRules: []admv1.NamedRuleWithOperations{{RuleWithOperations: admv1.RuleWithOperations{
					Operations: []admv1.OperationType{admv1.Create, admv1.Update, admv1.Delete},
					Rule: admv1.Rule{
						APIGroups: []string{info.Group}, APIVersions: []string{info.Version}, Resources: []string{info.Resource},
						Scope: ptr.To(admv1.AllScopes),
					},
				}}},
				MatchPolicy: ptr.To(admv1.Equivalent),
			},
			ParamKind:       m.rotation.paramKind(part),
			FailurePolicy:   ptr.To(admv1.Fail),
			MatchConditions: conds,
			Variables:       m.trustVariables(k, part),
			Validations:     m.trustValidations(k, part),
		},
	}
	return p, m.binding(name, m.rotation.paramRef(part))
}

// trustVariables are the single entry's: its caBundle before and after as
// base64 text ("" for none), whether the write changes the trust, and the
// rotation rule's variables.
func (m mappingPolicy) trustVariables(k trustKind, part policyPart) []admv1.Variable {
	vars := append(m.subjectVariables(),
		// Whether the object has the entry (a CRD's conversion webhook,
		// an APIService's service), and whether the stored one had it:
		// read by the entry rule, the endpoint rule and a removal.
		admv1.Variable{Name: "hasEntry", Expression: k.entry("object")},
		admv1.Variable{Name: "hadEntry", Expression: k.entry("oldObject")},
		admv1.Variable{Name: "bundle", Expression: `request.operation == "DELETE" ? "" : ` + k.bundle("object", "variables.hasEntry")},
		admv1.Variable{Name: "oldBundle", Expression: `request.operation == "UPDATE" ? ` + k.bundle("oldObject", "variables.hadEntry") + ` : ""`},
		admv1.Variable{Name: "insecure", Expression: `request.operation != "DELETE" && ` + k.insecure("object") + ` && !(request.operation == "UPDATE" && ` + k.insecure("oldObject") + `)`},
		// A DELETE trusts nobody; any other write that changes the
		// caBundle or sets insecureSkipTLSVerify changes the trust.
		admv1.Variable{Name: "changesTrust", Expression: `request.operation != "DELETE" && (variables.bundle != variables.oldBundle || variables.insecure)`},
		// An entry without a caBundle that was not stored (the entry
		// rule): kube-apiserver would trust its system roots.
		admv1.Variable{Name: "unfilled", Expression: `variables.hasEntry && variables.bundle == "" && !variables.hadEntry`},
	)
	if part != partOwner {
		vars = append(vars, m.rotation.variables(part)...)
	}
	if part == partCA {
		return vars
	}
	vars = append(vars, m.pointerVariables()...)
	return append(vars,
		admv1.Variable{Name: "endpointMoves", Expression: k.endpointMoves()},
		// What a subject that is no writer may not do (rule 1 of the
		// trust): change the caBundle or set insecureSkipTLSVerify, move
		// the endpoint, or move the CA pointer off the mapping's pin.
		admv1.Variable{Name: "movesTrust", Expression: `variables.changesTrust || variables.endpointMoves || variables.pointerMoves`},
		admv1.Variable{Name: "fillComing", Expression: m.fillComing()},
	)
}

// trustValidations: not-owner for a non-writer's trust change, the entry
// rule for everyone, and the rotation rule for a writer's.
func (m mappingPolicy) trustValidations(k trustKind, part policyPart) []admv1.Validation {
	// A non-writer whose write moves the trust is denied not-owner alone,
	// as in the static shape.
	fill := `(!variables.isWriter && variables.movesTrust) || !variables.unfilled || variables.fillComing`
	orLiteral := ""
	if part == partCA && len(m.ca.PEM) > 0 {
		// The CA the guard last synced, which a writer may still write.
		orLiteral = ` || variables.bundle == ` + m.rotation.synced(part)
	}
	allowed := `(variables.ca != "" && !variables.insecure && variables.bundle != "" && (variables.bundle == variables.ca` + orLiteral + ` || ` +
		mergedAfterOf("variables.oldBundle", "variables.bundle") + `))`
	// A writer that removes the entry (a CRD's conversion webhook, an
	// APIService's service) takes the trust away: kube-apiserver no longer
	// calls anything for it.
	removed := `(!variables.insecure && !variables.hasEntry)`
	caCheck := admv1.Validation{
		Expression:        `!variables.isWriter || !variables.changesTrust || ` + removed + ` || ` + allowed,
		Message:           m.caMismatchFallback(),
		MessageExpression: m.trustMismatchMessage(k),
		Reason:            ptr.To(metav1.StatusReasonForbidden),
	}
	if part == partCA {
		return []admv1.Validation{caCheck}
	}
	out := []admv1.Validation{
		{
			Expression:        `variables.isWriter || !variables.movesTrust`,
			Message:           fallbackMessage(policy.RuleNotOwner, m.owner.Name),
			MessageExpression: m.notOwnerMessage(),
			Reason:            ptr.To(metav1.StatusReasonForbidden),
		},
		{
			Expression:        fill,
			Message:           fallbackMessage(policy.RuleCAMismatch, m.owner.Name),
			MessageExpression: m.prefix() + ` + ` + CELString(fmt.Sprintf("%s: %s: the %s entry has no caBundle (kube-apiserver would trust its system roots for it); hint: %s", policy.RuleCAMismatch, k.bundleField, k.entryFieldName, policy.UnfilledHint)),
			Reason:            ptr.To(metav1.StatusReasonForbidden),
		},
	}
	if m.injected() {
		out = append(out, m.pointerValidation())
	}
	if part == partAll {
		out = append(out, caCheck)
	}
	return out
}

func (m mappingPolicy) trustMismatchMessage(k trustKind) string {
	if len(m.ca.PEM) == 0 {
		reason := m.unresolvedReason()
		return m.prefix() + ` + ` + CELString(fmt.Sprintf("%s: %s cannot be verified: the guard could not resolve the owner's CA (%s); caBundle changes fail closed until the source can be read; hint: %s",
			policy.RuleCAUnavailable, k.bundleField, reason, policy.RuleCAUnavailable.Info().Hint))
	}
	return m.prefix() + ` + ` + CELString(fmt.Sprintf("%s: %s is neither the owner's CA from %s [expected CA %s] as its source holds it, nor the stored caBundle followed by it, or it was emptied or insecureSkipTLSVerify set; "+
		"hint: write the owner's CA exactly as its source holds it, or append it to the stored caBundle as cert-manager's cainjector does (policy shape compares bytes, it cannot parse PEM)",
		policy.RuleCAMismatch, k.bundleField, m.ca.Source, joinShort(m.ca.Fingerprints)))
}
