// Package vap generates the policy shape: the ValidatingAdmissionPolicies and
// bindings that enforce a GuardConfig's owner mappings inside
// kube-apiserver, with CEL, where the static webhook cannot
// be installed (managed control planes): kube-apiserver evaluates
// ValidatingAdmissionPolicies for webhook configuration objects, while it
// never calls API-registered webhooks for them (docs/policy-shape.md).
//
// The generator is pure: a loaded *policy.Mappings and each mapping's resolved
// CA bytes in, typed objects out. `webhook-guard render policy` prints them;
// `webhook-guard serve --policy-mode` keeps them in step with the cluster.
//
// What CEL cannot express, compared with the webhook (docs/policy-shape.md
// has the one table of the differences that remain, which Test_shapeParity
// holds the two shapes to):
//   - PEM parsing. A changed caBundle must equal the owner's CA bytes exactly
//     (held in the policy itself): a rotation bundle holding old+new,
//     a re-encoded PEM, extra whitespace or a different certificate order
//     is a ca-mismatch here although the webhook would allow it.
//   - Live re-reads. The policy compares with the CA as the guard last
//     wrote it into the policy; a caBundle written with a new CA before the guard
//     has copied the rotated CA source (within --policy-sync-interval) is
//     denied, and the owner's retry succeeds.
//   - Fingerprints of what was found: the denial names the expected CA
//     fingerprints and the webhook entries, not the found one.
//   - Flapping detection, records and `review`: kube-apiserver's audit log
//     (validationActions Audit) is the only record.
//   - Break-glass writes pass silently (matchConditions skip them); the
//     webhook warns about and records them.
//   - injectedByCertManager without a pin: the CA is the one the mapping's
//     named configurations' inject-ca-from annotation points at when the
//     guard synced, not the one in the annotation of the request (which a
//     writer may not change anyway, pointer.go); a pinned CA is read from
//     the pin in both shapes.
//   - Ambiguous owners: two mappings whose selectors match one configuration
//     are both enforced (each mapping's writers are denied by the other's
//     policy), instead of an ambiguous-owner decision.
//   - unmanaged: audit has no equivalent.
//
// The owner's CA is a literal in the policy rather than in a param object.
// kube-apiserver cannot run a policy whose param is missing: a binding's
// parameterNotFoundAction either fails it for every request it matches
// (unrelated configurations and break-glass included) or skips it (the
// mapping goes unenforced). Either way the policy's safety would hang on an
// object in the guard's namespace that others may delete. With the CA in the
// policy, a mapping's decisions live in its own policy and binding, and an
// unreadable CA source fails closed on caBundle changes and nothing else.
package vap

import (
	"fmt"
	"slices"
	"strings"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/policy/vap/vapname"
)

// Labels on every generated object, so the guard finds (and deletes) what
// it generated, and nothing else.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "webhook-guard"
	LabelMapping   = "webhook-guard.io/mapping"
)

// NamePrefix starts every generated name.
const NamePrefix = vapname.Prefix

// CA is one mapping's resolved CA.
type CA struct {
	// PEM is the owner's CA bytes exactly as its source holds them; nil when
	// the source could not be resolved (caBundle changes then fail closed).
	// The policy holds them, and compares each changed caBundle with them.
	PEM []byte
	// Source describes where PEM was read.
	Source string
	// Fingerprints are the short fingerprints of PEM's certificates.
	Fingerprints []string
	// Err says why the CA could not be resolved.
	Err string
	// Param is the Secret key the CA was read from, if any. A policy of its
	// own then reads that key as its param, so that kube-apiserver sees a
	// rotation of the Secret as soon as the writer does (see rotation.go).
	Param *guardapi.KeyRef
	// ParamMissing says the Param's Secret does not exist: kube-apiserver
	// skips a binding whose param is missing, so the mapping's main policy
	// then checks caBundles itself, against the literal.
	ParamMissing bool
	// Pointers are the CA pointers (cainjector's annotations) of the
	// objects an unpinned injectedByCertManager CA was resolved from. An
	// entry may stay empty for cainjector only on an object pointing at
	// one of them: a pointer the guard did not resolve (a Certificate that
	// does not exist) would leave the entry empty for good (pointer.go).
	Pointers []policy.Pointer
}

// CAFromSet builds a CA from a resolved set.
func CAFromSet(set cabundle.CASet) CA {
	ca := CA{PEM: set.PEM(), Source: set.Source, Fingerprints: set.Short()}
	if k := set.Secret(); k != nil {
		ca.Param = &guardapi.KeyRef{Namespace: k.Namespace, Name: k.Name, Key: k.Key}
	}
	return ca
}

// CAFromError builds an unresolved CA.
func CAFromError(err error) CA { return CA{Err: err.Error()} }

// Input is what the generator needs.
type Input struct {
	Config *policy.Mappings
	// CAs are the mappings' CAs, by mapping name. A mapping without an entry
	// is generated with no CA (caBundle changes fail closed).
	CAs map[string]CA
	// Anchor, when set, becomes an owner reference of every generated
	// object: a cluster-scoped object that uninstalling the guard deletes
	// (the chart's anchor ClusterRole), so that kube-apiserver's garbage
	// collector removes the policies and bindings with it and nothing the
	// guard generated can deny a write after it is gone.
	Anchor *metav1.OwnerReference
}

// AnchorReference is the owner reference to the anchor ClusterRole name
// whose uid is uid. It neither blocks the anchor's deletion nor claims to be
// a controller: it only ties the generated objects' lifetime to it.
func AnchorReference(name string, uid types.UID) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: name, UID: uid}
}

// Objects are the generated objects, each list sorted by name.
type Objects struct {
	Policies []*admv1.ValidatingAdmissionPolicy
	Bindings []*admv1.ValidatingAdmissionPolicyBinding
}

// PolicyName is the policy and binding name of a mapping. The naming rule
// lives in package vapname, which policy.Load uses to refuse two mappings
// generating one name.
func PolicyName(mapping string) string { return vapname.ForMapping(mapping) }

// caSuffix names the policy of a mapping that checks caBundles against its
// CA Secret, read as the policy's param (rotation.go).
const caSuffix = vapname.CASuffix

// CAPolicyName is the name of the policy that checks the caBundles of the
// policy (or binding) name against the CA Secret it reads as its param.
func CAPolicyName(name string) string { return vapname.CAPolicy(name) }

// PolicyNames are every policy (and binding) name a mapping may generate.
func PolicyNames(mapping string) []string { return vapname.AllForMapping(mapping) }

// Generate builds the objects for every mapping.
func Generate(in Input) (*Objects, error) {
	if in.Config == nil {
		return nil, fmt.Errorf("no configuration")
	}
	spec := &in.Config.Spec
	out := &Objects{}
	// generatedBy remembers which mapping generated each object, so that
	// two mappings can never share one (mapping "app" with names and a
	// selector, and a mapping "app-selected", would otherwise take turns
	// writing webhook-guard-app-selected).
	generatedBy := map[string]string{}
	for i := range spec.Owners {
		o := &spec.Owners[i]
		for _, name := range PolicyNames(o.Name) {
			if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
				return nil, fmt.Errorf("owners[%s]: generated name %q: %s", o.Name, name, strings.Join(msgs, "; "))
			}
		}
		objs, err := generateMapping(spec, o, in.CAs, generatedBy)
		if err != nil {
			return nil, err
		}
		out.Policies, out.Bindings = append(out.Policies, objs.Policies...), append(out.Bindings, objs.Bindings...)
	}
	if in.Anchor != nil {
		for _, o := range out.Policies {
			o.OwnerReferences = []metav1.OwnerReference{*in.Anchor}
		}
		for _, o := range out.Bindings {
			o.OwnerReferences = []metav1.OwnerReference{*in.Anchor}
		}
	}
	slices.SortFunc(out.Policies, func(a, b *admv1.ValidatingAdmissionPolicy) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(out.Bindings, func(a, b *admv1.ValidatingAdmissionPolicyBinding) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Labels are the labels of a generated object; mapping may be empty.
func Labels(mapping string) map[string]string {
	l := map[string]string{LabelManagedBy: ManagedBy}
	if mapping != "" {
		l[LabelMapping] = labelValue(mapping)
	}
	return l
}

// labelValue fits a mapping name (a DNS subdomain, up to 253 characters)
// into a label value (up to 63).
func labelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	return strings.Trim(s[:63], ".-_")
}

// mappingPolicy builds the policy of one mapping.
type mappingPolicy struct {
	spec     *guardapi.GuardConfig
	owner    *guardapi.Owner
	mode     guardapi.Mode
	ca       CA
	rotation rotation
}

func (m mappingPolicy) build(name string, selector *metav1.LabelSelector, part policyPart) (*admv1.ValidatingAdmissionPolicy, *admv1.ValidatingAdmissionPolicyBinding) {
	o := m.owner
	var resources []string
	var nameConds []string
	if selector != nil {
		resources = []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}
	} else {
		if len(o.Match.Mutating) > 0 {
			resources = append(resources, "mutatingwebhookconfigurations")
			nameConds = append(nameConds, namesOfKind("MutatingWebhookConfiguration", o.Match.Mutating))
		}
		if len(o.Match.Validating) > 0 {
			resources = append(resources, "validatingwebhookconfigurations")
			nameConds = append(nameConds, namesOfKind("ValidatingWebhookConfiguration", o.Match.Validating))
		}
	}
	objectSelector := &metav1.LabelSelector{}
	if selector != nil {
		objectSelector = selector.DeepCopy()
	}
	var conds []admv1.MatchCondition
	if len(nameConds) > 0 {
		conds = append(conds, admv1.MatchCondition{Name: "owned-configuration", Expression: ownedName(nameConds)})
	}
	if keeps, ok := m.writerKeepsTrust(part); ok {
		conds = append(conds, admv1.MatchCondition{Name: "changes-trust", Expression: keeps})
	}
	if bg, ok := SubjectsExpression(m.spec.BreakGlass); ok {
		// Break-glass is always allowed, as the static webhook's
		// matchConditions skip it; unlike the webhook, nothing warns.
		conds = append(conds, admv1.MatchCondition{Name: "not-break-glass", Expression: "!(" + bg + ")"})
	}
	p := &admv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: Labels(o.Name)},
		Spec: admv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{},
				ObjectSelector:    objectSelector,
				ResourceRules: []admv1.NamedRuleWithOperations{{RuleWithOperations: admv1.RuleWithOperations{
					Operations: []admv1.OperationType{admv1.Create, admv1.Update, admv1.Delete},
					Rule: admv1.Rule{
						APIGroups:   []string{"admissionregistration.k8s.io"},
						APIVersions: []string{"v1"},
						Resources:   resources,
						Scope:       ptr.To(admv1.AllScopes),
					},
				}}},
				MatchPolicy: ptr.To(admv1.Equivalent),
			},
			ParamKind: m.rotation.paramKind(part),
			// An expression that errors denies (enforce) or is audited
			// (audit): fail closed.
			FailurePolicy:   ptr.To(admv1.Fail),
			MatchConditions: conds,
			Variables:       m.variables(part),
			Validations:     m.validations(part),
		},
	}
	return p, m.binding(name, m.rotation.paramRef(part))
}

// binding binds the policy name with the mapping's mode: Deny in enforce,
// Warn and Audit in audit.
func (m mappingPolicy) binding(name string, param *admv1.ParamRef) *admv1.ValidatingAdmissionPolicyBinding {
	actions := []admv1.ValidationAction{admv1.Deny}
	if m.mode == guardapi.ModeAudit {
		actions = []admv1.ValidationAction{admv1.Warn, admv1.Audit}
	}
	return &admv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: Labels(m.owner.Name)},
		Spec: admv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ParamRef:          param,
			ValidationActions: actions,
		},
	}
}

// subjectVariables are the request's object name, username and whether
// the subject is a writer of the mapping: every policy's first variables.
func (m mappingPolicy) subjectVariables() []admv1.Variable {
	isWriter, ok := SubjectsExpression(m.spec.OwnerWriters(m.owner))
	if !ok {
		isWriter = "false"
	}
	return []admv1.Variable{
		{Name: "name", Expression: RequestName},
		{Name: "username", Expression: requestUser},
		{Name: "isWriter", Expression: isWriter},
		// Every message starts with it: spelled once here rather than in
		// each message expression.
		{Name: "denial", Expression: m.denial()},
	}
}

// paramVariables are the rotation rule's variables in the policy that
// reads the CA Secret as its param (partCA): the owner's CA as base64 text
// (r.caExpression) and what the merge check computes from it in CEL. A CA the guard resolved has its shifted texts as
// literals: CEL derives them (a pass over every character of the CA, tens
// of milliseconds inside kube-apiserver) only when the CA it reads is
// another one, a param the guard has not synced yet. A CA so large that
// the literals would pass kube-apiserver's expression limit is always
// derived.
func (r rotation) paramVariables() []admv1.Variable {
	shift1, shift2 := caShift1, caShift2
	var vars []admv1.Variable
	ca := r.caExpression(partCA)
	if lit := r.literal(); lit != "" {
		// The literal once, for ca's fallback, the shifted texts' guard
		// and the rotation rule (synced).
		synced := r.synced(partCA)
		vars = append(vars, admv1.Variable{Name: "syncedCA", Expression: CELString(lit)})
		ca = r.caExpressionOr(partCA, synced)
		known := func(n int, derived string) string {
			return `variables.ca == ` + synced + ` ? ` + CELString(shiftedText(r.ca.PEM, n)) + ` : (` + derived + `)`
		}
		if e := known(1, caShift1); len(e) <= maxExpressionCodePoints {
			shift1, shift2 = e, known(2, caShift2)
		}
	}
	return append(vars, []admv1.Variable{
		{Name: "ca", Expression: ca},
		{Name: "caIsPEM", Expression: caIsPEM},
		{Name: "b64", Expression: base64Values},
		{Name: "b64chars", Expression: base64Chars},
		{Name: "caValues", Expression: caValues},
		{Name: "caLen", Expression: caLen},
		{Name: "caShift1", Expression: shift1},
		{Name: "caShift2", Expression: shift2},
	}...)
}

// variables are the policy's variables: the subject's for every part, the
// caBundle checks' for the parts that check caBundles.
func (m mappingPolicy) variables(part policyPart) []admv1.Variable {
	vars := m.subjectVariables()
	if part != partCA {
		// The entry checks that need no CA live where not-owner does: in
		// the policy kube-apiserver always runs, never in the one it skips
		// while the CA Secret is missing.
		vars = append(vars, m.entryVariables()...)
	}
	if part == partOwner {
		return vars
	}
	vars = append(vars, m.rotation.variables(part)...)
	// The part that holds the entry variables has sameNames already.
	names := sameEntryNames
	if part != partCA {
		names = "variables.sameNames"
	}
	return append(vars,
		admv1.Variable{Name: "uniformRotation", Expression: uniformRotationVariable(names)},
		admv1.Variable{Name: "oldBundles", Expression: oldBundles},
		// The webhooks[] entries whose caBundle the request added or
		// changed to something the rotation rule does not allow
		// (rotation.go), or emptied. An unchanged caBundle is never
		// checked, nor an empty one on a new entry (unfilledWebhooks
		// decides those); a DELETE (object is null) changes none. The
		// cheap comparisons come first (CEL's || stops at a true left side): the lookup of the
		// entry in the stored object (a scan of its webhooks, quadratic
		// over the whole object) and the merge check run only for a
		// caBundle that is not the owner's CA. A uniform rotation
		// (unchanged.go) has none, found in one pass over each object.
		admv1.Variable{Name: "badWebhooks", Expression: `!variables.uniformRotation && object != null && has(object.webhooks) ? object.webhooks.filter(w, ` + newHasBundle + ` ? ` +
			`!(` + m.rotation.allowed(part) + `) : ` +
			oldHasBundle + `).map(w, w.name) : []`},
	)
}

// validations are the policy's rules: not-owner in the parts that decide the
// subject, ca-mismatch (or ca-unavailable) in those that check caBundles.
func (m mappingPolicy) validations(part policyPart) []admv1.Validation {
	var out []admv1.Validation
	if part != partCA {
		out = append(out, admv1.Validation{
			Expression:        "variables.isWriter",
			Message:           fallbackMessage(policy.RuleNotOwner, m.owner.Name),
			MessageExpression: m.notOwnerMessage(),
			Reason:            ptr.To(metav1.StatusReasonForbidden),
		})
		if m.injected() {
			out = append(out, m.pointerValidation())
		}
	}
	// A subject that is not a writer is denied not-owner, and on who it is
	// alone (as the static shape decides it): the caBundle rules speak only
	// of writers' caBundles, so a non-writer's denial, warning and audit
	// annotation never name the owner's CA source or its fingerprints.
	switch part {
	case partOwner:
		out = append(out, m.entryValidation())
	case partCA:
		out = append(out, admv1.Validation{
			Expression:        `!variables.isWriter || size(variables.badWebhooks) == 0`,
			Message:           m.caMismatchFallback(),
			MessageExpression: m.caMismatchMessage(),
			Reason:            ptr.To(metav1.StatusReasonForbidden),
		})
	case partAll:
		// The entry rules need no CA; folded in here they cost an ordinary
		// write one comparison of the entry names (entries.go).
		out = append(out, admv1.Validation{
			Expression:        `!variables.isWriter || (size(variables.badWebhooks) == 0 && (` + m.entriesKept() + `))`,
			Message:           m.caMismatchFallback(),
			MessageExpression: `size(variables.badWebhooks) > 0 ? ` + m.caMismatchMessage() + ` : ` + m.entriesMessage(),
			Reason:            ptr.To(metav1.StatusReasonForbidden),
		})
	}
	return out
}

// joinShort joins short fingerprints as messages show them.
func joinShort(fps []string) string { return strings.Join(fps, ",") }
