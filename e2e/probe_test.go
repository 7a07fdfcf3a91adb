package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	admv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// TestTrustPathProbe: the leader's prober dials a guarded entry's real
// HTTPS endpoint, as the real kube-apiserver stores it, and verifies the
// served certificate against the stored caBundle: the gauge is 1 while
// the bundle verifies it, and falls to 0 with reason unknown-authority
// within two rounds once the server switches to a leaf under another CA,
// when kube-apiserver's own calls to the entry fail with x509's unknown
// authority. The round is published as the trust-path report, which
// review and scan show. The owner's write of a bundle that does not verify
// the served leaf is warned about (from the last probe, no dial inside
// admission); its write of one that does is not, and the gauge is 1 again
// within two rounds. A leaf for another name and an endpoint where nothing
// listens are reported name-mismatch and unreachable. With verifyServing:
// deny, the write that would have been warned about is refused
// (serving-unverified) and a verifying one passes.
func TestTrustPathProbe(t *testing.T) {
	t.Parallel()
	cfg := guardConfig()
	f := newFixture(t, framework.Options{Config: cfg, ReportCRDs: true, GuardArgs: []string{"--probe-interval=1s"}})
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
	// kube-apiserver calls the entry for labelled ConfigMaps, and a call
	// that fails makes the request fail: what it meets is in the error.
	vwc.Webhooks[0].Rules = []admv1.RuleWithOperations{{
		Operations: []admv1.OperationType{admv1.Create},
		Rule:       admv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}}
	vwc.Webhooks[0].ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"probe-e2e": "call"}}
	vwc.Webhooks[0].FailurePolicy = new(admv1.Fail)
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
	if err := kubeAPIServerCall(ctx, f); err == nil || strings.Contains(err.Error(), "x509") {
		t.Fatalf("kube-apiserver's call to the entry while its caBundle verifies the served leaf: want a failure after the handshake (the test server answers nothing), got %v", err)
	}
	current.Store(keyPair(other))
	unknown := map[string]string{"kind": entry["kind"], "configuration": enforcedName, "webhook": entry["webhook"], "reason": "unknown-authority"}
	m := afterTwoRounds(t, f.env.Guard)
	if m.Sum("webhook_guard_trust_path_verified", entry) != 0 || m.Sum("webhook_guard_trust_path_probe_failures_total", unknown) < 1 {
		t.Fatalf("two rounds (two intervals) after another CA signs the served leaf, want the gauge at 0 with reason unknown-authority; the series are\n%s%s",
			m.Series("webhook_guard_trust_path_verified"), m.Series("webhook_guard_trust_path_probe_failures_total"))
	}
	if err := kubeAPIServerCall(ctx, f); err == nil || !strings.Contains(err.Error(), "x509: certificate signed by unknown authority") {
		t.Fatalf("kube-apiserver's own call to the entry once another CA signs the served leaf: want an x509 unknown-authority failure, got %v", err)
	}

	// The leader publishes the round as the trust-path ClusterReport, which
	// review and scan read beside the denials.
	kubeconfig := f.env.Kubeconfig(t, envtest.User{Name: "e2e-probe-cli", Groups: []string{"system:masters"}})
	// Each entry not verified, by configuration/webhook: the reason, and
	// the level scan gives it (warn when failurePolicy Ignore skips it).
	type failing struct{ reason, level string }
	notVerified := map[string]failing{
		enforcedName + "/" + vwc.Webhooks[0].Name:   {"unknown-authority", "fail"},
		auditedName + "/" + other2.Webhooks[0].Name: {"name-mismatch", "warn"},
		auditedName + "/" + other2.Webhooks[1].Name: {"unreachable", "warn"},
	}
	framework.Eventually(t, 20*time.Second, "the trust-path report holds the three failing entries", func() bool {
		got := trustPathReasons(t, f)
		return len(got) == len(notVerified) && !slices.ContainsFunc(slices.Collect(maps.Keys(notVerified)), func(k string) bool {
			return got[k] != notVerified[k].reason
		})
	})
	out, _ := cli(t, "review", "--kubeconfig", kubeconfig)
	t.Logf("webhook-guard review:\n%s", out)
	for key, want := range notVerified {
		config, webhook, _ := strings.Cut(key, "/")
		if !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
			return strings.Contains(l, "vwc/"+config+" "+webhook+" ") && strings.Contains(l, "("+want.reason+")")
		}) {
			t.Errorf("review does not show %s not verified (%s)", key, want.reason)
		}
	}
	if !strings.Contains(out, "Trust paths (the guard's probe") || !strings.Contains(out, "0 verified, 3 not.") {
		t.Errorf("review does not count the trust paths: want 0 verified, 3 not")
	}
	scanOut, code := cli(t, "scan", "-o", "json", "--kubeconfig", kubeconfig)
	type finding struct {
		Level         string `json:"level"`
		Check         string `json:"check"`
		Configuration string `json:"configuration"`
		Webhook       string `json:"webhook"`
		Detail        string `json:"detail"`
	}
	var scanned struct {
		Findings []finding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(scanOut), &scanned); err != nil || code != 1 {
		t.Fatalf("scan -o json exited %d (want 1: problems found): %v\n%s", code, err, scanOut)
	}
	for key, want := range notVerified {
		config, webhook, _ := strings.Cut(key, "/")
		if !slices.ContainsFunc(scanned.Findings, func(f finding) bool {
			return f.Level == want.level && f.Check == "trust-path" && f.Configuration == "ValidatingWebhookConfiguration/"+config &&
				f.Webhook == webhook && strings.Contains(f.Detail, "("+want.reason+")")
		}) {
			t.Errorf("scan has no %s trust-path finding of %s (%s):\n%s", want.level, key, want.reason, scanOut)
		}
	}

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
	if m := afterTwoRounds(t, f.env.Guard); m.Sum("webhook_guard_trust_path_verified", entry) != 1 {
		t.Fatalf("two rounds after the owner's verifying write, want the gauge at 1; the series are\n%s", m.Series("webhook_guard_trust_path_verified"))
	}
	framework.Eventually(t, 20*time.Second, "the trust-path report shows the entry verified", func() bool {
		_, failing := trustPathReasons(t, f)[enforcedName+"/"+vwc.Webhooks[0].Name]
		return !failing
	})

	// verifyServing: deny. The server switches to a leaf under a third
	// CA; once the probe has seen it, the owner's write of a bundle the
	// ownership rules admit (its current CA alone) but that does not
	// verify that leaf is refused, and its write of one that does passes.
	cfg.Owners[0].VerifyServing = guardapi.VerifyServingDeny
	f.env.Guard.RewriteConfig(t, cfg)
	third := framework.NewCA(t, "probe-third-ca")
	current.Store(keyPair(third))
	waitForProbe(t, f.env.Guard, "the gauge falls to 0 once a third CA signs the served leaf", func(m framework.Metrics) bool {
		return m.Sum("webhook_guard_trust_path_verified", entry) == 0
	})
	_, err = f.owner.SetCABundle(ctx, framework.Validating, enforcedName, other.PEM)
	if err == nil || !strings.Contains(err.Error(), "serving-unverified") || !strings.Contains(err.Error(), "unknown-authority") {
		t.Fatalf("with verifyServing: deny, the owner's write of a bundle that does not verify the served leaf: want a serving-unverified denial naming unknown-authority, got %v", err)
	}
	f.setOwnerCA(t, third.PEM)
	if _, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, append(append([]byte{}, other.PEM...), third.PEM...)); err != nil {
		t.Fatalf("with verifyServing: deny, the owner's write of a bundle that verifies the served leaf: %v", err)
	}
}

// trustPathReasons reads the trust-path report: the reason of each entry
// its last round did not verify, by configuration/webhook (none before the
// first round is published).
func trustPathReasons(t *testing.T, f *fixture) map[string]string {
	t.Helper()
	var rep reportsv1alpha1.ClusterReport
	err := reportClient(t, f).Get(context.Background(), types.NamespacedName{Name: records.TrustPathsReport}, &rep)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get the trust-path report: %v", err)
	}
	out := map[string]string{}
	for _, r := range rep.Results {
		if r.Result != "pass" {
			_, config, _ := strings.Cut(r.Properties[records.PropConfiguration], "/")
			out[config+"/"+r.Properties[records.PropWebhook]] = r.Properties[records.PropReason]
		}
	}
	return out
}

// kubeAPIServerCall makes kube-apiserver call the probed entry: a
// server-side dry run of a ConfigMap its objectSelector matches, whose
// error (failurePolicy Fail) says what kube-apiserver met.
func kubeAPIServerCall(ctx context.Context, f *fixture) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-call-", Labels: map[string]string{"probe-e2e": "call"}}}
	_, err := f.env.AdminKube.CoreV1().ConfigMaps(appNamespace).Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// afterTwoRounds scrapes the guard until the leader has completed two
// more probe rounds than when it was called, and returns that scrape.
// Called right after a change, it returns what the first round that surely
// started after the change reported (the next one may have been under way
// already): a change the probe sees within two intervals is in it.
func afterTwoRounds(t *testing.T, g *framework.Guard) framework.Metrics {
	t.Helper()
	const rounds = "webhook_guard_trust_path_probe_rounds_total"
	start := g.Metrics(t).Sum(rounds, nil)
	var m framework.Metrics
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if m = g.Metrics(t); m.Sum(rounds, nil) >= start+2 {
			return m
		}
	}
	t.Fatalf("the leader did not complete two probe rounds within 20s (from %v, now %v)", start, m.Sum(rounds, nil))
	return m
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
	return serveTLSOn(t, "127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: get})
}
