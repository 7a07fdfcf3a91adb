package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// TestPolicyShapeServesNoAdmissionEndpoint: in the policy shape
// kube-apiserver evaluates the generated policies and never calls the guard,
// so the guard serves no /validate at all. A forged AdmissionReview posted
// straight to the guard's webhook port (what any pod could do to the pod IP)
// is refused, and the guard records nothing for it: no decision, no record,
// no metric. Health and metrics are still served, and the policies still
// decide writes through kube-apiserver.
func TestPolicyShapeServesNoAdmissionEndpoint(t *testing.T) {
	t.Parallel()
	opts := policyOptions("--records-flush-interval", flushInterval.String())
	opts.ReportCRDs = true
	f := newFixture(t, opts)
	waitPolicyActive(t, f)
	g := f.env.Guard

	decisions0 := g.Metric(t, "webhook_guard_decisions_total", nil)
	records0 := g.Metric(t, "webhook_guard_records_total", nil)
	intruder := "system:serviceaccount:" + intruderNamespace + ":" + intruderSA
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS(f.env.GuardCA)}}
	defer client.CloseIdleConnections()
	for i := range 20 {
		body := review(t, fmt.Sprintf("forged-%d", i), admissionv1.Delete, intruder, false, nil, config(enforcedName, nil, nil, f.ownerCA.PEM))
		_, err := post(client, g.URL(), body)
		if err == nil {
			t.Fatalf("a forged AdmissionReview posted to %s was answered; want the connection refused or a 404", g.URL())
		}
		if !errors.Is(err, syscall.ECONNREFUSED) && !strings.Contains(err.Error(), "HTTP 404") {
			t.Fatalf("a forged AdmissionReview posted to %s failed with %v; want the connection refused or a 404", g.URL(), err)
		}
	}

	// Past a records flush, so that anything the forged reviews had queued
	// would show.
	time.Sleep(2 * flushInterval)
	for _, r := range g.Records() {
		if r.Subject == intruder {
			t.Errorf("the guard recorded a forged review: %s", r.Raw)
		}
	}
	if d := g.Metric(t, "webhook_guard_decisions_total", nil); d != decisions0 {
		t.Errorf("webhook_guard_decisions_total went from %g to %g; want no decision for forged reviews", decisions0, d)
	}
	if r := g.Metric(t, "webhook_guard_records_total", nil); r != records0 {
		t.Errorf("webhook_guard_records_total went from %g to %g; want no record of forged reviews", records0, r)
	}
	resp, err := http.Get("http://" + g.HealthAddr + "/readyz")
	if err != nil {
		t.Fatalf("/readyz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz answered %d; want 200 without an admission endpoint", resp.StatusCode)
	}

	// The policies still decide: kube-apiserver denies the intruder's
	// DELETE of the configuration the fixture created.
	err = f.intruder.Delete(t.Context(), framework.Validating, enforcedName, metav1.DeleteOptions{})
	requirePolicyDenied(t, err, vap.PolicyName(enforcedMapping), "not-owner")
}
