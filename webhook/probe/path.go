package probe

import "github.com/webhook-guard/webhook-guard/webhook/servedchain"

// TrustPath is one entry kube-apiserver calls over TLS, as its object
// stores it.
type TrustPath struct {
	// Kind is ValidatingWebhookConfiguration, MutatingWebhookConfiguration,
	// CustomResourceDefinition or APIService.
	Kind string
	// Configuration is the object's name.
	Configuration string
	// Mapping is the owner mapping that guards the object (the
	// conflicting mappings, comma-separated, when several claim it).
	Mapping string
	// Webhook is the entry's name: "conversion" for a CRD, "service" for an
	// APIService.
	Webhook string
	// FailurePolicy is Fail or Ignore (Fail for a CRD and an APIService).
	FailurePolicy string
	// URL is clientConfig.url; "" when the entry calls a Service.
	URL string
	// Service is the Service the entry calls; nil when it calls URL.
	Service *ServiceRef
	// CABundle is the stored caBundle (PEM); empty means the system roots,
	// as kube-apiserver then trusts them.
	CABundle []byte
}

// ServiceRef is clientConfig.service (an APIService's spec.service).
type ServiceRef = servedchain.Service

// Key names the path in maps and series: kind, configuration and webhook.
type Key struct {
	Kind, Configuration, Webhook string
}

// Key is p's key.
func (p TrustPath) Key() Key {
	return Key{Kind: p.Kind, Configuration: p.Configuration, Webhook: p.Webhook}
}

// Endpoint is what kube-apiserver calls for the path.
func (p TrustPath) Endpoint() servedchain.Endpoint {
	return servedchain.Endpoint{URL: p.URL, Service: p.Service}
}

// serverName is the name kube-apiserver verifies the served certificate
// for: the URL's host, or <service>.<namespace>.svc.
func (p TrustPath) serverName() string { return p.Endpoint().ServerName() }

// Reason is why a trust path did not verify; its value is the reason label
// of webhook_guard_trust_path_probe_failures_total: a served chain's
// reasons (servedchain), and the prober's own no-endpoints.
type Reason = servedchain.Reason

// The reasons a probe fails, most specific first.
const (
	ReasonNone             = servedchain.ReasonNone
	ReasonUnknownAuthority = servedchain.ReasonUnknownAuthority
	ReasonExpired          = servedchain.ReasonExpired
	ReasonNameMismatch     = servedchain.ReasonNameMismatch
	ReasonUnreachable      = servedchain.ReasonUnreachable
	// ReasonNoEndpoints: the Service has no ready endpoint for the port.
	ReasonNoEndpoints Reason = "no-endpoints"
	ReasonNoCABundle         = servedchain.ReasonNoCABundle
)

// Reasons lists every failure reason, in the order above.
func Reasons() []Reason {
	return []Reason{ReasonUnknownAuthority, ReasonExpired, ReasonNameMismatch,
		ReasonUnreachable, ReasonNoEndpoints, ReasonNoCABundle}
}

// Result is one path's probe.
type Result struct {
	Path TrustPath
	// Reason is ReasonNone when every probed endpoint verified.
	Reason Reason
	// Endpoint is the address that failed ("" when verified, or when the
	// failure came before any dial).
	Endpoint string
	// Err says what failed, for the log; nil when verified.
	Err error
	// served are the chains the endpoints served, in the order probed
	// (Served keeps them): every endpoint's, or none when one did not
	// answer.
	served []servedAt
}

// Verified reports whether the path verified.
func (r Result) Verified() bool { return r.Reason == ReasonNone }
