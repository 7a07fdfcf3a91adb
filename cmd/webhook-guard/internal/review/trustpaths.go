package review

import (
	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"

	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// TrustPaths is the guard's last published probe round: whether
// kube-apiserver's calls along each guarded trust path verify. It is state,
// not a decision: it never counts as denied.
type TrustPaths struct {
	// ProbedAt is the RFC 3339 time of the round.
	ProbedAt string `json:"probedAt"`
	// Verified counts the paths that verified (of the mappings filtered).
	Verified int `json:"verified"`
	// NotVerified are the paths that did not, fail-closed ones first.
	NotVerified []TrustPath `json:"notVerified"`
}

// TrustPath is one path the prober did not verify.
type TrustPath struct {
	Mapping       string `json:"mapping"`
	Configuration string `json:"configuration"`
	Webhook       string `json:"webhook"`
	FailurePolicy string `json:"failurePolicy"`
	// Reason is the probe's: unknown-authority, expired, name-mismatch,
	// unreachable, no-endpoints or no-ca-bundle.
	Reason   string `json:"reason"`
	Endpoint string `json:"endpoint,omitempty"`
	// Since is when the path stopped verifying (RFC 3339).
	Since      string `json:"since"`
	Message    string `json:"message"`
	Suggestion string `json:"suggestion"`
}

// trustPathsOf reads the trust-path report, keeping the paths of the
// filter's mapping. A decision filter asks for decisions, which the probe
// state is not: it keeps none (nil).
func trustPathsOf(rep reportsv1alpha1.ClusterReport, filter Filter) *TrustPaths {
	if filter.Decision != "" {
		return nil
	}
	out := &TrustPaths{ProbedAt: rep.Annotations[records.AnnotationProbedAt], NotVerified: []TrustPath{}}
	for _, r := range rep.Results {
		p := r.Properties
		if filter.Mapping != "" && r.Policy != filter.Mapping {
			continue
		}
		if r.Result == "pass" {
			out.Verified++
			continue
		}
		out.NotVerified = append(out.NotVerified, TrustPath{
			Mapping: r.Policy, Configuration: p[records.PropConfiguration], Webhook: p[records.PropWebhook],
			FailurePolicy: p[records.PropFailurePolicy], Reason: p[records.PropReason], Endpoint: p[records.PropEndpoint],
			Since: p[records.PropSince], Message: r.Description, Suggestion: p[records.PropHint],
		})
	}
	return out
}
