package e2e

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// TestTrustObjectsHealth: the leader's health series describe a CRD's
// conversion webhook and an APIService like a webhook entry (fail closed,
// no timeout, the owner mapping, the caBundle's fingerprint and expiry, the
// APIService's Service without a ready endpoint), read from the real
// kube-apiserver's objects; its own local APIServices and CRDs without a
// conversion webhook have none.
func TestTrustObjectsHealth(t *testing.T) {
	t.Parallel()
	f := newFixture(t, framework.Options{Config: widgetsConfig(guardapi.ModeAudit), GuardRules: []rbacv1.PolicyRule{
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	}})
	ca := framework.NewCA(t, "trust-health-ca")
	f.create(t, framework.CRD, injectedCRD, ca.PEM)
	f.create(t, framework.APIService, injectedAPISvc, ca.PEM)
	fps, err := cabundle.Parse(ca.PEM)
	if err != nil {
		t.Fatal(err)
	}
	info := func(kind framework.Kind, name, entry string) map[string]string {
		return map[string]string{"kind": string(kind), "configuration": name, "webhook": entry, "failure_policy": "Fail",
			"timeout_seconds": "", "mapping": widgetsMapping, "ca_fingerprint": fps[0].Short()}
	}
	key := func(l map[string]string) string { return l["kind"] + "/" + l["configuration"] + "/" + l["webhook"] }
	want := map[string]framework.Sample{}
	for _, s := range []framework.Sample{
		{Name: "webhook_guard_webhook_info", Labels: info(framework.CRD, injectedCRD, "conversion"), Value: 1},
		{Name: "webhook_guard_webhook_info", Labels: info(framework.APIService, injectedAPISvc, "service"), Value: 1},
		{Name: "webhook_guard_webhook_cabundle_expiry_timestamp_seconds",
			Labels: map[string]string{"kind": string(framework.CRD), "configuration": injectedCRD, "webhook": "conversion"}, Value: float64(ca.Cert.NotAfter.Unix())},
		{Name: "webhook_guard_webhook_cabundle_expiry_timestamp_seconds",
			Labels: map[string]string{"kind": string(framework.APIService), "configuration": injectedAPISvc, "webhook": "service"}, Value: float64(ca.Cert.NotAfter.Unix())},
		{Name: "webhook_guard_webhook_service_ready_endpoints", Labels: map[string]string{"kind": string(framework.APIService),
			"configuration": injectedAPISvc, "webhook": "service", "service_namespace": "default", "service_name": "e2e-absent"}, Value: 0},
	} {
		want[s.Name+" "+key(s.Labels)] = s
	}

	var got map[string]framework.Sample
	var m framework.Metrics
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		m = f.env.Guard.Metrics(t)
		got = map[string]framework.Sample{}
		for _, s := range m {
			// The health families only: the prober's trust-path series
			// carry the same kinds, and its first round may or may not
			// come after the objects were created.
			if !healthFamilies[s.Name] {
				continue
			}
			if k := s.Labels["kind"]; k == string(framework.CRD) || k == string(framework.APIService) {
				got[s.Name+" "+key(s.Labels)] = s
			}
		}
		if maps.EqualFunc(got, want, sameSample) || time.Now().After(deadline) {
			break
		}
	}
	if !maps.EqualFunc(got, want, sameSample) {
		t.Fatalf("the health series of CRDs and APIServices are\n%s%s%s\nwant exactly\n%v", m.Series("webhook_guard_webhook_info"),
			m.Series("webhook_guard_webhook_cabundle_expiry_timestamp_seconds"), m.Series("webhook_guard_webhook_service_ready_endpoints"), describeSamples(want))
	}
}

// healthFamilies are the health series TestTrustObjectsHealth compares.
var healthFamilies = map[string]bool{
	"webhook_guard_webhook_info":                              true,
	"webhook_guard_webhook_cabundle_expiry_timestamp_seconds": true,
	"webhook_guard_webhook_service_ready_endpoints":           true,
}

func sameSample(a, b framework.Sample) bool {
	return a.Name == b.Name && a.Value == b.Value && maps.Equal(a.Labels, b.Labels)
}

func describeSamples(samples map[string]framework.Sample) string {
	var b strings.Builder
	for _, s := range samples {
		fmt.Fprintf(&b, "%s%v %g\n", s.Name, s.Labels, s.Value)
	}
	return b.String()
}
