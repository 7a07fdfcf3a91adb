package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// APIVersion and Kind identify a GuardConfig document.
const (
	APIVersion = "webhook-guard.io/v1alpha1"
	Kind       = "GuardConfig"
)

// Mode says what happens to a request that breaks a rule.
type Mode string

const (
	// ModeAudit allows the request, returns a warning and records it.
	ModeAudit Mode = "audit"
	// ModeEnforce rejects the request with a 403.
	ModeEnforce Mode = "enforce"
)

// UnmanagedAction says what happens to writes of configurations no mapping covers.
type UnmanagedAction string

const (
	// UnmanagedAllow lets them through silently.
	UnmanagedAllow UnmanagedAction = "allow"
	// UnmanagedAudit lets them through with a warning and a record, so that
	// users can discover which configurations still need an owner.
	UnmanagedAudit UnmanagedAction = "audit"
)

// GuardConfig is the owner-mapping file. The chart renders it from Helm
// values into a ConfigMap; `webhook-guard serve` and `check` read it.
type GuardConfig struct {
	metav1.TypeMeta `json:",inline"`

	// DefaultMode applies to every mapping that does not set its own mode.
	// Default: audit.
	DefaultMode Mode `json:"defaultMode,omitempty"`

	// BreakGlass subjects are always allowed, always recorded, and get a
	// warning. The rendered static webhook sends their writes to a second
	// entry with failurePolicy Ignore, so a guard outage never locks them out.
	BreakGlass Subjects `json:"breakGlass,omitempty"`

	// Unmanaged says what to do with configurations no mapping matches.
	// Default: allow.
	Unmanaged UnmanagedAction `json:"unmanaged,omitempty"`

	// CertManager describes the cert-manager installation that
	// injectedByCertManager, certificate and issuer sources rely on.
	CertManager CertManagerSettings `json:"certManager,omitempty"`

	// Flapping tunes the detector of many distinct caBundle values written to
	// one configuration in a short window (the 8-replica incident).
	Flapping FlappingSettings `json:"flapping,omitempty"`

	// Owners are the mappings, one per owning controller.
	Owners []Owner `json:"owners"`
}

// CertManagerSettings names cert-manager's identities and namespaces.
type CertManagerSettings struct {
	// CAInjectorServiceAccount ("namespace/name") becomes a writer of every
	// mapping whose CA source is injectedByCertManager.
	// Default: cert-manager/cert-manager-cainjector.
	CAInjectorServiceAccount string `json:"caInjectorServiceAccount,omitempty"`
	// ClusterResourceNamespace is where a ClusterIssuer's CA Secret lives
	// (cert-manager's --cluster-resource-namespace). Default: cert-manager.
	ClusterResourceNamespace string `json:"clusterResourceNamespace,omitempty"`
}

// FlappingSettings configures flapping detection.
type FlappingSettings struct {
	// MaxDistinctBundles is how many distinct caBundle values may be written
	// to one configuration within Window before it is reported as flapping.
	// Default: 3 (a rotation writes at most old, old+new, new).
	MaxDistinctBundles int `json:"maxDistinctBundles,omitempty"`
	// Window is the sliding window. Default: 10m.
	Window metav1.Duration `json:"window,omitempty"`
}

// Subjects are identities as kube-apiserver authenticates them. Matching is
// always exact: a whole username, a whole group, never a prefix.
type Subjects struct {
	// ServiceAccounts as "namespace/name"; they match the username
	// system:serviceaccount:namespace:name.
	ServiceAccounts []string `json:"serviceAccounts,omitempty"`
	// Users are exact usernames.
	Users []string `json:"users,omitempty"`
	// Groups are exact group names.
	Groups []string `json:"groups,omitempty"`
}

// Owner maps configurations to the one party allowed to write them.
type Owner struct {
	// Name is used in messages, metrics and reports.
	Name string `json:"name"`
	// Mode overrides GuardConfig.DefaultMode for this mapping.
	Mode Mode `json:"mode,omitempty"`
	// Match selects the configurations this mapping owns.
	Match Match `json:"match"`
	// Writers may write the matched configurations.
	Writers Subjects `json:"writers,omitempty"`
	// CA is where the owner's CA comes from; exactly one source.
	CA CASource `json:"ca"`
	// WriteBudget caps the caBundle-changing writes the writers may make to
	// each configuration of the mapping, against an owner's own hot loop
	// (which passes every ownership rule). Unset: no limit. Applied by the
	// static shape only: the policy shape's CEL keeps no state across
	// requests.
	WriteBudget *WriteBudget `json:"writeBudget,omitempty"`
	// VerifyServing is what an allowed caBundle write gets when the new
	// caBundle does not verify the certificate the entry's endpoint served
	// at the guard's last probe: a warning (warn, the default) or a
	// refusal under the mapping's mode (deny, rule serving-unverified).
	// Applied by the static shape with the prober on only: the policy
	// shape's CEL sees no probe, and an entry the last probe did not reach
	// is never refused for it.
	VerifyServing VerifyServing `json:"verifyServing,omitempty"`
}

// WriteBudget is a sliding window of one minute per webhook configuration.
type WriteBudget struct {
	// PerMinute is how many caBundle-changing writes to one configuration
	// are allowed within any minute; the excess is refused with a 429 in
	// enforce mode, recorded in audit mode. Break-glass is never limited.
	PerMinute int32 `json:"perMinute"`
}

// Match selects webhook configurations by name or by label.
type Match struct {
	// Validating names ValidatingWebhookConfigurations.
	Validating []string `json:"validating,omitempty"`
	// Mutating names MutatingWebhookConfigurations.
	Mutating []string `json:"mutating,omitempty"`
	// CustomResourceDefinitions names CustomResourceDefinitions whose
	// conversion webhook (spec.conversion.webhook.clientConfig.caBundle)
	// the mapping owns. The rest of a CRD (its schema, its versions)
	// belongs to whoever installs it: a write that leaves the conversion
	// webhook's caBundle alone is not the mapping's to decide.
	CustomResourceDefinitions []string `json:"customResourceDefinitions,omitempty"`
	// APIServices names APIServices (such as v1beta1.metrics.k8s.io) whose
	// spec.caBundle (and spec.insecureSkipTLSVerify) the mapping owns, as
	// for CustomResourceDefinitions.
	APIServices []string `json:"apiServices,omitempty"`
	// LabelSelector selects webhook configurations of both kinds by their
	// labels. It never selects CustomResourceDefinitions or APIServices:
	// those are named, so that a label cannot bring a cluster's every CRD
	// under a mapping.
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// Kinds of the objects a mapping names, as messages and decisions name them.
const (
	KindValidatingWebhookConfiguration = "ValidatingWebhookConfiguration"
	KindMutatingWebhookConfiguration   = "MutatingWebhookConfiguration"
	KindCustomResourceDefinition       = "CustomResourceDefinition"
	KindAPIService                     = "APIService"
)

// NamedObjects are the names a Match lists for one kind.
type NamedObjects struct {
	// KindInfo is the kind, where kube-apiserver serves it and the Match
	// field (Field) that lists the names.
	KindInfo
	Names []string
}

// Named lists the names of every kind, in Kinds' order.
func (m *Match) Named() []NamedObjects {
	out := make([]NamedObjects, 0, len(Kinds))
	for _, k := range Kinds {
		var names []string
		if p := m.NamesOf(k.Kind); p != nil {
			names = *p
		}
		out = append(out, NamedObjects{KindInfo: k, Names: names})
	}
	return out
}

// NamesOf is the field that names the objects of kind: the one place that
// maps a kind of Kinds to its Match field (KindInfo.Field is its JSON
// name); nil for any other kind (Test_everyMatchFieldIsAKind fails when a
// kind of Kinds has none).
func (m *Match) NamesOf(kind string) *[]string {
	switch kind {
	case KindValidatingWebhookConfiguration:
		return &m.Validating
	case KindMutatingWebhookConfiguration:
		return &m.Mutating
	case KindCustomResourceDefinition:
		return &m.CustomResourceDefinitions
	case KindAPIService:
		return &m.APIServices
	}
	return nil
}

// HasNames reports whether the Match names any object.
func (m *Match) HasNames() bool {
	for _, n := range m.Named() {
		if len(n.Names) > 0 {
			return true
		}
	}
	return false
}

// CASource names where an owner's CA certificates are read. Exactly one
// field must be set.
type CASource struct {
	// Secret: a key of a Secret (default key ca.crt).
	Secret *KeyRef `json:"secret,omitempty"`
	// ConfigMap: a key of a ConfigMap's data or binaryData (default key ca.crt).
	ConfigMap *KeyRef `json:"configMap,omitempty"`
	// Certificate: a cert-manager Certificate; the CA is its Secret's ca.crt.
	Certificate *ObjectRef `json:"certificate,omitempty"`
	// Issuer: a cert-manager Issuer or ClusterIssuer of CA type; the CA is the
	// certificate in its spec.ca.secretName Secret.
	Issuer *IssuerRef `json:"issuer,omitempty"`
	// InjectedByCertManager: the CA named by the configuration's own
	// cert-manager.io/inject-ca-from or inject-ca-from-secret annotation;
	// cainjector's service account becomes a writer.
	InjectedByCertManager *InjectedByCertManager `json:"injectedByCertManager,omitempty"`
	// PEM: the CA certificates inline.
	PEM string `json:"pem,omitempty"`
}

// KeyRef points at one key of a namespaced Secret or ConfigMap.
type KeyRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Key defaults to ca.crt.
	Key string `json:"key,omitempty"`
}

// ObjectRef points at a namespaced object.
type ObjectRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// IssuerRef points at a cert-manager Issuer or ClusterIssuer.
type IssuerRef struct {
	// Kind is Issuer or ClusterIssuer.
	Kind string `json:"kind"`
	// Namespace is required for Issuer and forbidden for ClusterIssuer.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// InjectedByCertManager selects cert-manager's cainjector as the source of
// the CA: cainjector becomes a writer, and an entry may stay empty until it
// fills it. Without a pin, the CA is the one the object's own annotation
// names, so whoever creates the object chooses it (its writers); the guard
// denies every later change of the annotation but break-glass's. A pin names
// the CA in the configuration instead: the CA is read from the pinned
// object, and the objects' annotation must name exactly it, so nobody but
// break-glass can point cainjector at another CA, not even by deleting and
// recreating the object. At most one pin may be set.
type InjectedByCertManager struct {
	// Certificate pins cert-manager.io/inject-ca-from: the cert-manager
	// Certificate whose Secret's ca.crt is the CA.
	Certificate *ObjectRef `json:"certificate,omitempty"`
	// Secret pins cert-manager.io/inject-ca-from-secret: the Secret whose
	// ca.crt is the CA.
	Secret *ObjectRef `json:"secret,omitempty"`
}

// Pinned reports whether the source names its CA (a pin) rather than
// taking it from the objects' annotation.
func (i *InjectedByCertManager) Pinned() bool {
	return i != nil && (i.Certificate != nil || i.Secret != nil)
}
