package records

import (
	"fmt"
	"slices"
	"testing"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

func Test_Report_identity(t *testing.T) {
	t.Run("if the same finding is flushed again with other counts and a newer message, keep its resultID", func(t *testing.T) {
		c := newFakeClient(t)
		now := t0
		r := newRecorder(c, func() time.Time { return now }, nil)
		r.RecordDecision(t.Context(), auditDecision("u", "1111111111111111"))
		r.Flush(t.Context())
		first := getReport(t, c).Results[0].Properties[PropResultID]

		now = t0.Add(time.Hour)
		for range 5 {
			d := auditDecision("u", "1111111111111111")
			d.Violations[0].Detail = "another message"
			r.RecordDecision(t.Context(), d)
		}
		r.Flush(t.Context())
		second := getReport(t, c).Results[0]

		require.Len(t, first, 32)
		assert.Equal(t, first, second.Properties[PropResultID])
		assert.Equal(t, "6", second.Properties[PropCount])
	})

	t.Run("if two findings differ only in the CA found, give them different resultIDs", func(t *testing.T) {
		a := resultID(policy.KindValidating, cfgName, resultKey{Policy: "m", Rule: "ca-mismatch", Subject: "u", Found: "1"})
		b := resultID(policy.KindValidating, cfgName, resultKey{Policy: "m", Rule: "ca-mismatch", Subject: "u", Found: "2"})
		assert.NotEqual(t, a, b)
	})

	t.Run("if the configuration exists, the report is owned by it and its scope and subjects carry its uid", func(t *testing.T) {
		c := newFakeClient(t)
		r := newRecorder(c, func() time.Time { return t0 }, nil)
		r.RecordDecision(t.Context(), auditDecision("u", "1111111111111111"))
		r.Flush(t.Context())
		rep := getReport(t, c)

		assert.Equal(t, []metav1.OwnerReference{{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration", Name: cfgName, UID: cfgUID}}, rep.OwnerReferences)
		assert.Equal(t, Scope(policy.KindValidating, cfgName, cfgUID), rep.Scope)
		assert.Equal(t, *rep.Scope, rep.Results[0].Subjects[0])
		assert.Equal(t, "CA bundle", rep.Results[0].Category)
	})

	t.Run("if configurations that do not exist are written, keep one report per mapping whatever the names", func(t *testing.T) {
		c := newFakeClient(t)
		r := newRecorder(c, func() time.Time { return t0 }, nil)
		for i := range 3 {
			d := auditDecision("u", "1111111111111111")
			d.Name = fmt.Sprintf("never-created-%d", i)
			r.RecordDecision(t.Context(), d)
			u := &policy.Decision{Operation: policy.OperationCreate, Kind: policy.KindMutating, Name: fmt.Sprintf("unmanaged-%d", i),
				Subject: "u", Outcome: policy.OutcomeAudit, Rule: policy.RuleUnmanaged, Mode: guardapi.ModeAudit, Record: true}
			r.RecordDecision(t.Context(), u)
		}
		r.Flush(t.Context())

		var list reportsv1alpha1.ClusterReportList
		require.NoError(t, c.List(t.Context(), &list))
		var names []string
		configs := map[string][]string{}
		for _, rep := range list.Items {
			names = append(names, rep.Name)
			assert.Nil(t, rep.Scope, rep.Name)
			assert.Empty(t, rep.OwnerReferences, rep.Name)
			for _, res := range rep.Results {
				configs[rep.Name] = append(configs[rep.Name], res.Properties[PropConfiguration])
			}
		}
		slices.Sort(names)
		assert.Equal(t, []string{"webhook-guard.absent", "webhook-guard.absent.koordinator"}, names)
		assert.Equal(t, map[string][]string{
			"webhook-guard.absent": {"MutatingWebhookConfiguration/unmanaged-0", "MutatingWebhookConfiguration/unmanaged-1", "MutatingWebhookConfiguration/unmanaged-2"},
			"webhook-guard.absent.koordinator": {"ValidatingWebhookConfiguration/never-created-0", "ValidatingWebhookConfiguration/never-created-1",
				"ValidatingWebhookConfiguration/never-created-2"},
		}, configs)
	})
}

func Test_scoredOf(t *testing.T) {
	tests := map[string]struct {
		result reportsv1alpha1.Result
		exp    bool
	}{
		"if enforce denied (fail), it is scored":              {result: "fail", exp: true},
		"if break-glass passed, it is scored":                 {result: "pass", exp: true},
		"if audit would deny (warn), it is not scored":        {result: "warn", exp: false},
		"if an unmanaged write was skipped, it is not scored": {result: "skip", exp: false},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, test.exp, scoredOf(test.result))
		})
	}
}
