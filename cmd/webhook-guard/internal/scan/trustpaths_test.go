package scan

import (
	"context"
	"errors"
	"testing"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// trustPathsReport is a report as the guard's leader keeps it: one path
// not verified (fail closed), one skipped by kube-apiserver (Ignore), one
// verified.
func trustPathsReport(probedAt string) *reportsv1alpha1.ClusterReport {
	result := func(res, policy, failurePolicy, reason string) reportsv1alpha1.ReportResult {
		return reportsv1alpha1.ReportResult{Source: records.Source, Policy: policy, Rule: records.RuleTrustPath,
			Result: reportsv1alpha1.Result(res), Description: "Service app/hook port 443: " + reason,
			Properties: map[string]string{records.PropConfiguration: "ValidatingWebhookConfiguration/" + policy, records.PropWebhook: "w.example.com",
				records.PropFailurePolicy: failurePolicy, records.PropReason: reason, records.PropSince: "2026-12-04T09:00:00Z", records.PropHint: "fix " + reason}}
	}
	return &reportsv1alpha1.ClusterReport{
		ObjectMeta: metav1.ObjectMeta{Name: records.TrustPathsReport, Annotations: map[string]string{records.AnnotationProbedAt: probedAt},
			Labels: map[string]string{records.LabelManagedBy: records.Source}},
		Source: records.Source,
		Results: []reportsv1alpha1.ReportResult{
			result("fail", "app", "Fail", "unknown-authority"), result("warn", "other", "Ignore", "no-endpoints"), result("pass", "fine", "Fail", ""),
		},
	}
}

func Test_scanTrustPaths(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	scheme, err := webhook.NewScheme()
	require.NoError(t, err)
	withReport := func(probedAt string) client.Client {
		return fake.NewClientBuilder().WithScheme(scheme).WithObjects(trustPathsReport(probedAt)).Build()
	}
	notVerified := []Finding{
		{Level: LevelFail, Check: CheckTrustPath, Mapping: "app", Configuration: "ValidatingWebhookConfiguration/app", Webhook: "w.example.com",
			Detail:     "the guard's probe at 2026-12-04T09:59:30Z, failing since 2026-12-04T09:00:00Z: Service app/hook port 443: unknown-authority",
			Suggestion: "fix unknown-authority"},
		{Level: LevelWarn, Check: CheckTrustPath, Mapping: "other", Configuration: "ValidatingWebhookConfiguration/other", Webhook: "w.example.com",
			Detail:     "the guard's probe at 2026-12-04T09:59:30Z, failing since 2026-12-04T09:00:00Z: Service app/hook port 443: no-endpoints",
			Suggestion: "fix no-endpoints"},
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "openreports.io", Resource: "clusterreports"}, records.TrustPathsReport, errors.New(`User "dev" cannot get resource "clusterreports"`))
	tests := map[string]struct {
		client client.Client
		want   []Finding
	}{
		"if the guard's last round did not verify two paths, report them at their failure policy's level": {
			client: withReport("2026-12-04T09:59:30Z"), want: notVerified,
		},
		"if the report is older than two refreshes, say it may be stale first": {
			client: withReport("2026-12-04T09:40:00Z"),
			want: append([]Finding{{Level: LevelInfo, Check: CheckTrustPath, Configuration: "ClusterReport/webhook-guard.trust-paths",
				Detail:     `the guard's last trust path probe is from "2026-12-04T09:40:00Z", older than 10m0s: what follows may be stale`,
				Suggestion: "check that the guard runs with --probe-interval above 0 and has a leader"}},
				withProbedAt(notVerified, "2026-12-04T09:40:00Z")...),
		},
		"if a report by that name is not the guard's, show none of its results": {
			client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(forged(func(rep *reportsv1alpha1.ClusterReport) {
				rep.Labels = nil
			})).Build(),
			want: []Finding{{Level: LevelInfo, Check: CheckTrustPath, Configuration: "ClusterReport/webhook-guard.trust-paths",
				Detail:     `ClusterReport/webhook-guard.trust-paths is not the guard's (source "webhook-guard", label app.kubernetes.io/managed-by "", 0 owners): its results are not shown`,
				Suggestion: "check who writes it (its managedFields); the guard's leader replaces it at its next probe round"}},
		},
		"if a report by that name has an owner the guard never sets, show none of its results": {
			client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(forged(func(rep *reportsv1alpha1.ClusterReport) {
				rep.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: "mine", UID: "1"}}
			})).Build(),
			want: []Finding{{Level: LevelInfo, Check: CheckTrustPath, Configuration: "ClusterReport/webhook-guard.trust-paths",
				Detail:     `ClusterReport/webhook-guard.trust-paths is not the guard's (source "webhook-guard", label app.kubernetes.io/managed-by "webhook-guard", 1 owners): its results are not shown`,
				Suggestion: "check who writes it (its managedFields); the guard's leader replaces it at its next probe round"}},
		},
		"if there is no report (no guard, or probes off), there is nothing to say": {
			client: fake.NewClientBuilder().WithScheme(scheme).Build(),
		},
		"if scan may not read the report, say so as info": {
			client: fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
				Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
					return forbidden
				},
			}).Build(),
			want: []Finding{{Level: LevelInfo, Check: CheckTrustPath, Configuration: "ClusterReport/webhook-guard.trust-paths",
				Detail:     `the guard's trust path probes were not read: clusterreports.openreports.io "webhook-guard.trust-paths" is forbidden: User "dev" cannot get resource "clusterreports"`,
				Suggestion: "run scan with a role that may get openreports.io clusterreports (the chart's reader role may)"}},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, test.want, scanTrustPaths(t.Context(), test.client, Options{Now: now}))
		})
	}
}

func withProbedAt(fs []Finding, probedAt string) []Finding {
	out := make([]Finding, len(fs))
	for i, f := range fs {
		f.Detail = "the guard's probe at " + probedAt + f.Detail[len("the guard's probe at 2026-12-04T09:59:30Z"):]
		out[i] = f
	}
	return out
}

// forged is the guard's report as someone else wrote it.
func forged(change func(*reportsv1alpha1.ClusterReport)) *reportsv1alpha1.ClusterReport {
	rep := trustPathsReport("2026-12-04T09:59:30Z")
	change(rep)
	return rep
}
