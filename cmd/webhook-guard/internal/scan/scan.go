// Package scan checks a live cluster's webhook configurations: their
// health (endpoints, serving certificates, failure scope, timeouts, side
// effects, CA writers) and, given a GuardConfig, the owner mappings. It
// reads the cluster and returns findings; printing them is the command
// line's.
package scan

import (
	"context"
	"fmt"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/discover"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Level is how bad a finding is: fail breaks admission now, warn can break
// it later, info is a fact that needs no fix.
type Level string

// Finding levels.
const (
	LevelFail Level = "fail"
	LevelWarn Level = "warn"
	LevelInfo Level = "info"
)

// Checks of the owner mappings and of the policy shape's anchor; the
// health checks are in health.go.
const (
	CheckCAMismatch       = "ca-mismatch"
	CheckCAUnavailable    = "ca-unavailable"
	CheckCAEmpty          = "ca-empty"
	CheckCAExpiry         = "ca-expiry"
	CheckUnmapped         = "unmapped"
	CheckMissing          = "missing-configuration"
	CheckAmbiguousMapping = "ambiguous-owner"
)

// Finding is one problem (or fact) found in the cluster.
type Finding struct {
	Level         Level  `json:"level"`
	Check         string `json:"check"`
	Mapping       string `json:"mapping,omitempty"`
	Configuration string `json:"configuration"`
	Webhook       string `json:"webhook,omitempty"`
	// Field is the field to change, e.g. webhooks[0].timeoutSeconds.
	Field      string `json:"field,omitempty"`
	Detail     string `json:"detail"`
	Suggestion string `json:"suggestion,omitempty"`
}

// Result is the whole scan, as -o json|yaml prints it.
type Result struct {
	Findings []Finding `json:"findings"`
	// Problems counts warn and fail findings.
	Problems int `json:"problems"`
}

// Options tune a scan.
type Options struct {
	// Now is the time certificates are checked at.
	Now time.Time
	// ExpiryThreshold warns of CAs and serving certificates expiring
	// within it.
	ExpiryThreshold time.Duration
	// DialTimeout bounds one TLS dial to a webhook.
	DialTimeout time.Duration
	// PolicyAnchor is the policy shape's anchor ClusterRole; empty skips
	// its check.
	PolicyAnchor string
}

// Run scans the cluster: the health checks, the mappings of cfg (nil: none),
// the policy anchor and the guard's last trust path probes. Findings are sorted, fail first. An error means
// the cluster could not be read.
func Run(ctx context.Context, c client.Client, cfg *policy.Mappings, o Options) (Result, error) {
	res := Result{Findings: []Finding{}}
	caInjector := guardapi.DefaultCAInjectorServiceAccount
	if cfg != nil {
		caInjector = cfg.Spec.CertManager.CAInjectorServiceAccount
	}
	configs, cluster, err := discover.Gather(ctx, c, caInjector)
	if err != nil {
		return res, err
	}
	res.Findings = append(res.Findings, Health(configs, cluster, o)...)
	if cfg != nil {
		found, err := scanMappings(ctx, c, cfg, o)
		if err != nil {
			return res, err
		}
		res.Findings = append(res.Findings, found...)
	}
	anchor, err := scanAnchor(ctx, c, o.PolicyAnchor)
	if err != nil {
		return res, err
	}
	res.Findings = append(res.Findings, anchor...)
	res.Findings = append(res.Findings, scanTrustPaths(ctx, c, o)...)
	res.finish()
	return res, nil
}

// finish sorts the findings, fail first, and counts the problems.
func (res *Result) finish() {
	levelRank := map[Level]int{LevelFail: 0, LevelWarn: 1, LevelInfo: 2}
	slices.SortFunc(res.Findings, func(a, b Finding) int {
		if d := levelRank[a.Level] - levelRank[b.Level]; d != 0 {
			return d
		}
		return slices.Compare([]string{a.Mapping, a.Configuration, a.Check, a.Webhook, a.Field, a.Detail}, []string{b.Mapping, b.Configuration, b.Check, b.Webhook, b.Field, b.Detail})
	})
	for _, f := range res.Findings {
		if f.Level != LevelInfo {
			res.Problems++
		}
	}
}

// findingFunc makes a finding of one webhook (or configuration) with the
// level, check, field (relative to the webhooks[] entry), detail and fix.
type findingFunc func(level Level, check, field, detail, fix string) Finding

// unknown is a mapping's object of a kind scan could not list (its role
// may not, or the cluster does not serve the kind): whether it exists is
// not known, so it is not reported missing.
func unknown(owner, ref, why string) Finding {
	return Finding{
		Level: LevelInfo, Check: CheckMissing, Mapping: owner, Configuration: ref,
		Detail:     "not checked: its kind could not be listed (" + why + ")",
		Suggestion: "run scan with a role that may list this kind to check the object",
	}
}

// missing is a mapping's configuration that does not exist.
func missing(owner, ref string) Finding {
	return Finding{
		Level: LevelWarn, Check: CheckMissing, Mapping: owner, Configuration: ref,
		Detail:     "the mapping names a configuration that does not exist",
		Suggestion: fmt.Sprintf("remove it from owners[%s].match, or check that the owner is installed (a typo in the name leaves the real configuration unguarded)", owner),
	}
}
