package webhook

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/policy"
)

// budgetDoc gives the enforced koordinator and the audited mapping a
// budget of two caBundle-changing writes a minute.
func budgetDoc(f *fixtures) string {
	doc := guardConfigDoc(f)
	for _, ca := range []string{"  ca: {secret: {namespace: koordinator-system, name: webhook-certs}}\n", "  ca: {secret: {namespace: audited-system, name: ca}}\n"} {
		doc = strings.Replace(doc, ca, ca+"  writeBudget: {perMinute: 2}\n", 1)
	}
	return doc
}

// Test_Handler_Review_writeBudget: beyond the budget, an owner's caBundle
// changes are refused with a 429 and a retry hint in enforce mode, and
// allowed but recorded in audit mode; writes that leave caBundle alone,
// dry runs and break-glass are not counted nor limited; the window drains.
func Test_Handler_Review_writeBudget(t *testing.T) {
	f := testFixtures(t)
	store := NewConfigStore(mustLoad(t, budgetDoc(f)))
	m := NewMetrics(prometheus.NewRegistry())
	rec := &fakeRecorder{}
	res := &fakeResolver{Cached: caResult(t, koordSource, false, f.Owner.PEM, f.OwnerNew.PEM)}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h := newHandler(t, HandlerOptions{Config: store, CA: res, Metrics: m, Recorder: rec, Now: func() time.Time { return now }})

	bundles := [][]byte{f.Owner.PEM, f.OwnerNew.PEM, slices.Concat(f.Owner.PEM, f.OwnerNew.PEM)}
	write := func(name, user string, i int, dryRun bool) admissionv1.AdmissionResponse {
		old := object{Name: name, Bundles: [][]byte{bundles[i%3]}}
		obj := object{Name: name, Bundles: [][]byte{bundles[(i+1)%3]}}
		req := request(t, admissionv1.Update, policy.KindValidating, user, &obj, &old)
		if dryRun {
			req.DryRun = new(true)
		}
		return answer(t, h, req)
	}

	for i := range 2 {
		require.True(t, write("koord", koordManager, i, false).Allowed, "write %d is within the budget", i)
	}
	require.True(t, write("koord", koordManager, 2, true).Allowed, "a dry run is not limited")
	now = now.Add(20 * time.Second)
	resp := write("koord", koordManager, 2, false)
	require.False(t, resp.Allowed)
	assert.Equal(t, &metav1.Status{
		Status: metav1.StatusFailure,
		Code:   429,
		Reason: metav1.StatusReasonTooManyRequests,
		Message: `webhook-guard denied UPDATE of ValidatingWebhookConfiguration "koord" by "` + koordManager + `" (mapping "koordinator", enforce); ` +
			`write-budget: webhooks[].clientConfig.caBundle: more than 2 caBundle-changing writes by this writer to this configuration within a minute (owners[koordinator].writeBudget.perMinute); hint: retry after 40s; if the owner's controller writes caBundle in a loop, fix the loop`,
		Details: &metav1.StatusDetails{Name: "koord", Kind: "ValidatingWebhookConfiguration", RetryAfterSeconds: 40},
	}, resp.Result)

	// Unchanged caBundles are no storm; break-glass is never limited.
	same := object{Name: "koord", Bundles: [][]byte{f.Owner.PEM}, Labels: map[string]string{"touched": "yes"}}
	assert.True(t, answer(t, h, request(t, admissionv1.Update, policy.KindValidating, koordManager, &same, &object{Name: "koord", Bundles: [][]byte{f.Owner.PEM}})).Allowed)
	breakGlass := request(t, admissionv1.Update, policy.KindValidating, "admin", &object{Name: "koord", Bundles: [][]byte{f.OwnerNew.PEM}}, &object{Name: "koord", Bundles: [][]byte{f.Owner.PEM}})
	breakGlass.UserInfo.Groups = []string{"system:masters"}
	assert.True(t, answer(t, h, breakGlass).Allowed)

	// Audit mode: allowed with a warning, recorded as a would-deny.
	res.Cached = caResult(t, auditedSource, false, f.Owner.PEM, f.OwnerNew.PEM)
	for i := range 3 {
		resp := write("audited", auditedOwner, i, false)
		require.True(t, resp.Allowed, "audit mode allows write %d", i)
		if i == 2 {
			assert.Equal(t, []string{"webhook-guard (audit) would deny: write-budget: webhooks[].clientConfig.caBundle: more than 2 caBundle-changing writes by this writer to this configuration within a minute (owners[audited].writeBudget.perMinute)"}, resp.Warnings,
				"the warning drops the hint to fit; the record keeps it")
		}
	}

	assert.Equal(t, 1.0, toFloat64(t, m.WriteBudgetExceeded.WithLabelValues("koordinator", "enforce")))
	assert.Equal(t, 1.0, toFloat64(t, m.WriteBudgetExceeded.WithLabelValues("audited", "audit")))
	assert.Equal(t, []string{"koordinator/write-budget/deny", "koordinator/break-glass/break-glass", "audited/write-budget/audit"}, rec.recorded())

	// The window drains: a minute after the first writes, one fits again.
	now = now.Add(41 * time.Second)
	assert.True(t, write("koord", koordManager, 0, false).Allowed)
}

// Test_Handler_Review_writeBudget_perWriter: each writer of a mapping has
// its own budget, so one writer churning between valid bundles cannot get
// another writer's genuine rotation refused.
func Test_Handler_Review_writeBudget_perWriter(t *testing.T) {
	f := testFixtures(t)
	const injector = "system:serviceaccount:cert-manager:cainjector"
	doc := strings.Replace(budgetDoc(f), "writers: {serviceAccounts: [koordinator-system/koord-manager]}",
		"writers: {serviceAccounts: [koordinator-system/koord-manager, cert-manager/cainjector]}", 1)
	store := NewConfigStore(mustLoad(t, doc))
	res := &fakeResolver{Cached: caResult(t, koordSource, false, f.Owner.PEM, f.OwnerNew.PEM)}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h := newHandler(t, HandlerOptions{Config: store, CA: res, Metrics: NewMetrics(prometheus.NewRegistry()), Recorder: &fakeRecorder{},
		Now: func() time.Time { return now }})
	bundles := [][]byte{f.Owner.PEM, f.OwnerNew.PEM}
	write := func(user string, i int) admissionv1.AdmissionResponse {
		old := object{Name: "koord", Bundles: [][]byte{bundles[i%2]}}
		obj := object{Name: "koord", Bundles: [][]byte{bundles[(i+1)%2]}}
		return answer(t, h, request(t, admissionv1.Update, policy.KindValidating, user, &obj, &old))
	}

	for i := range 2 {
		require.True(t, write(koordManager, i).Allowed, "the churning writer's write %d is within its budget", i)
	}
	require.False(t, write(koordManager, 2).Allowed, "the churning writer has spent its budget")
	assert.True(t, write(injector, 0).Allowed, "another writer's rotation has a budget of its own")
	assert.True(t, write(injector, 1).Allowed)
	assert.False(t, write(injector, 2).Allowed, "and is limited by it")
}
