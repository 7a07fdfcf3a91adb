package probe

import (
	"net"
	"net/url"
	"strconv"
)

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
type ServiceRef struct {
	Namespace, Name string
	// Port is the Service's port; kube-apiserver's default is 443.
	Port int32
}

// Key names the path in maps and series: kind, configuration and webhook.
type Key struct {
	Kind, Configuration, Webhook string
}

// Key is p's key.
func (p TrustPath) Key() Key {
	return Key{Kind: p.Kind, Configuration: p.Configuration, Webhook: p.Webhook}
}

// serverName is the name kube-apiserver verifies the served certificate
// for: the URL's host, or <service>.<namespace>.svc.
func (p TrustPath) serverName() string {
	if p.Service != nil {
		return p.Service.Name + "." + p.Service.Namespace + ".svc"
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// urlAddress is the host:port the URL names (443 when it names none).
func urlAddress(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// Reason is why a trust path did not verify; its value is the reason label
// of webhook_guard_trust_path_probe_failures_total.
type Reason string

// The reasons a probe fails, most specific first.
const (
	// ReasonNone: the served chain verified.
	ReasonNone Reason = ""
	// ReasonUnknownAuthority: the caBundle does not verify the served chain.
	ReasonUnknownAuthority Reason = "unknown-authority"
	// ReasonExpired: a served certificate is expired or not yet valid.
	ReasonExpired Reason = "expired"
	// ReasonNameMismatch: the served certificate is not valid for the
	// server name kube-apiserver uses.
	ReasonNameMismatch Reason = "name-mismatch"
	// ReasonUnreachable: no TLS handshake completed within the deadline.
	ReasonUnreachable Reason = "unreachable"
	// ReasonNoEndpoints: the Service has no ready endpoint for the port.
	ReasonNoEndpoints Reason = "no-endpoints"
	// ReasonNoCABundle: the caBundle is set but holds no certificate, so
	// kube-apiserver cannot build its client and every call fails.
	ReasonNoCABundle Reason = "no-ca-bundle"
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

// portString formats a port for net.JoinHostPort.
func portString(p int32) string { return strconv.Itoa(int(p)) }
