package review

import (
	"testing"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/webhook/records"
)

func Test_FromReports_trustPathsOnlyTheGuards(t *testing.T) {
	report := func(change func(*reportsv1alpha1.ClusterReport)) reportsv1alpha1.ClusterReport {
		rep := reportsv1alpha1.ClusterReport{
			ObjectMeta: metav1.ObjectMeta{Name: records.TrustPathsReport, Labels: map[string]string{records.LabelManagedBy: records.Source},
				Annotations: map[string]string{records.AnnotationProbedAt: "2026-12-04T10:00:00Z"}},
			Source: records.Source,
			Results: []reportsv1alpha1.ReportResult{{Source: records.Source, Policy: "app", Rule: records.RuleTrustPath, Result: "fail",
				Properties: map[string]string{records.PropReason: "unknown-authority"}}},
		}
		change(&rep)
		return rep
	}
	cases := map[string]struct {
		rep  reportsv1alpha1.ClusterReport
		want bool
	}{
		"if the report is as the guard writes it, its paths are shown": {rep: report(func(*reportsv1alpha1.ClusterReport) {}), want: true},
		"if its managed-by label is not the guard's, it is not shown": {rep: report(func(r *reportsv1alpha1.ClusterReport) {
			r.Labels[records.LabelManagedBy] = "someone"
		})},
		"if it has an owner (the guard sets none), it is not shown": {rep: report(func(r *reportsv1alpha1.ClusterReport) {
			r.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: "mine", UID: "1"}}
		})},
		"if it has a scope (the guard sets none), it is not shown": {rep: report(func(r *reportsv1alpha1.ClusterReport) {
			r.Scope = records.Scope("ValidatingWebhookConfiguration", "app", "")
		})},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := FromReports([]reportsv1alpha1.ClusterReport{tc.rep}, Filter{})
			require.Equal(t, tc.want, got.TrustPaths != nil)
			require.Empty(t, got.Findings, "never a decision finding")
		})
	}
}
