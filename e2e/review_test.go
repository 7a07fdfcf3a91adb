package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	admissionv1 "k8s.io/api/admission/v1"
	admv1 "k8s.io/api/admissionregistration/v1"
	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// flushInterval is the guard's --records-flush-interval in these tests,
// short so that the tests wait seconds, not the default 30 s.
const flushInterval = 2 * time.Second

// reportClient reads ClusterReports as the admin.
func reportClient(t *testing.T, f *fixture) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := reportsv1alpha1.Install(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(f.env.Admin, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// resultCounts maps "rule/subject/decision/foundCA" to the result's count
// in the configuration's report (empty when there is no report yet), and
// sums the audit (would-deny) counts.
func resultCounts(t *testing.T, c client.Client, name string) (map[string]int64, int64) {
	t.Helper()
	var rep reportsv1alpha1.ClusterReport
	err := c.Get(context.Background(), types.NamespacedName{Name: records.ReportName(policy.KindValidating, name)}, &rep)
	if apierrors.IsNotFound(err) {
		return map[string]int64{}, 0
	}
	if err != nil {
		t.Fatalf("get the ClusterReport of %s: %v", name, err)
	}
	out := map[string]int64{}
	var total int64
	for _, r := range rep.Results {
		if r.Properties[records.PropOrigin] == records.OriginObserved {
			// The observer's view of the same writes: counted by the
			// observer tests, not against the warnings admission returned.
			continue
		}
		n, _ := strconv.ParseInt(r.Properties[records.PropCount], 10, 64)
		out[r.Rule+"/"+r.Properties[records.PropSubject]+"/"+r.Properties[records.PropDecision]+"/"+r.Properties[records.PropFound]] = n
		if r.Properties[records.PropDecision] == "audit" {
			total += n
		}
	}
	return out, total
}

// cli runs the webhook-guard binary and returns its stdout and exit code;
// exit 2 (invalid input) fails the test.
func cli(t *testing.T, args ...string) (string, int) {
	t.Helper()
	stdout, stderr, code := runCLI(t, args...)
	if code == 2 {
		t.Fatalf("webhook-guard %s: exit 2: %s", strings.Join(args, " "), stderr)
	}
	return stdout, code
}

func writeGuardConfig(t *testing.T, dir string, cfg *guardapi.GuardConfig) string {
	t.Helper()
	p := filepath.Join(dir, "scan-guard.yaml")
	if err := os.WriteFile(p, framework.MarshalConfig(t, cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReviewIncident runs the incident in audit mode (8 replicas sharing the
// owner's service account, each writing its own CA) and checks that the
// ClusterReport counts exactly what the guard answered, that `review` names
// every replica's CA and exits 1, and that the guard's own API writes stay
// within one per report (and one Event per reason) per flush interval.
// Then the owner is fixed, the mapping enforced, and `review --since` exits 0.
func TestReviewIncident(t *testing.T) {
	f := newFixture(t, framework.Options{ReportCRDs: true, GuardArgs: []string{"--records-flush-interval", flushInterval.String()}})
	reports := reportClient(t, f)
	kubeconfig := f.env.Kubeconfig(t, envtest.User{Name: "e2e-reviewer", Groups: []string{"system:masters"}})
	const replicas = 8
	const storm = 10 * time.Second
	f.create(t, framework.Validating, auditedName, f.ownerCA.PEM)

	writesBefore := f.env.Guard.Metrics(t)

	// Each replica counts, client side, the requests the guard answered
	// with a would-deny: every one carries the guard's warning. (A 409 can
	// come after admission, so a tally of 200s alone would undercount.)
	cas := make([]*framework.CA, replicas)
	clients := make([]*framework.Client, replicas)
	for i := range replicas {
		cas[i] = framework.NewCA(t, fmt.Sprintf("replica-%d-ca", i))
		clients[i] = f.env.Client(t, ownerUser)
	}
	// Requests are never cancelled mid-flight (the storm ends between
	// requests), so every answer the guard gave reaches its replica.
	var sent, ok, conflicts, noops atomic.Int64
	stormStart := time.Now()
	deadline := stormStart.Add(storm)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				_, err := clients[i].Mutate(t.Context(), framework.Validating, auditedName, metav1.UpdateOptions{}, func(_ *metav1.ObjectMeta, bundles [][]byte) {
					if bytes.Equal(bundles[0], cas[i].PEM) {
						noops.Add(1) // the replica's own CA is still there: nothing to decide
					}
					bundles[0] = cas[i].PEM
				})
				switch {
				case err == nil:
					ok.Add(1)
				case apierrors.IsConflict(err):
					conflicts.Add(1)
				default:
					t.Errorf("replica %d: %v", i, err)
					return
				}
				sent.Add(1)
			}
		})
	}
	wg.Wait()
	stormTook := time.Since(stormStart)

	perReplica := make([]int64, replicas)
	var warned int64
	for i, c := range clients {
		for _, w := range c.Warnings.Take() {
			if strings.Contains(w, "webhook-guard (audit) would deny") && strings.Contains(w, cas[i].Fingerprint()[:16]) {
				perReplica[i]++
			}
		}
		warned += perReplica[i]
	}
	t.Logf("storm: %d requests in %s (%d ok, %d conflicts, %d rewrote the replica's own CA still in place); %d carried the guard's would-deny warning, per replica %v",
		sent.Load(), stormTook.Round(time.Millisecond), ok.Load(), conflicts.Load(), noops.Load(), warned, perReplica)
	if warned < replicas {
		t.Fatalf("only %d would-deny warnings reached the replicas", warned)
	}

	var counts map[string]int64
	var total int64
	framework.Eventually(t, 5*flushInterval+5*time.Second, "the ClusterReport counts every would-deny the replicas received", func() bool {
		counts, total = resultCounts(t, reports, auditedName)
		return total >= warned
	})
	if total != warned {
		t.Errorf("the ClusterReport counts %d would-denies; the replicas received %d warnings", total, warned)
	}
	for i, ca := range cas {
		key := "ca-mismatch/" + ownerUser.Name + "/audit/" + ca.Fingerprint()[:16]
		if counts[key] != perReplica[i] {
			t.Errorf("replica %d (CA %s): the report counts %d, the replica received %d would-deny warnings", i, ca.Fingerprint()[:16], counts[key], perReplica[i])
		}
	}
	if counts["flapping//flapping/"] < 1 {
		t.Errorf("no flapping result in the report: %v", counts)
	}
	m := f.env.Guard.Metrics(t)
	audited := map[string]string{"mapping": auditedMapping, "decision": "audit"}
	if recorded := m.Sum("webhook_guard_records_total", audited) - writesBefore.Sum("webhook_guard_records_total", audited); float64(total) != recorded {
		t.Errorf("webhook_guard_records_total rose by %g; the report counts %d", recorded, total)
	}

	// The guard's own writes: at most one ClusterReport write per flush
	// interval (plus the retries of conflicts, none with one replica) and
	// one Event per reason and origin (admission, and the observer's view
	// of the same writes) per interval.
	intervals := int(stormTook/flushInterval) + 3 // the storm plus the flushes that drained it
	reportWrites := m.Sum("webhook_guard_report_writes_total", nil) - writesBefore.Sum("webhook_guard_report_writes_total", nil)
	wouldDenyEvents := m.Sum("webhook_guard_events_total", map[string]string{"reason": records.ReasonWouldDeny}) -
		writesBefore.Sum("webhook_guard_events_total", map[string]string{"reason": records.ReasonWouldDeny})
	t.Logf("guard writes during the storm: %g ClusterReport writes, %g WouldDeny Events, for %d would-denies (bound: %d per kind); client-go: %s",
		reportWrites, wouldDenyEvents, total, intervals, strings.ReplaceAll(strings.TrimSpace(m.Series("rest_client_requests_total")), "\n", "; "))
	if reportWrites > float64(intervals) || reportWrites < 1 {
		t.Errorf("the guard wrote the ClusterReport %g times during a %s storm; want 1..%d (one per %s flush)", reportWrites, stormTook.Round(time.Second), intervals, flushInterval)
	}
	if wouldDenyEvents > float64(2*intervals) || wouldDenyEvents < 1 {
		t.Errorf("the guard emitted %g WouldDeny Events; want 1..%d (one per flush and origin)", wouldDenyEvents, 2*intervals)
	}
	framework.Eventually(t, 10*time.Second, "the aggregated WouldDeny Event is stored on the configuration", func() bool {
		evs, err := f.env.AdminKube.EventsV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == auditedName && e.Reason == records.ReasonWouldDeny {
				return true
			}
		}
		return false
	})

	out, code := cli(t, "review", "--kubeconfig", kubeconfig)
	t.Logf("webhook-guard review:\n%s", out)
	if code != 1 {
		t.Errorf("review exited %d after the storm; want 1", code)
	}
	for i, ca := range cas {
		want := fmt.Sprintf("the caBundle written by %s (CA %s) is neither the owner's CA (%s) nor already in that entry", ownerUser.Name, ca.Fingerprint()[:16], f.ownerCA.Fingerprint()[:16])
		if perReplica[i] > 0 && !strings.Contains(out, want) {
			t.Errorf("review does not suggest the fix for replica %d: no %q", i, want)
		}
	}
	if !strings.Contains(out, "caBundle flapping") {
		t.Errorf("review does not show the flapping")
	}

	// Fix as review says (every replica uses the owner's CA), enforce, and
	// run the same traffic: it passes and review --since exits 0.
	time.Sleep(1100 * time.Millisecond) // records are kept to the second
	fixed := time.Now().UTC().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(fixed))
	cfg := guardConfig()
	cfg.Owners[1].Mode = guardapi.ModeEnforce
	f.env.Guard.RewriteConfig(t, cfg)
	var passed atomic.Int64
	var wg2 sync.WaitGroup
	until := time.Now().Add(3 * time.Second)
	for i := range replicas {
		wg2.Go(func() {
			for time.Now().Before(until) {
				_, err := clients[i].SetCABundle(t.Context(), framework.Validating, auditedName, f.ownerCA.PEM)
				switch {
				case err == nil:
					passed.Add(1)
				case apierrors.IsConflict(err):
				default:
					t.Errorf("the owner's write with its own CA failed in enforce mode: %v", err)
					return
				}
			}
		})
	}
	wg2.Wait()
	if passed.Load() == 0 {
		t.Errorf("no write of the owner's CA passed in enforce mode")
	}
	time.Sleep(2 * flushInterval)
	out, code = cli(t, "review", "--kubeconfig", kubeconfig, "--since", fixed.Format(time.RFC3339))
	if code != 0 {
		t.Errorf("review --since %s exited %d after the fix (%d owner writes passed); want 0:\n%s", fixed.Format(time.RFC3339), code, passed.Load(), out)
	}
	t.Logf("after the fix: %d owner writes passed in enforce; review --since %s:\n%s", passed.Load(), fixed.Format(time.RFC3339), out)
}

// TestReviewRecordsSurviveRestartAndMergeReplicas: records flushed by one
// guard process are added to, not replaced, by the next one, and two
// replicas flushing into the same report at the same moment both count.
// The flush interval is an hour, so every write here is the flush on
// shutdown (SIGTERM), which a rolling restart relies on.
func TestReviewRecordsSurviveRestartAndMergeReplicas(t *testing.T) {
	f := newFixture(t, framework.Options{ReportCRDs: true, GuardArgs: []string{"--records-flush-interval", "1h"}})
	reports := reportClient(t, f)
	f.create(t, framework.Validating, auditedName, f.ownerCA.PEM)
	key := "not-owner/" + intruderUser.Name + "/audit/"
	intrude := func(n int) {
		t.Helper()
		for i := range n {
			if _, err := f.intruder.Annotate(t.Context(), framework.Validating, auditedName, "e2e/n", fmt.Sprint(time.Now().UnixNano(), i)); err != nil {
				t.Fatalf("audit mode rejected the intruder: %v", err)
			}
		}
	}
	count := func() int64 {
		c, _ := resultCounts(t, reports, auditedName)
		return c[key]
	}

	intrude(5)
	f.env.Guard.Stop(t)
	if n := count(); n != 5 {
		t.Fatalf("after the first guard stopped the report counts %d; want 5 (flushed on SIGTERM)", n)
	}
	f.env.Guard.Start(t)
	intrude(3)
	f.env.Guard.Stop(t)
	if n := count(); n != 8 {
		t.Fatalf("after a restart the report counts %d; want 5+3 = 8 (the new process adds to the stored counts)", n)
	}

	// Two replicas: kube-apiserver calls the first, the test sends
	// AdmissionReviews straight to the second, as a load balancer would.
	f.env.Guard.Start(t)
	second := f.env.StartReplica(t)
	intrude(4)
	for i := range 6 {
		resp := sendReview(t, f, second, i)
		if !resp.Allowed || len(resp.Warnings) == 0 {
			t.Fatalf("the second replica answered %+v; want allowed with a would-deny warning", resp)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { f.env.Guard.Stop(t) })
	wg.Go(func() { second.Stop(t) })
	wg.Wait()
	if n := count(); n != 18 {
		t.Errorf("after two replicas flushed together the report counts %d; want 8+4+6 = 18", n)
	}
	t.Logf("report count after restart and two replicas: %d; replica logs mention conflicts: %v", count(),
		strings.Contains(f.env.Guard.Log.String()+second.Log.String(), "ClusterReport write retry"))
}

// sendReview posts an AdmissionReview (the intruder annotating the audited
// configuration) to a guard replica directly.
func sendReview(t *testing.T, f *fixture, g *framework.Guard, i int) *admissionv1.AdmissionResponse {
	t.Helper()
	old := framework.Spec{Kind: framework.Validating, Name: auditedName, Bundles: [][]byte{f.ownerCA.PEM}}.Validating()
	old.TypeMeta = metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"}
	obj := old.DeepCopy()
	obj.Annotations = map[string]string{"e2e/direct": fmt.Sprint(i)}
	raw := func(o *admv1.ValidatingWebhookConfiguration) runtime.RawExtension {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID(fmt.Sprintf("direct-%d-%d", time.Now().UnixNano(), i)),
			Kind:      metav1.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"},
			Resource:  metav1.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
			Name:      auditedName,
			Operation: admissionv1.Update,
			UserInfo:  authnv1.UserInfo{Username: intruderUser.Name, Groups: intruderUser.Groups},
			Object:    raw(obj),
			OldObject: raw(old),
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(f.env.GuardCA.Cert)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, g.URL(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("post an AdmissionReview to the second replica: %v", err)
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
		t.Fatalf("decode the second replica's AdmissionReview (%s): %v", resp.Status, err)
	}
	return out.Response
}

// TestReviewScan prepares a cluster with every problem `scan` looks for:
// a mismatched caBundle, an owner CA expiring under the threshold (the
// e2e CAs live 24 h), two field managers of caBundle, an unmapped
// configuration and a mapping naming a missing one.
func TestReviewScan(t *testing.T) {
	f := newFixture(t, framework.Options{})
	ctx := t.Context()
	foreign := framework.NewCA(t, "foreign-ca")
	f.create(t, framework.Validating, "scan-mismatched", foreign.PEM)
	f.create(t, framework.Validating, "scan-stray", foreign.PEM)
	// Two writers of caBundle: the creator owns webhooks[0]'s, a second
	// manager ("cainjector") writes webhooks[1]'s.
	f.create(t, framework.Validating, "scan-two-writers", f.ownerCA.PEM, nil)
	api := f.admin.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	o, err := api.Get(ctx, "scan-two-writers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o.Webhooks[1].ClientConfig.CABundle = f.ownerCA.PEM
	if _, err := api.Update(ctx, o, metav1.UpdateOptions{FieldManager: "cainjector"}); err != nil {
		t.Fatal(err)
	}

	scanCfg := &guardapi.GuardConfig{
		DefaultMode: guardapi.ModeAudit,
		Owners: []guardapi.Owner{{
			Name:    "scanned",
			Match:   guardapi.Match{Validating: []string{"scan-mismatched", "scan-two-writers", "scan-absent"}},
			Writers: guardapi.Subjects{ServiceAccounts: []string{appNamespace + "/" + ownerSA}},
			CA:      caFromSecret(),
		}},
	}
	kubeconfig := f.env.Kubeconfig(t, envtest.User{Name: "e2e-scanner", Groups: []string{"system:masters"}})
	out, code := cli(t, "scan", "--kubeconfig", kubeconfig, "--config", writeGuardConfig(t, f.env.Dir, scanCfg), "--dial-timeout", "500ms")
	t.Logf("webhook-guard scan:\n%s", out)
	if code != 1 {
		t.Errorf("scan exited %d; want 1", code)
	}
	for _, want := range [][]string{
		{"fail", "ca-mismatch", "scanned", "ValidatingWebhookConfiguration/scan-mismatched", foreign.Fingerprint()[:16]},
		{"warn", "ca-expiry", "scanned", "ValidatingWebhookConfiguration/scan-two-writers", "under the 30d threshold"},
		{"warn", "multiple-ca-writers", "ValidatingWebhookConfiguration/scan-two-writers", "cainjector"},
		{"warn", "missing-configuration", "scanned", "ValidatingWebhookConfiguration/scan-absent"},
		{"info", "unmapped", "ValidatingWebhookConfiguration/scan-stray"},
		{"info", "serving-cert", "scan-mismatched", "unknown"},
	} {
		found := false
		for line := range strings.SplitSeq(out, "\n") {
			all := true
			for _, w := range want {
				all = all && strings.Contains(line, w)
			}
			found = found || all
		}
		if !found {
			t.Errorf("scan has no line with all of %q", want)
		}
	}

	jsonOut, _ := cli(t, "scan", "--kubeconfig", kubeconfig, "--config", writeGuardConfig(t, f.env.Dir, scanCfg), "--dial-timeout", "500ms", "-o", "json")
	var res struct {
		Problems int `json:"problems"`
	}
	if err := json.Unmarshal([]byte(jsonOut), &res); err != nil || res.Problems < 4 {
		t.Errorf("scan -o json: problems=%d (%v); want >= 4", res.Problems, err)
	}
}
