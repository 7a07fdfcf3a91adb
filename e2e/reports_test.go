package e2e

import (
	"testing"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// TestReportIdentity checks what Policy Reporter relies on, against the real
// API server: a finding keeps its resultID across flushes while its count
// grows, the report is owned by its configuration (scope and owner carry the
// configuration's uid, accepted by the API server), a denied CREATE of a
// name that never comes to exist goes to its mapping's report, not to a
// report of its own, and the garbage collector deletes the report with its
// configuration.
func TestReportIdentity(t *testing.T) {
	t.Parallel()
	f := newFixture(t, framework.Options{ReportCRDs: true, GuardArgs: []string{"--records-flush-interval", flushInterval.String()}})
	reports := reportClient(t, f)
	ctx := t.Context()
	f.create(t, framework.Validating, auditedName, f.ownerCA.PEM)
	vwcs := f.env.AdminKube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	cfg, err := vwcs.Get(ctx, auditedName, metav1.GetOptions{})
	require.NoError(t, err)

	// notOwner is the intruder's not-owner finding once its count is n.
	notOwner := func(n string) (rep *reportsv1alpha1.ClusterReport, res *reportsv1alpha1.ReportResult) {
		framework.Eventually(t, 5*flushInterval+5*time.Second, "the report counts "+n+" not-owner writes", func() bool {
			var r reportsv1alpha1.ClusterReport
			if reports.Get(ctx, types.NamespacedName{Name: records.ReportName(policy.KindValidating, auditedName)}, &r) != nil {
				return false
			}
			for i := range r.Results {
				p := r.Results[i].Properties
				if r.Results[i].Rule == string(policy.RuleNotOwner) && p[records.PropSubject] == intruderUser.Name && p[records.PropCount] == n {
					rep, res = &r, &r.Results[i]
					return true
				}
			}
			return false
		})
		return rep, res
	}

	_, err = f.intruder.Annotate(ctx, framework.Validating, auditedName, "e2e/intruder", "1")
	require.NoError(t, err)
	rep, first := notOwner("1")
	for _, v := range []string{"2", "3"} {
		_, err = f.intruder.Annotate(ctx, framework.Validating, auditedName, "e2e/intruder", v)
		require.NoError(t, err)
	}
	_, again := notOwner("3")

	assert.NotEmpty(t, first.Properties[records.PropResultID])
	assert.Equal(t, first.Properties[records.PropResultID], again.Properties[records.PropResultID], "the resultID changed between flushes")
	assert.Equal(t, reportsv1alpha1.Result("warn"), again.Result)
	assert.False(t, again.Scored, "an audit would-deny is a warn, which OpenReports defines as not scored")
	assert.Equal(t, "Ownership", again.Category)
	require.NotNil(t, rep.Scope)
	assert.Equal(t, cfg.UID, rep.Scope.UID)
	assert.Equal(t, []metav1.OwnerReference{{APIVersion: "admissionregistration.k8s.io/v1", Kind: string(policy.KindValidating), Name: auditedName, UID: cfg.UID}},
		rep.OwnerReferences)

	// A CREATE of the enforced mapping's name by the intruder is denied: the
	// name never exists, so the finding goes to the mapping's report.
	_, err = f.intruder.Create(ctx, framework.Spec{Kind: framework.Validating, Name: enforcedName}, metav1.CreateOptions{})
	requireDenied(t, err, "not-owner")
	framework.Eventually(t, 5*flushInterval+5*time.Second, "the denied CREATE is in the enforced mapping's report", func() bool {
		var r reportsv1alpha1.ClusterReport
		if reports.Get(ctx, types.NamespacedName{Name: records.AbsentReportName(enforcedMapping)}, &r) != nil || len(r.Results) == 0 {
			return false
		}
		return r.Results[0].Properties[records.PropConfiguration] == string(policy.KindValidating)+"/"+enforcedName && r.Results[0].Result == "fail" && r.Results[0].Scored
	})
	err = reports.Get(ctx, types.NamespacedName{Name: records.ReportName(policy.KindValidating, enforcedName)}, &reportsv1alpha1.ClusterReport{})
	assert.True(t, apierrors.IsNotFound(err), "a report of its own was written for a configuration that does not exist: %v", err)

	// kube-controller-manager's garbage collector deletes the report with
	// its configuration.
	framework.StartGarbageCollector(t, f.env.Admin)
	require.NoError(t, f.admin.Delete(ctx, framework.Validating, auditedName, metav1.DeleteOptions{}))
	framework.Eventually(t, 30*time.Second, "the garbage collector deletes the report of the deleted configuration", func() bool {
		err := reports.Get(ctx, types.NamespacedName{Name: records.ReportName(policy.KindValidating, auditedName)}, &reportsv1alpha1.ClusterReport{})
		return apierrors.IsNotFound(err)
	})

}
