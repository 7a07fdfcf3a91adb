package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
)

// TestStaticShapeAuthenticatesKubeAPIServer: with `serve --client-ca-file`
// and `render static-manifest --client-cert-file/--client-key-file`, the
// real kube-apiserver presents its client certificate from the kubeconfig
// the rendered AdmissionConfiguration names, and the guard decides its
// reviews as before; an AdmissionReview posted straight to the guard without
// that certificate is refused with a 401 and records nothing.
func TestStaticShapeAuthenticatesKubeAPIServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clientCA := framework.NewCA(t, "apiserver-client-ca")
	leaf, err := clientCA.IssueClient("kube-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, caFile := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"), filepath.Join(dir, "client-ca.crt")
	for p, data := range map[string][]byte{certFile: leaf.CertPEM, keyFile: leaf.KeyPEM, caFile: clientCA.PEM} {
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f := newFixture(t, framework.Options{
		RenderArgs: []string{"--client-cert-file", certFile, "--client-key-file", keyFile},
		GuardArgs:  []string{"--client-ca-file", caFile, "--records-flush-interval", flushInterval.String()},
	})
	if !strings.Contains(string(f.env.Rendered["admission-configuration.yaml"]), "kubeConfigFile: /") {
		t.Fatalf("the rendered AdmissionConfiguration names no kubeconfig:\n%s", f.env.Rendered["admission-configuration.yaml"])
	}
	ctx := t.Context()
	g := f.env.Guard

	// Through kube-apiserver: it authenticates, the guard decides.
	f.create(t, framework.Validating, enforcedName, f.ownerCA.PEM)
	if _, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, append(append([]byte{}, f.ownerCA.PEM...), '\n')); err != nil {
		t.Fatalf("the owner's write through kube-apiserver was not admitted: %v", err)
	}
	foreign := framework.NewCA(t, "foreign-ca")
	_, err = f.intruder.SetCABundle(ctx, framework.Validating, enforcedName, foreign.PEM)
	requireDenied(t, err, "not-owner")

	// Straight to the guard, as any pod could: refused, nothing recorded.
	decisions0 := g.Metric(t, "webhook_guard_decisions_total", nil)
	forger := "system:serviceaccount:" + intruderNamespace + ":forger"
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS(f.env.GuardCA)}}
	defer client.CloseIdleConnections()
	for i := range 10 {
		body := review(t, fmt.Sprintf("forged-%d", i), admissionv1.Delete, forger, false, nil, config(enforcedName, nil, nil, f.ownerCA.PEM))
		_, err := post(client, g.URL(), body)
		if err == nil || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "client certificate") {
			t.Fatalf("a review posted without kube-apiserver's client certificate: %v; want HTTP 401 naming the client certificate", err)
		}
	}
	time.Sleep(2 * flushInterval)
	for _, r := range g.Records() {
		if r.Subject == forger {
			t.Errorf("the guard recorded a forged review: %s", r.Raw)
		}
	}
	if d := g.Metric(t, "webhook_guard_decisions_total", nil); d != decisions0 {
		t.Errorf("webhook_guard_decisions_total went from %g to %g; want no decision for forged reviews", decisions0, d)
	}
}
