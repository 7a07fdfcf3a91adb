package records

import (
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"

	"github.com/webhook-guard/webhook-guard/policy"
)

// The trust-path report: the leader's prober keeps one ClusterReport with
// one result per guarded trust path (a webhook entry, a CRD's conversion
// webhook, an APIService), so that `review` and `scan`, which read the
// cluster and not the guard's metrics, show beside the denials whether
// kube-apiserver's calls verify. Unlike the decision reports it holds
// state, not counts: each write replaces its results whole.
const (
	// TrustPathsReport is the report's name.
	TrustPathsReport = Source + ".trust-paths"
	// RuleTrustPath is the rule of its results.
	RuleTrustPath = "trust-path"
	// CategoryTrustPath groups its results in a report UI.
	CategoryTrustPath = "Trust path"
	// AnnotationProbedAt is the RFC 3339 time of the round the report
	// holds; the prober rewrites the report at least every
	// TrustPathsRefresh, so an older time means nothing probes.
	AnnotationProbedAt = "webhook-guard.io/probed-at"
)

// TrustPathsRefresh is the longest time between two writes of the
// trust-path report while the leader probes.
const TrustPathsRefresh = 5 * time.Minute

// TrustPathsStaleAfter is the age past which a reader takes the report
// for a prober that stopped: two refreshes.
const TrustPathsStaleAfter = 2 * TrustPathsRefresh

// Properties of a trust-path result, besides PropConfiguration (Kind/name),
// PropWebhook and PropMapping.
const (
	// PropReason is the probe's failure reason (unknown-authority, expired,
	// name-mismatch, unreachable, no-endpoints, no-ca-bundle); absent when
	// the path verified.
	PropReason = "reason"
	// PropEndpoint is the address that failed.
	PropEndpoint = "endpoint"
	// PropFailurePolicy is the entry's failurePolicy (Fail for a CRD and an
	// APIService): with Ignore a broken path skips the webhook instead of
	// failing the request.
	PropFailurePolicy = "failurePolicy"
	// PropSince is the RFC 3339 time the path's verdict (and reason) began.
	PropSince = "since"
	// PropDetail is the probe's error, cut short.
	PropDetail = "detail"
)

// TrustPathResultID is a trust-path result's resultID (PropResultID),
// hashed as the decision reports' are: from the entry (kind, object,
// webhook) and the rule, never from its verdict, times or description, so
// it is the same in every round.
func TrustPathResultID(kind, name, webhook string) string {
	return resultID(policy.GuardedKind(kind), name, resultKey{Rule: RuleTrustPath, Webhook: webhook})
}

// IsTrustPathsReport reports whether rep is the trust-path report as the
// guard writes it: its name, source and managed-by label, no owner and no
// scope. Readers (review, scan) take nothing else for the guard's probes;
// the leader rewrites a report that differs at its next round.
func IsTrustPathsReport(rep *reportsv1alpha1.ClusterReport) bool {
	return rep.Name == TrustPathsReport && rep.Source == Source && rep.Labels[LabelManagedBy] == Source &&
		len(rep.OwnerReferences) == 0 && rep.Scope == nil
}
