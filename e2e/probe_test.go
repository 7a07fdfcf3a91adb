package e2e

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
)

// TestTrustPathProbe: the leader's prober dials a guarded entry's real
// HTTPS endpoint, as the real kube-apiserver stores it, and verifies the
// served certificate against the stored caBundle: the gauge is 1 while
// the bundle verifies it, and falls to 0 with reason unknown-authority
// once the server switches to a leaf under another CA. The owner's write of
// a bundle that does not verify the served leaf is warned about (from the
// last probe, no dial inside admission); its write of one that does is
// not, and the gauge is 1 again. A leaf for another name and an endpoint
// where nothing listens are reported name-mismatch and unreachable.
func TestTrustPathProbe(t *testing.T) {
	t.Parallel()
	f := newFixture(t, framework.Options{GuardArgs: []string{"--probe-interval=1s"}})
	served, other := framework.NewCA(t, "probe-served-ca"), framework.NewCA(t, "probe-other-ca")
	keyPair := func(ca *framework.CA) *tls.Certificate { return keyPairFor(t, ca.Issue(t, "webhook", "127.0.0.1")) }
	var current atomic.Pointer[tls.Certificate]
	current.Store(keyPair(served))
	addr := serveCertificate(t, func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return current.Load(), nil })

	// The guarded configuration, pointed at the server by break-glass
	// (setup, not under test).
	f.create(t, framework.Validating, enforcedName, served.PEM)
	ctx := context.Background()
	vwcs := f.env.AdminKube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	vwc, err := vwcs.Get(ctx, enforcedName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vwc.Webhooks[0].ClientConfig.URL = new("https://" + addr + "/validate")
	if _, err := vwcs.Update(ctx, vwc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	entry := map[string]string{"kind": string(framework.Validating), "configuration": enforcedName, "webhook": vwc.Webhooks[0].Name}

	// A second guarded configuration whose first entry calls a server
	// whose leaf (under the stored CA) is for another name, and whose
	// second keeps the framework's URL, where nothing listens.
	wrongNameKP := keyPairFor(t, served.Issue(t, "webhook", "elsewhere.example"))
	wrongName := serveCertificate(t, func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return wrongNameKP, nil })
	f.create(t, framework.Validating, auditedName, served.PEM, served.PEM)
	other2, err := vwcs.Get(ctx, auditedName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other2.Webhooks[0].ClientConfig.URL = new("https://" + wrongName + "/validate")
	if _, err := vwcs.Update(ctx, other2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, reason := range []string{"name-mismatch", "unreachable"} {
		failed := map[string]string{"kind": string(framework.Validating), "configuration": auditedName, "webhook": other2.Webhooks[i].Name, "reason": reason}
		waitForProbe(t, f.env.Guard, "entry "+other2.Webhooks[i].Name+" is reported "+reason, func(m framework.Metrics) bool {
			return m.Sum("webhook_guard_trust_path_probe_failures_total", failed) >= 1
		})
	}

	waitForProbe(t, f.env.Guard, "the gauge is 1 while the caBundle verifies the served leaf", func(m framework.Metrics) bool {
		return strings.Contains(m.Series("webhook_guard_trust_path_verified"), enforcedName) &&
			m.Sum("webhook_guard_trust_path_verified", entry) == 1
	})
	current.Store(keyPair(other))
	unknown := map[string]string{"kind": entry["kind"], "configuration": enforcedName, "webhook": entry["webhook"], "reason": "unknown-authority"}
	waitForProbe(t, f.env.Guard, "the gauge falls to 0 with reason unknown-authority once another CA signs the served leaf", func(m framework.Metrics) bool {
		return m.Sum("webhook_guard_trust_path_verified", entry) == 0 && m.Sum("webhook_guard_trust_path_probe_failures_total", unknown) >= 1
	})

	// The owner's write of a bundle the guard admits (the stored CA and
	// the owner's) that does not verify what the endpoint now serves:
	// admitted, with a warning from the last probe's chain.
	f.owner.Warnings.Take()
	if _, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, append(append([]byte{}, served.PEM...), f.ownerCA.PEM...)); err != nil {
		t.Fatalf("the owner's write of the stored and the owner's CA: %v", err)
	}
	if w := framework.Containing(f.owner.Warnings.Take(), "does not verify the certificate"); len(w) != 1 || !strings.Contains(w[0], "unknown-authority") {
		t.Errorf("the owner's write of a bundle that does not verify the served leaf: want one warning naming unknown-authority, got %q", w)
	}

	// The owner adopts the served CA and writes a bundle that verifies
	// it: no warning, and the gauge is 1 again within two intervals.
	f.setOwnerCA(t, other.PEM)
	if _, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, append(append([]byte{}, served.PEM...), other.PEM...)); err != nil {
		t.Fatalf("the owner's write of the CA it serves under: %v", err)
	}
	if w := framework.Containing(f.owner.Warnings.Take(), "does not verify the certificate"); len(w) != 0 {
		t.Errorf("the owner's write of a bundle that verifies the served leaf warned: %q", w)
	}
	cleared := time.Now()
	waitForProbe(t, f.env.Guard, "the owner's verifying write clears the gauge", func(m framework.Metrics) bool {
		return m.Sum("webhook_guard_trust_path_verified", entry) == 1
	})
	t.Logf("the gauge was 1 again %s after the owner's verifying write (probe interval 1s)", time.Since(cleared).Round(time.Millisecond))
}

// waitForProbe scrapes the guard until ok holds, for at most ten probe
// intervals of 1s and a first list of the cache.
func waitForProbe(t *testing.T, g *framework.Guard, what string, ok func(framework.Metrics) bool) {
	t.Helper()
	var m framework.Metrics
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if m = g.Metrics(t); ok(m) {
			return
		}
	}
	t.Fatalf("%s: not within 20s; the series are\n%s%s", what, m.Series("webhook_guard_trust_path_verified"),
		m.Series("webhook_guard_trust_path_probe_failures_total"))
}

// keyPairFor is leaf as a TLS key pair.
func keyPairFor(t *testing.T, leaf *framework.ServingCert) *tls.Certificate {
	t.Helper()
	kp, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &kp
}

// serveCertificate serves the certificate get returns on 127.0.0.1 until
// the test ends (each connection completes a handshake and is closed) and
// returns its address.
func serveCertificate(t *testing.T, get func(*tls.ClientHelloInfo) (*tls.Certificate, error)) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: get})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				_ = c.(*tls.Conn).Handshake()
				_ = c.Close()
			}(c)
		}
	}()
	return l.Addr().String()
}
