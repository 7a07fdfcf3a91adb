package review

import (
	"bytes"
	"errors"
	"testing"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// trustReport is a ClusterReport as the guard writes it for a denied
// caBundle write to a CRD or an APIService: named and scoped by the kind.
func trustReport(kind policy.GuardedKind, name, entry string) *reportsv1alpha1.ClusterReport {
	return &reportsv1alpha1.ClusterReport{
		ObjectMeta: metav1.ObjectMeta{Name: records.ReportName(kind, name), Labels: map[string]string{records.LabelManagedBy: records.Source}},
		Source:     records.Source,
		Scope:      records.Scope(kind, name, ""),
		Results: []reportsv1alpha1.ReportResult{{Source: records.Source, Policy: "widgets", Rule: "not-owner", Result: "fail", Properties: map[string]string{
			records.PropMapping: "widgets", records.PropMode: "enforce", records.PropDecision: "deny", records.PropSubject: "system:serviceaccount:other:intruder",
			records.PropWebhook: entry, records.PropCount: "1", records.PropFirstSeen: "2026-11-30T04:00:00Z", records.PropLastSeen: "2026-11-30T04:00:00Z",
		}}},
	}
}

// Test_review_trustObjects: denials of CRD and APIService writes are listed
// under the objects' short kinds (crd, apiservice) and entries (conversion,
// service), and -o name names their reports.
func Test_review_trustObjects(t *testing.T) {
	scheme, err := webhook.NewScheme()
	require.NoError(t, err)
	crd, apiSvc := trustReport(policy.KindCRD, "widgets.example.com", policy.EntryConversion), trustReport(policy.KindAPIService, "v1.metrics.example.com", policy.EntryService)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(crd, apiSvc).Build()
	review := func(format string) string {
		var out bytes.Buffer
		o := Options{Output: cmdutil.OutputFlags{Format: format}, Client: c, Now: reviewNow}
		require.NoError(t, o.Validate())
		o.Out = &out
		err := o.Run(t.Context())
		ee, ok := errors.AsType[*cmdutil.ExitError](err)
		require.True(t, ok && ee.Code == cmdutil.ExitDenied, "err = %v", err)
		return out.String()
	}
	wide := review("wide")
	for _, want := range []string{"crd/widgets.example.com", "conversion", "apiservice/v1.metrics.example.com", "service", "sa:other:intruder"} {
		assert.Contains(t, wide, want)
	}
	assert.Equal(t, "clusterreport.openreports.io/webhook-guard.apiservice.v1.metrics.example.com\n"+
		"clusterreport.openreports.io/webhook-guard.crd.widgets.example.com\n", review("name"))
	assert.Contains(t, review("json"), `"configuration": "CustomResourceDefinition/widgets.example.com"`)
}
