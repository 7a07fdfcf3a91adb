package probe

import (
	"strings"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// defaultPort is the Service port kube-apiserver calls when none is set.
const defaultPort = 443

// guarded reports whether a mapping claims the object (its owner, or
// several mappings that conflict over it) and names the claim: the owner's
// name, or the conflicting mappings' joined by commas.
func guarded(cfg *policy.Mappings, kind policy.GuardedKind, name string, labels map[string]string) (string, bool) {
	m := cfg.Match(kind, name, labels)
	switch {
	case m.Owner != nil:
		return m.Owner.Name, true
	case len(m.Conflicting) > 0:
		return strings.Join(m.Conflicting, ","), true
	}
	return "", false
}

// ValidatingPaths are the trust paths of a guarded configuration's
// entries; none when no mapping claims it.
func ValidatingPaths(cfg *policy.Mappings, c *admv1.ValidatingWebhookConfiguration) []TrustPath {
	return configPaths(cfg, policy.KindValidating, &c.ObjectMeta, len(c.Webhooks), func(i int) (string, *admv1.FailurePolicyType, *admv1.WebhookClientConfig) {
		w := &c.Webhooks[i]
		return w.Name, w.FailurePolicy, &w.ClientConfig
	})
}

// MutatingPaths are ValidatingPaths for a MutatingWebhookConfiguration.
func MutatingPaths(cfg *policy.Mappings, c *admv1.MutatingWebhookConfiguration) []TrustPath {
	return configPaths(cfg, policy.KindMutating, &c.ObjectMeta, len(c.Webhooks), func(i int) (string, *admv1.FailurePolicyType, *admv1.WebhookClientConfig) {
		w := &c.Webhooks[i]
		return w.Name, w.FailurePolicy, &w.ClientConfig
	})
}

// configPaths is the one walk of both kinds' entries (their webhook types
// differ only in fields no path reads); entry returns the i-th entry's
// name, failurePolicy and clientConfig.
func configPaths(cfg *policy.Mappings, kind policy.GuardedKind, meta *metav1.ObjectMeta, n int,
	entry func(i int) (string, *admv1.FailurePolicyType, *admv1.WebhookClientConfig)) []TrustPath {
	mapping, ok := guarded(cfg, kind, meta.Name, meta.Labels)
	if !ok {
		return nil
	}
	out := make([]TrustPath, 0, n)
	for i := range n {
		name, fp, cc := entry(i)
		p := admissionPath(kind, meta.Name, name, fp, cc)
		p.Mapping = mapping
		out = append(out, p)
	}
	return out
}

// admissionPath is one webhook entry's path; failurePolicy defaults to
// Fail, the port to 443, as admissionregistration.k8s.io/v1 defaults them.
func admissionPath(kind policy.GuardedKind, cfg, name string, fp *admv1.FailurePolicyType, cc *admv1.WebhookClientConfig) TrustPath {
	p := TrustPath{Kind: string(kind), Configuration: cfg, Webhook: name, FailurePolicy: string(admv1.Fail), CABundle: cc.CABundle}
	if fp != nil {
		p.FailurePolicy = string(*fp)
	}
	if cc.URL != nil {
		p.URL = *cc.URL
	}
	if s := cc.Service; s != nil {
		p.Service = &ServiceRef{Namespace: s.Namespace, Name: s.Name, Port: defaultPort}
		if s.Port != nil {
			p.Service.Port = *s.Port
		}
	}
	return p
}

// TrustObjectPath is the one path of a guarded CustomResourceDefinition
// (its conversion webhook) or APIService (its service); false when no
// mapping claims it, when it trusts nothing (no conversion webhook, a local
// APIService) or when an APIService skips verification
// (insecureSkipTLSVerify: kube-apiserver verifies nothing to probe).
//
// Where the entry is, is the kind's row of guardapi.Kinds (Entries); a
// kind whose objects hold a list of entries has no one path (false).
func TrustObjectPath(cfg *policy.Mappings, kind policy.GuardedKind, u *unstructured.Unstructured) (TrustPath, bool) {
	info, ok := kind.Info()
	if !ok || !info.Entries.One() {
		return TrustPath{}, false
	}
	mapping, ok := guarded(cfg, kind, u.GetName(), u.GetLabels())
	if !ok {
		return TrustPath{}, false
	}
	e := info.Entries
	p := TrustPath{Kind: string(kind), Configuration: u.GetName(), Mapping: mapping, Webhook: e.Name, FailurePolicy: string(admv1.Fail)}
	if e.InsecureSkipTLSVerifyOf(u.Object) {
		return TrustPath{}, false
	}
	cc, ok := e.ClientConfigOf(u.Object)
	if !ok {
		return TrustPath{}, false
	}
	p.URL, _, _ = unstructured.NestedString(cc, "url")
	if svc, ok, _ := unstructured.NestedMap(cc, "service"); ok {
		ns, _, _ := unstructured.NestedString(svc, "namespace")
		name, _, _ := unstructured.NestedString(svc, "name")
		port, found, _ := unstructured.NestedInt64(svc, "port")
		if !found {
			port = defaultPort
		}
		p.Service = &ServiceRef{Namespace: ns, Name: name, Port: int32(port)}
	}
	if p.URL == "" && p.Service == nil {
		return TrustPath{}, false
	}
	p.CABundle = guardapi.CABundleIn(cc)
	return p, true
}
