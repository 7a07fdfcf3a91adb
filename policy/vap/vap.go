// Package vap generates policy mode: the ValidatingAdmissionPolicies,
// bindings and parameter ConfigMaps that enforce a GuardConfig's owner
// mappings inside kube-apiserver, with CEL, where the static webhook cannot
// be installed (managed control planes): kube-apiserver evaluates
// ValidatingAdmissionPolicies for webhook configuration objects, while it
// never calls API-registered webhooks for them (docs/policy-shape.md).
//
// The generator is pure: a loaded *policy.Config and each mapping's resolved
// CA bytes in, typed objects out. `webhook-guard render policy` prints them;
// `webhook-guard serve --policy-mode` keeps them in step with the cluster.
//
// What CEL cannot express, compared with the webhook (see also
// docs/policy-shape.md):
//   - PEM parsing. A changed caBundle must equal the owner's CA bytes exactly
//     (the param ConfigMap's binaryData): a rotation bundle holding old+new,
//     a re-encoded PEM, extra whitespace or a different certificate order
//     is a ca-mismatch here although the webhook would allow it.
//   - Live re-reads. The policy compares with the param ConfigMap as the
//     guard last wrote it; a caBundle written with a new CA before the guard
//     has copied the rotated CA source (within --policy-sync-interval) is
//     denied, and the owner's retry succeeds.
//   - Fingerprints of what was found: the denial names the expected CA
//     fingerprints (from the param) and the webhook entries, not the found one.
//   - Flapping detection, records and `review`: kube-apiserver's audit log
//     (validationActions Audit) is the only record.
//   - Break-glass writes pass silently (matchConditions skip them); the
//     webhook warns about and records them.
//   - injectedByCertManager: the CA is the one the mapping's named
//     configurations' inject-ca-from annotation points at when the guard
//     synced, not the one in the annotation of the request.
//   - Ambiguous owners: two mappings whose selectors match one configuration
//     are both enforced (each mapping's writers are denied by the other's
//     policy), instead of an ambiguous-owner decision.
//   - unmanaged: audit has no equivalent.
package vap

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	admv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/webhook-guard/webhook-guard/policy"
)

// The identities kube-controller-manager deletes objects as: its garbage
// collector and namespace controller with per-controller service account
// credentials (the usual setup), and kube-controller-manager itself without.
const (
	GarbageCollectorUser    = "system:serviceaccount:kube-system:generic-garbage-collector"
	NamespaceControllerUser = "system:serviceaccount:kube-system:namespace-controller"
	ControllerManagerUser   = "system:kube-controller-manager"
)

// Labels on every generated object, so the guard finds (and deletes) what
// it generated, and nothing else.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "webhook-guard"
	LabelMapping   = "webhook-guard.io/mapping"
)

// Names and keys of the generated objects.
const (
	// NamePrefix starts every generated name.
	NamePrefix = "webhook-guard-"
	// ParamPrefix starts the param ConfigMaps' names.
	ParamPrefix = "webhook-guard-ca-"
	// ProtectParamsName names the policy and binding that keep everyone but
	// the guard from creating or changing the param ConfigMaps.
	ProtectParamsName = "webhook-guard-protect-params"
	// ParamKey is the binaryData key holding the owner's CA bytes. It is a
	// CEL identifier, so the policies read it as params.binaryData.caBundle:
	// the one comparison with a caBundle that both type-checks and works at
	// runtime (docs/policy-shape.md).
	ParamKey = "caBundle"
	// DataSource, DataFingerprints and DataError are data keys read only by
	// messages: where the CA came from, its short fingerprints, and why it
	// could not be resolved.
	DataSource       = "source"
	DataFingerprints = "fingerprints"
	DataError        = "error"
)

// CA is one mapping's resolved CA.
type CA struct {
	// PEM is the owner's CA bytes exactly as its source holds them; nil when
	// the source could not be resolved (caBundle changes then fail closed).
	PEM []byte
	// Source describes where PEM was read.
	Source string
	// Fingerprints are the short fingerprints of PEM's certificates.
	Fingerprints []string
	// Err says why the CA could not be resolved.
	Err string
}

// CAFromSet builds a CA from a resolved set.
func CAFromSet(set policy.CASet) CA {
	return CA{PEM: set.PEM(), Source: set.Source, Fingerprints: set.Short()}
}

// CAFromError builds an unresolved CA.
func CAFromError(err error) CA { return CA{Err: err.Error()} }

// Input is what the generator needs.
type Input struct {
	Config *policy.Config
	// Namespace holds the param ConfigMaps (the guard's namespace).
	Namespace string
	// CAs are the mappings' CAs, by mapping name. A mapping without an entry
	// is generated with an empty param (caBundle changes fail closed).
	CAs map[string]CA
	// GuardServiceAccount ("namespace/name") is the guard's identity; when
	// set, a policy lets only it (and break-glass) create or change the param
	// ConfigMaps.
	GuardServiceAccount string
	// Anchor, when set, becomes an owner reference of every generated
	// object: a cluster-scoped object that uninstalling the guard deletes
	// (the chart's anchor ClusterRole), so that kube-apiserver's garbage
	// collector removes the policies, bindings and params with it and
	// nothing the guard generated can deny a write after it is gone.
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
	Policies   []*admv1.ValidatingAdmissionPolicy
	Bindings   []*admv1.ValidatingAdmissionPolicyBinding
	ConfigMaps []*corev1.ConfigMap
}

// PolicyName is the policy and binding name of a mapping.
func PolicyName(mapping string) string { return NamePrefix + mapping }

// ParamName is the param ConfigMap name of a mapping.
func ParamName(mapping string) string { return ParamPrefix + mapping }

// Generate builds the objects for every mapping.
func Generate(in Input) (*Objects, error) {
	if in.Config == nil {
		return nil, fmt.Errorf("no configuration")
	}
	if msgs := validation.IsDNS1123Label(in.Namespace); len(msgs) > 0 {
		return nil, fmt.Errorf("namespace %q: %s", in.Namespace, strings.Join(msgs, "; "))
	}
	spec := &in.Config.Spec
	out := &Objects{}
	var params []string
	for i := range spec.Owners {
		o := &spec.Owners[i]
		for _, name := range []string{PolicyName(o.Name), PolicyName(o.Name) + "-selected", ParamName(o.Name)} {
			if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
				return nil, fmt.Errorf("owners[%s]: generated name %q: %s", o.Name, name, strings.Join(msgs, "; "))
			}
		}
		mode := spec.OwnerMode(o)
		ca, ok := in.CAs[o.Name]
		if !ok {
			ca = CA{Err: "the guard has not resolved the owner's CA"}
		}
		out.ConfigMaps = append(out.ConfigMaps, paramConfigMap(in.Namespace, o.Name, ca))
		params = append(params, ParamName(o.Name))
		m := mappingPolicy{spec: spec, owner: o, mode: mode, namespace: in.Namespace}
		if len(o.Match.Validating)+len(o.Match.Mutating) > 0 {
			p, b := m.build(PolicyName(o.Name), nil)
			out.Policies, out.Bindings = append(out.Policies, p), append(out.Bindings, b)
		}
		if o.Match.LabelSelector != nil {
			name := PolicyName(o.Name)
			if len(o.Match.Validating)+len(o.Match.Mutating) > 0 {
				// A mapping with names and a selector: names go in
				// matchConditions, the selector in objectSelector; two
				// policies express "either".
				name += "-selected"
			}
			p, b := m.build(name, o.Match.LabelSelector)
			out.Policies, out.Bindings = append(out.Policies, p), append(out.Bindings, b)
		}
	}
	if in.GuardServiceAccount != "" && len(params) > 0 {
		slices.Sort(params)
		p, b := protectParams(spec, in.Namespace, in.GuardServiceAccount, params)
		out.Policies, out.Bindings = append(out.Policies, p), append(out.Bindings, b)
	}
	if in.Anchor != nil {
		for _, o := range out.Policies {
			o.OwnerReferences = []metav1.OwnerReference{*in.Anchor}
		}
		for _, o := range out.Bindings {
			o.OwnerReferences = []metav1.OwnerReference{*in.Anchor}
		}
		for _, o := range out.ConfigMaps {
			o.OwnerReferences = []metav1.OwnerReference{*in.Anchor}
		}
	}
	slices.SortFunc(out.Policies, func(a, b *admv1.ValidatingAdmissionPolicy) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(out.Bindings, func(a, b *admv1.ValidatingAdmissionPolicyBinding) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(out.ConfigMaps, func(a, b *corev1.ConfigMap) int { return strings.Compare(a.Name, b.Name) })
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

func paramConfigMap(namespace, mapping string, ca CA) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: ParamName(mapping), Namespace: namespace, Labels: Labels(mapping)},
		Data:       map[string]string{},
	}
	if len(ca.PEM) > 0 {
		cm.BinaryData = map[string][]byte{ParamKey: slices.Clone(ca.PEM)}
		cm.Data[DataSource] = ca.Source
		cm.Data[DataFingerprints] = strings.Join(ca.Fingerprints, ",")
	} else {
		reason := ca.Err
		if reason == "" {
			reason = "the owner's CA is empty"
		}
		cm.Data[DataError] = reason
	}
	return cm
}

// mappingPolicy builds the policy of one mapping.
type mappingPolicy struct {
	spec      *policy.GuardConfig
	owner     *policy.Owner
	mode      policy.Mode
	namespace string
}

// requestName is the name of the object the request is about. CEL's
// request is built from an AdmissionRequest whose name is omitted when empty,
// and reading an absent field is an error that fails the request whatever
// the mapping: a deletecollection carries no name (each object it deletes is
// admitted with oldObject), a generateName CREATE may carry none. So the name
// comes from request.name when present, else from object (CREATE, UPDATE)
// or oldObject (DELETE), each field read only after has() said it is there.
const requestName = `(has(request.name) && request.name != "" ? request.name : ` +
	`object != null && has(object.metadata) && has(object.metadata.name) ? object.metadata.name : ` +
	`oldObject != null && has(oldObject.metadata) && has(oldObject.metadata.name) ? oldObject.metadata.name : "")`

// requestUser is the request's username; userInfo fields are omitempty too.
const requestUser = `(has(request.userInfo.username) ? request.userInfo.username : "")`

func (m mappingPolicy) build(name string, selector *metav1.LabelSelector) (*admv1.ValidatingAdmissionPolicy, *admv1.ValidatingAdmissionPolicyBinding) {
	o := m.owner
	var resources []string
	var nameConds []string
	if selector != nil {
		resources = []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}
	} else {
		if len(o.Match.Mutating) > 0 {
			resources = append(resources, "mutatingwebhookconfigurations")
			nameConds = append(nameConds, fmt.Sprintf(`(request.kind.kind == "MutatingWebhookConfiguration" && %s in %s)`, requestName, celList(o.Match.Mutating)))
		}
		if len(o.Match.Validating) > 0 {
			resources = append(resources, "validatingwebhookconfigurations")
			nameConds = append(nameConds, fmt.Sprintf(`(request.kind.kind == "ValidatingWebhookConfiguration" && %s in %s)`, requestName, celList(o.Match.Validating)))
		}
	}
	objectSelector := &metav1.LabelSelector{}
	if selector != nil {
		objectSelector = selector.DeepCopy()
	}
	var conds []admv1.MatchCondition
	if len(nameConds) > 0 {
		conds = append(conds, admv1.MatchCondition{Name: "owned-configuration", Expression: strings.Join(nameConds, " || ")})
	}
	if bg, ok := SubjectsExpression(m.spec.BreakGlass); ok {
		// Break-glass is always allowed, as the static webhook's
		// matchConditions skip it; unlike the webhook, nothing warns.
		conds = append(conds, admv1.MatchCondition{Name: "not-break-glass", Expression: "!(" + bg + ")"})
	}
	isWriter, ok := SubjectsExpression(m.spec.OwnerWriters(o))
	if !ok {
		isWriter = "false"
	}
	p := &admv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: Labels(o.Name)},
		Spec: admv1.ValidatingAdmissionPolicySpec{
			ParamKind: &admv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
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
			// A param that cannot be read, or an expression that errors,
			// denies (enforce) or is audited (audit): fail closed, as the
			// webhook's ca-unavailable.
			FailurePolicy:   ptr.To(admv1.Fail),
			MatchConditions: conds,
			Variables: []admv1.Variable{
				{Name: "name", Expression: requestName},
				{Name: "username", Expression: requestUser},
				{Name: "isWriter", Expression: isWriter},
				// A param holding no CA (its source could not be read) fails
				// closed on every caBundle change and on nothing else.
				{Name: "hasCA", Expression: `params != null && has(params.binaryData) && has(params.binaryData.` + ParamKey + `)`},
				// The webhooks[] entries whose caBundle the request added or
				// changed to something other than the owner's CA bytes, or
				// emptied. An unchanged caBundle, or an empty one on a new
				// entry (cainjector fills it later), is never checked; a
				// DELETE (object is null) changes none.
				{Name: "badWebhooks", Expression: `object != null && has(object.webhooks) ? object.webhooks.filter(w, ` + newHasBundle + ` ? ` +
					`!(` + oldHasSameBundle + ` || (variables.hasCA && w.clientConfig.caBundle == params.binaryData.` + ParamKey + `)) : ` +
					oldHasBundle + `).map(w, w.name) : []`},
			},
			Validations: []admv1.Validation{
				{
					Expression:        "variables.isWriter",
					Message:           fmt.Sprintf("webhook-guard: not-owner (mapping %q): the subject is not a writer", o.Name),
					MessageExpression: m.notOwnerMessage(),
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression:        `size(variables.badWebhooks) == 0`,
					Message:           fmt.Sprintf("webhook-guard: ca-mismatch (mapping %q): a caBundle is not the owner's CA", o.Name),
					MessageExpression: m.caMismatchMessage(),
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
			},
		},
	}
	actions := []admv1.ValidationAction{admv1.Deny}
	if m.mode == policy.ModeAudit {
		actions = []admv1.ValidationAction{admv1.Warn, admv1.Audit}
	}
	b := &admv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: Labels(o.Name)},
		Spec: admv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name,
			ParamRef: &admv1.ParamRef{
				Name:      ParamName(o.Name),
				Namespace: m.namespace,
				// Never Deny: kube-apiserver fails a binding whose param is
				// missing before any matchCondition runs and whatever its
				// validationActions, so every write to every configuration of
				// the matched kinds (unrelated ones and break-glass included)
				// would be denied while it is gone. With Allow kube-apiserver
				// skips the binding while its param is missing (it does not
				// evaluate the policy with a null param): the mapping is not
				// enforced until the guard recreates the param, which only the
				// guard, kube-controller-manager's collectors and break-glass
				// may delete (protectParams).
				ParameterNotFoundAction: ptr.To(admv1.AllowAction),
			},
			ValidationActions: actions,
		},
	}
	return p, b
}

// newHasBundle says entry w of the request's object carries a caBundle;
// oldHasSameBundle and oldHasBundle look up entry w in the stored object by
// name (names are unique within a configuration). caBundle is a base64
// string at runtime and bytes to the type checker; comparing two caBundles,
// or a caBundle with binaryData, is consistent under both (see
// docs/policy-shape.md). Every optional field is read after has().
const (
	newHasBundle     = `(has(w.clientConfig) && has(w.clientConfig.caBundle))`
	oldHasSameBundle = `(request.operation == "UPDATE" && oldObject != null && has(oldObject.webhooks) && oldObject.webhooks.exists(o, o.name == w.name && has(o.clientConfig) && has(o.clientConfig.caBundle) && o.clientConfig.caBundle == w.clientConfig.caBundle))`
	oldHasBundle     = `(request.operation == "UPDATE" && oldObject != null && has(oldObject.webhooks) && oldObject.webhooks.exists(o, o.name == w.name && has(o.clientConfig) && has(o.clientConfig.caBundle)))`
)

// prefix is the start of every message, worded as the webhook's.
func (m mappingPolicy) prefix() string {
	verb := "webhook-guard denied "
	if m.mode == policy.ModeAudit {
		verb = "webhook-guard (audit) would deny "
	}
	return fmt.Sprintf(`%s + request.operation + " of " + request.kind.kind + " \"" + variables.name + "\" by \"" + variables.username + "\" " + %s`,
		CELString(verb), CELString(fmt.Sprintf("(mapping %q, %s, policy mode); ", m.owner.Name, m.mode)))
}

func (m mappingPolicy) notOwnerMessage() string {
	return m.prefix() + ` + "not-owner: userInfo: \"" + variables.username + "\" is not a writer" + ` +
		`(request.operation == "DELETE" ? "; deleting it (and recreating it) is a takeover" : "") + ` +
		CELString(fmt.Sprintf("; hint: if it should own this configuration, add it to owners[%s].writers", m.owner.Name))
}

func (m mappingPolicy) caMismatchMessage() string {
	return m.prefix() + ` + "ca-mismatch: the caBundle of webhook(s) " + variables.badWebhooks.join(", ") + ` +
		`(variables.hasCA ? ` +
		`" is not byte-identical to the owner's CA from " + (has(params.data) && has(params.data.source) ? params.data.source : "its source") + ` +
		`" [expected CA " + (has(params.data) && has(params.data.fingerprints) ? params.data.fingerprints : "?") + "]; hint: write the owner's CA exactly as its source holds it (policy mode compares bytes, it cannot parse PEM); an emptied caBundle is a mismatch too" : ` +
		`" cannot be verified: the guard could not resolve the owner's CA (" + (has(params.data) && has(params.data.error) ? params.data.error : "unknown") + "); caBundle changes fail closed until the source can be read")`
}

// protectParams lets only the guard (and break-glass) create, update or
// delete the param ConfigMaps, and kube-controller-manager's garbage
// collector and namespace controller delete them (uninstall). ConfigMaps are
// not exempt from VAP, so the policy mode protects its own parameters. A
// binding skips its policy while its param is missing (see build), so a
// param deleted by anyone else would switch its mapping off.
func protectParams(spec *policy.GuardConfig, namespace, guardSA string, params []string) (*admv1.ValidatingAdmissionPolicy, *admv1.ValidatingAdmissionPolicyBinding) {
	guard := policy.ServiceAccountUsername(guardSA)
	deleters := []string{guard, GarbageCollectorUser, NamespaceControllerUser, ControllerManagerUser}
	conds := []admv1.MatchCondition{{Name: "param-configmap", Expression: requestName + " in " + celList(params)}}
	if bg, ok := SubjectsExpression(spec.BreakGlass); ok {
		conds = append(conds, admv1.MatchCondition{Name: "not-break-glass", Expression: "!(" + bg + ")"})
	}
	p := &admv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: ProtectParamsName, Labels: Labels("")},
		Spec: admv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": namespace}},
				ObjectSelector:    &metav1.LabelSelector{},
				ResourceRules: []admv1.NamedRuleWithOperations{{RuleWithOperations: admv1.RuleWithOperations{
					Operations: []admv1.OperationType{admv1.Create, admv1.Update, admv1.Delete},
					Rule: admv1.Rule{
						APIGroups:   []string{""},
						APIVersions: []string{"v1"},
						Resources:   []string{"configmaps"},
						Scope:       ptr.To(admv1.NamespacedScope),
					},
				}}},
				MatchPolicy: ptr.To(admv1.Equivalent),
			},
			FailurePolicy:   ptr.To(admv1.Fail),
			MatchConditions: conds,
			Validations: []admv1.Validation{
				{
					Expression: `request.operation == "DELETE" || ` + requestUser + " == " + CELString(guard),
					Message:    fmt.Sprintf("webhook-guard: only %s may create or change the policy mode's parameter ConfigMaps (they hold the owners' CAs)", guard),
					Reason:     ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression: `request.operation != "DELETE" || ` + requestUser + " in " + celList(deleters),
					Message: fmt.Sprintf("webhook-guard: only %s and kube-controller-manager's garbage collector and namespace controller may delete the policy mode's parameter ConfigMaps: "+
						"while one is missing kube-apiserver skips its mapping's policy; hint: uninstall the chart, or remove the mapping from the guard's configuration", guard),
					Reason: ptr.To(metav1.StatusReasonForbidden),
				},
			},
		},
	}
	b := &admv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: ProtectParamsName, Labels: Labels("")},
		Spec: admv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        ProtectParamsName,
			ValidationActions: []admv1.ValidationAction{admv1.Deny},
		},
	}
	return p, b
}

// SubjectsExpression is CEL that is true for the subjects, matched exactly
// (whole usernames, whole groups), as policy matches them. Lists are JSON
// arrays of strings: valid CEL list literals with correct escaping. The
// static webhook's matchConditions use it too.
func SubjectsExpression(s policy.Subjects) (string, bool) {
	users := slices.Clone(s.Users)
	for _, sa := range s.ServiceAccounts {
		users = append(users, policy.ServiceAccountUsername(sa))
	}
	slices.Sort(users)
	users = slices.Compact(users)
	groups := slices.Compact(slices.Sorted(slices.Values(s.Groups)))
	var parts []string
	// userInfo's fields are omitempty: read each only after has().
	if len(users) > 0 {
		parts = append(parts, "(has(request.userInfo.username) && request.userInfo.username in "+celList(users)+")")
	}
	if len(groups) > 0 {
		parts = append(parts, "(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in "+celList(groups)+"))")
	}
	if len(parts) == 0 {
		return "", false
	}
	return strings.Join(parts, " || "), true
}

func celList(ss []string) string {
	b, _ := json.Marshal(ss)
	return string(b)
}

// CELString is s as a CEL string literal (JSON escaping is valid CEL).
func CELString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
