package scan

import (
	"context"
	"fmt"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// CheckTrustPath is the guard's own probe of a trust path, read from the
// report its leader keeps: scan dials from wherever it runs, often outside
// the cluster where Service endpoints are out of reach; the guard dials
// from inside, as kube-apiserver calls.
const CheckTrustPath = "trust-path"

// scanTrustPaths turns the guard's trust-path report into findings: each
// path its last round did not verify (fail when fail-closed, warn when
// failurePolicy is Ignore), and an info finding when the report is stale.
// No report (no guard, probes off, no OpenReports API) is no finding; one
// scan may not read is an info finding.
func scanTrustPaths(ctx context.Context, c client.Reader, o Options) []Finding {
	var rep reportsv1alpha1.ClusterReport
	err := c.Get(ctx, types.NamespacedName{Name: records.TrustPathsReport}, &rep)
	ref := "ClusterReport/" + records.TrustPathsReport
	switch {
	case apierrors.IsNotFound(err) || records.APINotInstalled(err):
		return nil
	case err != nil:
		return []Finding{{Level: LevelInfo, Check: CheckTrustPath, Configuration: ref,
			Detail:     "the guard's trust path probes were not read: " + shortErr(err),
			Suggestion: "run scan with a role that may get openreports.io clusterreports (the chart's reader role may)"}}
	}
	if !records.IsTrustPathsReport(&rep) {
		// Anyone who may write ClusterReports can create one by that
		// name; the guard's leader writes its own over it at its next round.
		return []Finding{{Level: LevelInfo, Check: CheckTrustPath, Configuration: ref,
			Detail:     fmt.Sprintf("%s is not the guard's (source %q, label %s %q, %d owners): its results are not shown", ref, rep.Source, records.LabelManagedBy, rep.Labels[records.LabelManagedBy], len(rep.OwnerReferences)),
			Suggestion: "check who writes it (its managedFields); the guard's leader replaces it at its next probe round"}}
	}
	var out []Finding
	probedAt := rep.Annotations[records.AnnotationProbedAt]
	if t, err := time.Parse(time.RFC3339, probedAt); err != nil || o.Now.Sub(t) > records.TrustPathsStaleAfter {
		out = append(out, Finding{Level: LevelInfo, Check: CheckTrustPath, Configuration: ref,
			Detail:     fmt.Sprintf("the guard's last trust path probe is from %q, older than %s: what follows may be stale", probedAt, records.TrustPathsStaleAfter),
			Suggestion: "check that the guard runs with --probe-interval above 0 and has a leader"})
	}
	for _, r := range rep.Results {
		level := LevelFail
		switch r.Result {
		case "pass":
			continue
		case "warn":
			level = LevelWarn
		}
		p := r.Properties
		out = append(out, Finding{
			Level: level, Check: CheckTrustPath, Mapping: r.Policy, Configuration: p[records.PropConfiguration],
			Webhook:    p[records.PropWebhook],
			Detail:     fmt.Sprintf("the guard's probe at %s, failing since %s: %s", probedAt, p[records.PropSince], r.Description),
			Suggestion: p[records.PropHint],
		})
	}
	return out
}
