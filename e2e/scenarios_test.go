package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Scenario 1: the owner's service account writes its own CA: allowed, and
// the guard was asked (kube-apiserver called it through the static webhook).
func TestScenario01OwnerWritesItsOwnCA(t *testing.T) {
	f := newFixture(t, framework.Options{})
	ctx := t.Context()
	for _, tc := range []struct{ mode, mapping, name string }{
		{"enforce", enforcedMapping, enforcedName},
		{"audit", auditedMapping, auditedName},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			before := f.create(t, framework.Validating, tc.name, nil, nil)
			allowsBefore := f.decisions(t, tc.mapping, "allow")

			got, err := f.owner.SetCABundle(ctx, framework.Validating, tc.name, f.ownerCA.PEM)
			if err != nil {
				t.Fatalf("the owner writing its own CA was rejected: %v", err)
			}
			if got.ResourceVersion == before.ResourceVersion {
				t.Errorf("resourceVersion did not move (%s): the write was not stored", got.ResourceVersion)
			}
			requireBundles(t, f.owner.MustGet(t, framework.Validating, tc.name), f.ownerCA.PEM)
			if w := f.owner.Warnings.Take(); len(w) > 0 {
				t.Errorf("the owner's allowed write carried warnings: %q", w)
			}
			if n := f.decisions(t, tc.mapping, "allow"); n != allowsBefore+1 {
				t.Errorf("webhook_guard_decisions_total{mapping=%q,decision=\"allow\"} went from %g to %g; want +1 (kube-apiserver must call the guard for this UPDATE)", tc.mapping, allowsBefore, n)
			}
			for _, r := range f.env.Guard.RecordsFor(tc.name) {
				if r.Subject == ownerUser.Name {
					t.Errorf("an allowed owner write left a record: %s", r.Raw)
				}
			}
		})
	}
}

// Scenario 2: another service account updates the configuration: denied in
// enforce with the guard's message; in audit allowed, the client receives
// the warning, and a record exists.
func TestScenario02AnotherServiceAccountUpdates(t *testing.T) {
	const ownerLabel = "e2e.webhook-guard.io/owner"
	labeled := guardapi.Owner{
		Name:    "labeled",
		Mode:    guardapi.ModeEnforce,
		Match:   guardapi.Match{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{ownerLabel: "labeled"}}},
		Writers: guardapi.Subjects{ServiceAccounts: []string{appNamespace + "/" + ownerSA}},
		CA:      caFromSecret(),
	}
	f := newFixture(t, framework.Options{Config: guardConfig(labeled), AuditLog: true})
	ctx := t.Context()

	t.Run("enforce", func(t *testing.T) {
		before := f.create(t, framework.Validating, enforcedName, f.ownerCA.PEM)
		denies := f.decisions(t, enforcedMapping, "deny")
		_, err := f.intruder.Annotate(ctx, framework.Validating, enforcedName, "e2e/touched-by", intruderSA)
		requireDenied(t, err,
			`webhook-guard denied UPDATE of ValidatingWebhookConfiguration "enforced-webhooks" by "system:serviceaccount:other-system:intruder"`,
			`(mapping "enforced", enforce)`,
			`not-owner`,
			`owners[enforced].writers.serviceAccounts`)
		requireUnchanged(t, f.admin, framework.Validating, enforcedName, before.ResourceVersion, f.ownerCA.PEM)
		if n := f.decisions(t, enforcedMapping, "deny"); n != denies+1 {
			t.Errorf("webhook_guard_decisions_total{mapping=enforced,decision=deny} went from %g to %g; want +1", denies, n)
		}
		waitForRecord(t, f.env.Guard, "the denial", func(r framework.Record) bool {
			return r.Name == enforcedName && r.Subject == intruderUser.Name && r.Outcome == "deny" && r.Rule == "not-owner"
		})
	})

	// kubectl edit/patch/apply reach the guard as UPDATEs too.
	t.Run("enforce, by patch and server-side apply", func(t *testing.T) {
		before := f.admin.MustGet(t, framework.Validating, enforcedName)
		api := f.intruder.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
		intruderCA := framework.NewCA(t, "intruder-ca")
		caJSON, _ := json.Marshal(intruderCA.PEM) // []byte marshals as base64, as the API expects
		for _, p := range []struct {
			name  string
			typ   types.PatchType
			patch string
			opts  metav1.PatchOptions
		}{
			{"merge patch", types.MergePatchType, `{"metadata":{"annotations":{"e2e/patched":"merge"}}}`, metav1.PatchOptions{}},
			{"JSON patch of the caBundle", types.JSONPatchType, `[{"op":"replace","path":"/webhooks/0/clientConfig/caBundle","value":` + string(caJSON) + `}]`, metav1.PatchOptions{}},
			{"server-side apply", types.ApplyPatchType,
				`{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration","metadata":{"name":"` + enforcedName + `","annotations":{"e2e/patched":"apply"}}}`,
				metav1.PatchOptions{FieldManager: "intruder", Force: new(true)}},
		} {
			_, err := api.Patch(ctx, enforcedName, p.typ, []byte(p.patch), p.opts)
			if err == nil {
				t.Errorf("%s by the intruder was allowed", p.name)
				continue
			}
			requireDenied(t, err, `webhook-guard denied UPDATE of ValidatingWebhookConfiguration "enforced-webhooks"`, "not-owner")
		}
		requireUnchanged(t, f.admin, framework.Validating, enforcedName, before.ResourceVersion, f.ownerCA.PEM)
	})

	// A request cannot carry a configuration out of its owner's label
	// selector: ownership is decided on the stored object's labels.
	t.Run("enforce, by relabeling out of the owner's selector", func(t *testing.T) {
		before := f.admin.MustCreate(t, framework.Spec{Kind: framework.Validating, Name: "labeled-webhooks",
			Labels: map[string]string{ownerLabel: "labeled"}, Bundles: [][]byte{f.ownerCA.PEM}})
		intruderCA := framework.NewCA(t, "intruder-ca")
		_, err := f.intruder.Mutate(ctx, framework.Validating, "labeled-webhooks", metav1.UpdateOptions{}, func(m *metav1.ObjectMeta, bundles [][]byte) {
			delete(m.Labels, ownerLabel)
			bundles[0] = intruderCA.PEM
		})
		requireDenied(t, err, `(mapping "labeled", enforce)`, "not-owner")
		requireUnchanged(t, f.admin, framework.Validating, "labeled-webhooks", before.ResourceVersion, f.ownerCA.PEM)
	})

	t.Run("audit", func(t *testing.T) {
		before := f.create(t, framework.Validating, auditedName, f.ownerCA.PEM)
		recs := f.records(t, auditedMapping, "audit")
		f.intruder.Warnings.Take()
		got, err := f.intruder.Annotate(ctx, framework.Validating, auditedName, "e2e/touched-by", intruderSA)
		if err != nil {
			t.Fatalf("audit mode rejected the intruder's update: %v", err)
		}
		if got.ResourceVersion == before.ResourceVersion {
			t.Errorf("resourceVersion did not move: the allowed write was not stored")
		}
		requireWarning(t, f.intruder.Warnings.Take(), "webhook-guard (audit) would deny", "not-owner", intruderUser.Name)
		waitForRecord(t, f.env.Guard, "the audited write", func(r framework.Record) bool {
			return r.Name == auditedName && r.Subject == intruderUser.Name && r.Outcome == "audit" && r.Rule == "not-owner" && r.Mapping == auditedMapping
		})
		if n := f.records(t, auditedMapping, "audit"); n != recs+1 {
			t.Errorf("webhook_guard_records_total{mapping=audited,decision=audit} went from %g to %g; want +1", recs, n)
		}
		// kube-apiserver's audit log carries the guard's auditAnnotations,
		// prefixed with the webhook's name.
		var seen []map[string]string
		found := func() bool {
			seen = nil
			for _, ev := range f.env.AuditEvents(t) {
				if ev.Verb != "update" || ev.ObjectRef.Name != auditedName || ev.User.Username != intruderUser.Name || ev.Stage != "ResponseComplete" {
					continue
				}
				seen = append(seen, ev.Annotations)
				var decision, rule, mapping bool
				for k, v := range ev.Annotations {
					decision = decision || (strings.HasSuffix(k, "/decision") && v == "audit")
					rule = rule || (strings.HasSuffix(k, "/rule") && v == "not-owner")
					mapping = mapping || (strings.HasSuffix(k, "/mapping") && v == auditedMapping)
				}
				if decision && rule && mapping {
					return true
				}
			}
			return false
		}
		deadline := time.Now().Add(10 * time.Second)
		for !found() && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if !found() {
			t.Errorf("kube-apiserver's audit log has no update of %s by the intruder annotated with decision=audit, rule=not-owner, mapping=%s; annotations of its updates: %v",
				auditedName, auditedMapping, seen)
		}
	})
}

// TestScenario02bAuditThenEnforce follows the adoption path (audit, then enforce): the
// mapping runs in audit, then the config file is switched to enforce and
// re-read without a restart, and the same write is now denied.
func TestScenario02bAuditThenEnforceAfterConfigReload(t *testing.T) {
	f := newFixture(t, framework.Options{})
	ctx := t.Context()
	f.create(t, framework.Validating, auditedName, f.ownerCA.PEM)
	if _, err := f.intruder.Annotate(ctx, framework.Validating, auditedName, "e2e/step", "audit"); err != nil {
		t.Fatalf("audit mode rejected the intruder's update: %v", err)
	}

	cfg := guardConfig()
	cfg.Owners[1].Mode = guardapi.ModeEnforce
	f.env.Guard.RewriteConfig(t, cfg)

	_, err := f.intruder.Annotate(ctx, framework.Validating, auditedName, "e2e/step", "enforce")
	requireDenied(t, err, `(mapping "audited", enforce)`, "not-owner")

	// A broken file is refused and the last good configuration stays in
	// force: still enforce, and the failure is visible.
	f.env.Guard.RewriteConfigFile(t, []byte("apiVersion: webhook-guard.io/v1alpha1\nkind: GuardConfig\ndefaultMode: strict\nowners: []\n"), "error")
	_, err = f.intruder.Annotate(ctx, framework.Validating, auditedName, "e2e/step", "after a bad file")
	requireDenied(t, err, `(mapping "audited", enforce)`, "not-owner")
	if v := f.env.Guard.Metric(t, "webhook_guard_config_last_reload_successful", nil); v != 0 {
		t.Errorf("webhook_guard_config_last_reload_successful = %g after a bad file; want 0", v)
	}
	if !strings.Contains(f.env.Guard.Log.String(), `\"strict\"`) {
		t.Errorf("the guard's log does not say what is wrong with the new file (the unknown mode %q)", "strict")
	}
}

// Scenario 3: the owner writes a foreign CA: denied, with the expected and
// found fingerprints; in audit it goes through with a warning.
func TestScenario03OwnerWritesForeignCA(t *testing.T) {
	f := newFixture(t, framework.Options{})
	ctx := t.Context()
	foreign := framework.NewCA(t, "foreign-ca")

	t.Run("enforce", func(t *testing.T) {
		before := f.create(t, framework.Validating, enforcedName, f.ownerCA.PEM, f.ownerCA.PEM)
		_, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, foreign.PEM)
		requireDenied(t, err,
			`webhook-guard denied UPDATE of ValidatingWebhookConfiguration "enforced-webhooks" by "system:serviceaccount:app-system:app-controller"`,
			`ca-mismatch`,
			`webhooks[0].clientConfig.caBundle`,
			`webhooks[1].clientConfig.caBundle`,
			`"w0.e2e.webhook-guard.io"`,
			`expected CA `+f.ownerCA.Fingerprint()[:16],
			`found `+foreign.Fingerprint()[:16])
		requireUnchanged(t, f.admin, framework.Validating, enforcedName, before.ResourceVersion, f.ownerCA.PEM)

		// Other ways a bundle stops being the owner's CA.
		for what, bundle := range map[string][]byte{
			"the owner's CA with a foreign one appended": append(append([]byte{}, f.ownerCA.PEM...), foreign.PEM...),
			"an emptied caBundle":                        nil,
			"a caBundle that is not PEM":                 []byte("not a certificate"),
		} {
			_, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, bundle)
			if err == nil {
				t.Errorf("%s was allowed", what)
				continue
			}
			requireDenied(t, err, "ca-mismatch")
		}
		requireUnchanged(t, f.admin, framework.Validating, enforcedName, before.ResourceVersion, f.ownerCA.PEM)
	})

	t.Run("audit", func(t *testing.T) {
		f.create(t, framework.Validating, auditedName, f.ownerCA.PEM)
		f.owner.Warnings.Take()
		if _, err := f.owner.SetCABundle(ctx, framework.Validating, auditedName, foreign.PEM); err != nil {
			t.Fatalf("audit mode rejected the foreign CA: %v", err)
		}
		requireBundles(t, f.admin.MustGet(t, framework.Validating, auditedName), foreign.PEM)
		requireWarning(t, f.owner.Warnings.Take(), "webhook-guard (audit) would deny", "ca-mismatch", foreign.Fingerprint()[:16])
		waitForRecord(t, f.env.Guard, "the audited foreign CA", func(r framework.Record) bool {
			return r.Name == auditedName && r.Rule == "ca-mismatch" && r.Outcome == "audit"
		})
	})
}

// Scenario 4, the incident: 8 replicas sharing the owner's service account,
// each with its own self-signed CA, update the caBundle in a loop for 20 s.
// Enforce: not one write succeeds, the resourceVersion does not move and the
// caBundle still holds the owner's CA. Audit: the writes go through and the
// flapping is reported. Both modes run at the same time on two configurations.
func TestScenario04EightReplicasFightOverCABundle(t *testing.T) {
	f := newFixture(t, framework.Options{})
	const replicas = 8
	const storm = 20 * time.Second

	type tally struct {
		ok, denied, conflict, other atomic.Int64
		mu                          sync.Mutex
		latencies                   []time.Duration
	}
	var firstOther sync.Map
	run := func(t *testing.T, name string) (*tally, []*framework.CA) {
		cas := make([]*framework.CA, replicas)
		clients := make([]*framework.Client, replicas)
		for i := range replicas {
			cas[i] = framework.NewCA(t, fmt.Sprintf("replica-%d-ca", i))
			clients[i] = f.env.Client(t, ownerUser) // its own connection and certificate, the same identity
		}
		var tl tally
		ctx, cancel := context.WithTimeout(t.Context(), storm)
		defer cancel()
		var wg sync.WaitGroup
		for i := range replicas {
			wg.Go(func() {
				for ctx.Err() == nil {
					start := time.Now()
					_, err := clients[i].SetCABundle(ctx, framework.Validating, name, cas[i].PEM)
					tl.mu.Lock()
					tl.latencies = append(tl.latencies, time.Since(start))
					tl.mu.Unlock()
					switch {
					case err == nil:
						tl.ok.Add(1)
					case apierrors.IsForbidden(err):
						tl.denied.Add(1)
					case apierrors.IsConflict(err):
						tl.conflict.Add(1)
					case ctx.Err() != nil, strings.Contains(err.Error(), "would exceed context deadline"):
						// The storm is over (client-go's rate limiter refuses to
						// wait past the deadline).
						return
					default:
						tl.other.Add(1)
						firstOther.LoadOrStore(name, err.Error())
					}
				}
			})
		}
		wg.Wait()
		slices.Sort(tl.latencies)
		pct := func(p float64) time.Duration {
			if len(tl.latencies) == 0 {
				return 0
			}
			return tl.latencies[int(p*float64(len(tl.latencies)-1))]
		}
		t.Logf("%s: %d writes succeeded, %d denied, %d conflicts, %d other errors in %s; get+update latency p50 %s, p99 %s, max %s",
			name, tl.ok.Load(), tl.denied.Load(), tl.conflict.Load(), tl.other.Load(), storm,
			pct(0.5).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), pct(1).Round(time.Millisecond))
		// A denial that takes close to the static webhook's timeout (5 s) is
		// one slow step from a timeout: with failurePolicy Fail a 500, with
		// Ignore the foreign CA gets in. The guard must stay fast under the
		// very storm it exists for.
		if p99 := pct(0.99); p99 > 2500*time.Millisecond {
			t.Errorf("under the storm the p99 get+update latency is %s, more than half the static webhook's 5 s timeout; "+
				"the guard's decision duration histogram (webhook_guard_decision_duration_seconds) shows where the time goes", p99.Round(time.Millisecond))
		}
		if msg, ok := firstOther.Load(name); ok {
			t.Errorf("%d writes failed with something other than 403/409, first: %v", tl.other.Load(), msg)
		}
		return &tl, cas
	}

	t.Run("enforce", func(t *testing.T) {
		t.Parallel()
		before := f.create(t, framework.Validating, enforcedName, f.ownerCA.PEM)
		denies := f.decisions(t, enforcedMapping, "deny")
		tl, _ := run(t, enforcedName)
		if tl.ok.Load() != 0 {
			t.Errorf("%d writes of a replica's own CA succeeded in enforce mode; want 0", tl.ok.Load())
		}
		if tl.denied.Load() == 0 {
			t.Errorf("no write was denied: the storm never reached the guard")
		}
		requireUnchanged(t, f.admin, framework.Validating, enforcedName, before.ResourceVersion, f.ownerCA.PEM)
		m := f.env.Guard.Metrics(t)
		t.Logf("guard: %s; %s; %s", strings.TrimSpace(m.Series("webhook_guard_ca_live_rereads_total")),
			strings.TrimSpace(m.Series("webhook_guard_decision_duration_seconds_sum")), strings.TrimSpace(m.Series("rest_client_requests_total")))
		if n := f.decisions(t, enforcedMapping, "deny") - denies; n < float64(tl.denied.Load()) {
			t.Errorf("webhook_guard_decisions_total{mapping=enforced,decision=deny} rose by %g; the clients saw %d denials", n, tl.denied.Load())
		}
	})

	t.Run("audit", func(t *testing.T) {
		t.Parallel()
		f.create(t, framework.Validating, auditedName, f.ownerCA.PEM)
		tl, cas := run(t, auditedName)
		if tl.ok.Load() < replicas {
			t.Errorf("only %d writes went through in audit mode; want the storm to go through (>= %d)", tl.ok.Load(), replicas)
		}
		if tl.denied.Load() != 0 {
			t.Errorf("%d writes were denied in audit mode", tl.denied.Load())
		}
		final := f.admin.MustGet(t, framework.Validating, auditedName)
		isReplicaCA := false
		for _, ca := range cas {
			isReplicaCA = isReplicaCA || bytes.Equal(final.Bundles[0], ca.PEM)
		}
		if !isReplicaCA {
			t.Errorf("after the storm the caBundle is %s, not any replica's CA", describePEM(final.Bundles[0]))
		}
		m := f.env.Guard.Metrics(t)
		flaps := m.Sum("webhook_guard_flapping_detected_total", map[string]string{"mapping": auditedMapping, "name": auditedName})
		if flaps <= 0 {
			t.Errorf("webhook_guard_flapping_detected_total{mapping=audited,name=audited-webhooks} = %g; want > 0 after %d distinct CAs were written\n%s",
				flaps, replicas, m.Series("webhook_guard_flapping_detected_total"))
		}
		if !strings.Contains(f.env.Guard.Log.String(), `"caBundle flapping detected"`) {
			t.Errorf("the guard's log does not report the flapping")
		}
	})
}

// Scenario 5: a configuration carrying cert-manager.io/inject-ca-from. The
// cainjector identity writing the Certificate's CA is allowed; the
// application's own service account writing its self-generated CA is denied.
func TestScenario05CertManagerInjectedCA(t *testing.T) {
	const (
		name        = "injected-webhooks"
		fromSecret  = "injected-from-secret-webhooks"
		certificate = "app-serving-cert"
	)
	injected := guardapi.Owner{
		Name:    "injected",
		Mode:    guardapi.ModeEnforce,
		Match:   guardapi.Match{Validating: []string{name}, Mutating: []string{fromSecret}},
		Writers: guardapi.Subjects{ServiceAccounts: []string{appNamespace + "/" + ownerSA}},
		CA:      guardapi.CASource{InjectedByCertManager: &guardapi.InjectedByCertManager{}},
	}
	cfg := guardConfig(injected)
	cfg.CertManager.CAInjectorServiceAccount = "cert-manager/cert-manager-cainjector"
	f := newFixture(t, framework.Options{Config: cfg, CertManagerCRDs: true})
	ctx := t.Context()

	// What cert-manager would have: a CA Issuer, a Certificate and the
	// Secret it issued (ca.crt is the issuing CA).
	issuerCA := framework.NewCA(t, "app-issuer-ca")
	leaf := issuerCA.Issue(t, "app-webhook.app-system.svc", "app-webhook.app-system.svc")
	dyn := dynamic.NewForConfigOrDie(f.env.Admin)
	certGVR := schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
	_, err := dyn.Resource(certGVR).Namespace(appNamespace).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1",
		"kind":       "Certificate",
		"metadata":   map[string]any{"name": certificate, "namespace": appNamespace},
		"spec": map[string]any{
			"secretName": certificate,
			"dnsNames":   []any{"app-webhook.app-system.svc"},
			"issuerRef":  map[string]any{"name": "app-ca", "kind": "Issuer"},
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the cert-manager Certificate: %v", err)
	}
	_, err = f.env.AdminKube.CoreV1().Secrets(appNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: certificate, Annotations: map[string]string{
			"cert-manager.io/certificate-name": certificate,
			"cert-manager.io/issuer-name":      "app-ca",
			"cert-manager.io/issuer-kind":      "Issuer",
		}},
		Type: corev1.SecretTypeTLS,
		Data: framework.SecretData(issuerCA, leaf),
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the Certificate's Secret: %v", err)
	}
	f.admin.MustCreate(t, framework.Spec{
		Kind:        framework.Validating,
		Name:        name,
		Annotations: map[string]string{"cert-manager.io/inject-ca-from": appNamespace + "/" + certificate},
		Bundles:     [][]byte{nil},
	})
	cainjector := f.env.ServiceAccount(t, "cert-manager", "cert-manager-cainjector")

	got, err := cainjector.SetCABundle(ctx, framework.Validating, name, issuerCA.PEM)
	if err != nil {
		t.Fatalf("cainjector writing the Certificate's CA was rejected: %v", err)
	}
	requireBundles(t, got, issuerCA.PEM)

	own := framework.NewCA(t, "app-self-generated-ca")
	_, err = f.owner.SetCABundle(ctx, framework.Validating, name, own.PEM)
	requireDenied(t, err, `(mapping "injected", enforce)`, "ca-mismatch", "expected CA "+issuerCA.Fingerprint()[:16], "found "+own.Fingerprint()[:16])
	requireUnchanged(t, f.admin, framework.Validating, name, got.ResourceVersion, issuerCA.PEM)

	// cainjector is a writer for the CA it injects, not for any CA.
	_, err = cainjector.SetCABundle(ctx, framework.Validating, name, own.PEM)
	requireDenied(t, err, "ca-mismatch")

	// The other annotation cainjector honours names the Secret directly.
	f.admin.MustCreate(t, framework.Spec{
		Kind:        framework.Mutating,
		Name:        fromSecret,
		Annotations: map[string]string{"cert-manager.io/inject-ca-from-secret": appNamespace + "/" + certificate},
		Bundles:     [][]byte{nil},
	})
	if _, err := cainjector.SetCABundle(ctx, framework.Mutating, fromSecret, issuerCA.PEM); err != nil {
		t.Errorf("cainjector writing the Secret's CA (inject-ca-from-secret) was rejected: %v", err)
	}
	_, err = f.owner.SetCABundle(ctx, framework.Mutating, fromSecret, own.PEM)
	requireDenied(t, err, `MutatingWebhookConfiguration "`+fromSecret+`"`, "ca-mismatch", "found "+own.Fingerprint()[:16])
}

// Scenario 6: CA rotation. The owner's Secret moves to old+new, then new;
// the owner writes each step immediately after the Secret changes (racing
// the guard's cache) and is never denied. Afterwards the retired CA is
// refused, so the check was live all along.
func TestScenario06CARotation(t *testing.T) {
	f := newFixture(t, framework.Options{})
	ctx := t.Context()
	f.create(t, framework.Validating, enforcedName, f.ownerCA.PEM)
	// Warm the guard's cache with the current CA.
	if _, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, append(append([]byte{}, f.ownerCA.PEM...), '\n')); err != nil {
		t.Fatalf("owner write before rotation: %v", err)
	}
	denies := f.decisions(t, enforcedMapping, "deny")

	current := f.ownerCA
	var retired []*framework.CA
	for round := range 3 {
		next := framework.NewCA(t, fmt.Sprintf("app-webhook-ca-%d", round+2))
		both := append(append([]byte{}, current.PEM...), next.PEM...)

		f.setOwnerCA(t, both)
		if _, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, both); err != nil {
			t.Fatalf("round %d: the owner writing old+new right after the Secret moved to old+new was rejected: %v", round, err)
		}
		f.setOwnerCA(t, next.PEM)
		if _, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, next.PEM); err != nil {
			t.Fatalf("round %d: the owner writing new right after the Secret moved to new was rejected: %v", round, err)
		}
		retired = append(retired, current)
		current = next
	}
	requireBundles(t, f.admin.MustGet(t, framework.Validating, enforcedName), current.PEM)
	if n := f.decisions(t, enforcedMapping, "deny"); n != denies {
		t.Errorf("webhook_guard_decisions_total{mapping=enforced,decision=deny} rose from %g to %g during the rotation", denies, n)
	}
	// How often the guard's cached CA was stale and the live re-read saved the write.
	t.Logf("%s", strings.TrimSpace(f.env.Guard.Metrics(t).Series("webhook_guard_ca_live_rereads_total")))

	// The retired CA is no longer accepted.
	_, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, retired[0].PEM)
	requireDenied(t, err, "ca-mismatch", "found "+retired[0].Fingerprint()[:16], "expected CA "+current.Fingerprint()[:16])

	// The CA source goes away: a caBundle change that the cached CA does not
	// cover is re-read live, finds no source and fails closed; updates that
	// leave caBundle alone still go through (docs/design.md).
	if err := f.env.AdminKube.CoreV1().Secrets(appNamespace).Delete(ctx, caSecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	unverifiable := framework.NewCA(t, "app-webhook-ca-unverifiable")
	_, err = f.owner.SetCABundle(ctx, framework.Validating, enforcedName, unverifiable.PEM)
	requireDenied(t, err, "ca-unavailable", caSecret)
	if _, err := f.owner.Annotate(ctx, framework.Validating, enforcedName, "e2e/ca-source", "gone"); err != nil {
		t.Errorf("an update that leaves caBundle alone failed while the CA source was unreadable: %v", err)
	}
}

// Scenario 7: DELETE, and delete-then-recreate, by a non-owner: denied.
func TestScenario07DeleteAndRecreateByNonOwner(t *testing.T) {
	f := newFixture(t, framework.Options{})
	ctx := t.Context()
	for _, kind := range []framework.Kind{framework.Validating, framework.Mutating} {
		t.Run(string(kind), func(t *testing.T) {
			before := f.create(t, kind, enforcedName, f.ownerCA.PEM)

			err := f.intruder.Delete(ctx, kind, enforcedName, metav1.DeleteOptions{})
			requireDenied(t, err, `webhook-guard denied DELETE of `+string(kind)+` "enforced-webhooks"`, "not-owner", "takeover")
			requireUnchanged(t, f.admin, kind, enforcedName, before.ResourceVersion, f.ownerCA.PEM)

			// Had it gone (an administrator removed it), the intruder may not
			// recreate it under the owner's name, with its own CA or none.
			if err := f.admin.Delete(ctx, kind, enforcedName, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("break-glass delete: %v", err)
			}
			intruderCA := framework.NewCA(t, "intruder-ca")
			for _, bundle := range [][]byte{intruderCA.PEM, nil} {
				_, err = f.intruder.Create(ctx, framework.Spec{Kind: kind, Name: enforcedName, Bundles: [][]byte{bundle}}, metav1.CreateOptions{})
				requireDenied(t, err, `webhook-guard denied CREATE of `+string(kind)+` "enforced-webhooks"`, "not-owner")
			}
			if _, err := f.admin.Get(ctx, kind, enforcedName); !apierrors.IsNotFound(err) {
				t.Errorf("after the denied re-creates, get = %v; want NotFound", err)
			}
			// The owner may recreate it.
			if _, err := f.owner.Create(ctx, framework.Spec{Kind: kind, Name: enforcedName, Bundles: [][]byte{f.ownerCA.PEM}}, metav1.CreateOptions{}); err != nil {
				t.Errorf("the owner re-creating its configuration was rejected: %v", err)
			}
		})
	}
}

// Scenario 8: a server-side dry-run UPDATE by a non-owner in audit mode is
// allowed, decided (the guard was called and warned) and leaves no record.
func TestScenario08DryRunLeavesNoRecord(t *testing.T) {
	f := newFixture(t, framework.Options{})
	ctx := t.Context()
	before := f.create(t, framework.Validating, auditedName, f.ownerCA.PEM)
	audits := f.decisions(t, auditedMapping, "audit")
	recs := f.records(t, auditedMapping, "audit")
	f.intruder.Warnings.Take()

	got, err := f.intruder.Mutate(ctx, framework.Validating, auditedName, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}, func(m *metav1.ObjectMeta, _ [][]byte) {
		m.Annotations = map[string]string{"e2e/dry-run": "yes"}
	})
	if err != nil {
		t.Fatalf("the dry-run update was rejected: %v", err)
	}
	if got.Annotations["e2e/dry-run"] != "yes" {
		t.Errorf("the dry-run response does not show the change")
	}
	requireWarning(t, f.intruder.Warnings.Take(), "webhook-guard (audit) would deny", "not-owner")
	if n := f.decisions(t, auditedMapping, "audit"); n != audits+1 {
		t.Errorf("webhook_guard_decisions_total{mapping=audited,decision=audit} went from %g to %g; want +1 (the dry run must be decided)", audits, n)
	}
	requireUnchanged(t, f.admin, framework.Validating, auditedName, before.ResourceVersion, f.ownerCA.PEM)

	// The same write for real is recorded; the dry run before it was not.
	if _, err := f.intruder.Annotate(ctx, framework.Validating, auditedName, "e2e/dry-run", "no"); err != nil {
		t.Fatalf("the real update was rejected: %v", err)
	}
	waitForRecord(t, f.env.Guard, "the real (not dry-run) write", func(r framework.Record) bool {
		return r.Name == auditedName && r.Subject == intruderUser.Name
	})
	if n := f.records(t, auditedMapping, "audit"); n != recs+1 {
		t.Errorf("webhook_guard_records_total{mapping=audited,decision=audit} went from %g to %g; want +1 (the real write only)", recs, n)
	}
	var intruderRecords int
	for _, r := range f.env.Guard.RecordsFor(auditedName) {
		if r.DryRun {
			t.Errorf("a dry-run request was recorded: %s", r.Raw)
		}
		if r.Subject == intruderUser.Name {
			intruderRecords++
		}
	}
	if intruderRecords != 1 {
		t.Errorf("%d records of the intruder's writes to %s; want 1 (the real write, not the dry run)", intruderRecords, auditedName)
	}
}

// Scenario 9: break-glass (system:masters): allowed with a warning, recorded.
func TestScenario09BreakGlass(t *testing.T) {
	f := newFixture(t, framework.Options{})
	ctx := t.Context()
	f.create(t, framework.Validating, enforcedName, f.ownerCA.PEM)
	recs := f.records(t, enforcedMapping, "break-glass")
	f.admin.Warnings.Take()

	decided := f.env.Guard.Metric(t, "webhook_guard_decisions_total", nil)

	foreign := framework.NewCA(t, "break-glass-ca")
	if _, err := f.admin.SetCABundle(ctx, framework.Validating, enforcedName, foreign.PEM); err != nil {
		t.Fatalf("a system:masters write to an enforced configuration was rejected: %v", err)
	}
	requireBundles(t, f.admin.MustGet(t, framework.Validating, enforcedName), foreign.PEM)
	warnings := f.admin.Warnings.Take()
	if f.env.Guard.Metric(t, "webhook_guard_decisions_total", nil) == decided {
		// The guard cannot warn about or record a request it never sees.
		t.Fatalf("kube-apiserver did not call the guard for the break-glass write, so it can be neither "+
			"warned about nor recorded (break-glass is \"always allowed, always recorded, a warning returned\"). "+
			"The rendered static manifest skips break-glass subjects entirely with matchConditions; to satisfy both "+
			"scenario 9 (recorded with a warning) and scenario 11 (break-glass writes while the guard is down), render "+
			"a second webhook for break-glass subjects only, with failurePolicy Ignore.\n--- rendered static manifest ---\n%s",
			f.env.StaticManifest())
	}
	requireWarning(t, warnings, "webhook-guard break-glass", "e2e-admin")
	waitForRecord(t, f.env.Guard, "the break-glass write", func(r framework.Record) bool {
		return r.Name == enforcedName && r.Outcome == "break-glass" && r.Subject == "e2e-admin"
	})
	if n := f.records(t, enforcedMapping, "break-glass"); n != recs+1 {
		t.Errorf("webhook_guard_records_total{mapping=enforced,decision=break-glass} went from %g to %g; want +1", recs, n)
	}
}

// Scenario 10: the guard's serving certificate is renewed on disk (new leaf,
// same CA, written the way a mounted cert-manager Secret changes) while the
// owner's writes flow: no admission call fails, and the guard serves the new
// certificate without a restart.
func TestScenario10ServingCertificateRenewal(t *testing.T) {
	f := newFixture(t, framework.Options{})
	f.create(t, framework.Validating, enforcedName, f.ownerCA.PEM)
	allows := f.decisions(t, enforcedMapping, "allow")

	ctx, cancel := context.WithCancel(t.Context())
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			_, err := f.owner.Annotate(ctx, framework.Validating, enforcedName, "e2e/write", fmt.Sprint(i))
			switch {
			case err == nil:
				ok.Add(1)
			case ctx.Err() != nil:
			default:
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
			}
		}
	})

	var leaf *framework.ServingCert
	for range 3 {
		time.Sleep(1500 * time.Millisecond)
		leaf = f.env.Guard.RenewCertificate(t, f.env.GuardCA)
		// cert-manager updates the Secret; the kubelet projects it (above).
		s, err := f.env.AdminKube.CoreV1().Secrets(framework.GuardNamespace).Get(ctx, framework.GuardSecretName, metav1.GetOptions{})
		if err == nil {
			s.Data = framework.SecretData(f.env.GuardCA, leaf)
			_, err = f.env.AdminKube.CoreV1().Secrets(framework.GuardNamespace).Update(ctx, s, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Errorf("update the guard's Secret: %v", err)
		}
	}
	// Keep writing until the guard serves the last certificate, and a bit after.
	framework.Eventually(t, 20*time.Second, "the guard serves the renewed certificate", func() bool {
		return servedSerial(t, f.env.Guard.Port) == leaf.Cert.SerialNumber.String()
	})
	time.Sleep(1500 * time.Millisecond)
	cancel()
	wg.Wait()

	t.Logf("%d owner writes succeeded, %d failed across 3 renewals", ok.Load(), failed.Load())
	if failed.Load() > 0 {
		t.Errorf("%d owner writes failed while the certificate was renewed; first: %v", failed.Load(), firstErr.Load())
	}
	if ok.Load() < 10 {
		t.Errorf("only %d writes were made; the loop did not exercise the renewal", ok.Load())
	}
	if n := f.decisions(t, enforcedMapping, "allow") - allows; n < float64(ok.Load()) {
		t.Errorf("the guard allowed %g writes but the client saw %d succeed: some writes did not go through the guard", n, ok.Load())
	}
}

// servedSerial is the serial number of the certificate the guard presents.
func servedSerial(t testing.TB, port int) string {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return "dial: " + err.Error()
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// Scenario 11: the guard is stopped. The rendered failurePolicy is Fail:
// every write that kube-apiserver must ask the guard about fails, the
// owner's included; break-glass subjects still write because matchConditions
// (CEL inside kube-apiserver) route them away from the failing-closed
// webhook; requests that are not about webhook configurations are
// unaffected.
func TestScenario11GuardStopped(t *testing.T) {
	f := newFixture(t, framework.Options{FailurePolicy: "Fail"})
	ctx := t.Context()
	if !strings.Contains(f.env.StaticManifest(), "failurePolicy: Fail") {
		t.Fatalf("the rendered static manifest does not carry failurePolicy: Fail:\n%s", f.env.StaticManifest())
	}
	f.create(t, framework.Validating, enforcedName, f.ownerCA.PEM)
	f.create(t, framework.Validating, "unguarded-webhooks", nil)

	f.env.Guard.Stop(t)

	for _, c := range []struct {
		who    string
		client *framework.Client
		name   string
	}{
		{"the intruder", f.intruder, enforcedName},
		{"the owner", f.owner, enforcedName},
		{"the owner, on an unmanaged configuration", f.owner, "unguarded-webhooks"},
	} {
		start := time.Now()
		_, err := c.client.Annotate(ctx, framework.Validating, c.name, "e2e/while-down", "x")
		t.Logf("%s: answered in %s: %v", c.who, time.Since(start).Round(time.Millisecond), err)
		if err == nil {
			t.Errorf("%s updated %s while the guard was down; failurePolicy Fail must reject it", c.who, c.name)
			continue
		}
		var status apierrors.APIStatus
		if !errors.As(err, &status) || status.Status().Code != http.StatusInternalServerError || !strings.Contains(status.Status().Message, "failed calling webhook") {
			t.Errorf("%s: want kube-apiserver's 500 \"failed calling webhook\", got %v", c.who, err)
		}
	}

	start := time.Now()
	_, err := f.admin.Annotate(ctx, framework.Validating, enforcedName, "e2e/while-down", "break-glass")
	t.Logf("break-glass write answered in %s: %v", time.Since(start).Round(time.Millisecond), err)
	if err != nil {
		t.Errorf("system:masters (break-glass) could not write while the guard was down: %v", err)
	}
	// A break-glass user in a non-masters group configured in breakGlass
	// would behave the same; system:masters is the one every cluster has.

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unaffected", Namespace: intruderNamespace}, Data: map[string]string{"k": "v"}}
	if _, err := f.intruder.Kube.CoreV1().ConfigMaps(intruderNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Errorf("creating a ConfigMap failed while the guard was down: %v", err)
	}
	cm.Data["k"] = "v2"
	if _, err := f.intruder.Kube.CoreV1().ConfigMaps(intruderNamespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Errorf("updating a ConfigMap failed while the guard was down: %v", err)
	}

	// Back up: the owner writes again and the intruder is denied again.
	f.env.Guard.Start(t)
	if _, err := f.owner.Annotate(ctx, framework.Validating, enforcedName, "e2e/after-restart", "owner"); err != nil {
		t.Errorf("the owner's write after the guard came back failed: %v", err)
	}
	_, err = f.intruder.Annotate(ctx, framework.Validating, enforcedName, "e2e/after-restart", "intruder")
	requireDenied(t, err, "not-owner")
}

// Scenario 11, the other failurePolicy: with Ignore, a stopped guard lets
// every write through unguarded (the trade-off `render --failure-policy`
// documents), the intruder's included.
func TestScenario11bGuardStoppedFailurePolicyIgnore(t *testing.T) {
	f := newFixture(t, framework.Options{FailurePolicy: "Ignore"})
	ctx := t.Context()
	f.create(t, framework.Validating, enforcedName, f.ownerCA.PEM)
	_, err := f.intruder.Annotate(ctx, framework.Validating, enforcedName, "e2e/step", "guard up")
	requireDenied(t, err, "not-owner")

	f.env.Guard.Stop(t)
	if _, err := f.intruder.Annotate(ctx, framework.Validating, enforcedName, "e2e/step", "guard down"); err != nil {
		t.Errorf("with failurePolicy Ignore and the guard down, the write failed: %v", err)
	}
}

// Scenario 12: MutatingWebhookConfigurations are guarded like Validating ones.
func TestScenario12MutatingWebhookConfigurations(t *testing.T) {
	f := newFixture(t, framework.Options{})
	ctx := t.Context()
	before := f.create(t, framework.Mutating, enforcedName, nil)

	got, err := f.owner.SetCABundle(ctx, framework.Mutating, enforcedName, f.ownerCA.PEM)
	if err != nil {
		t.Fatalf("the owner writing its own CA into a MutatingWebhookConfiguration was rejected: %v", err)
	}
	if got.ResourceVersion == before.ResourceVersion {
		t.Errorf("resourceVersion did not move")
	}

	_, err = f.intruder.Annotate(ctx, framework.Mutating, enforcedName, "e2e/touched-by", intruderSA)
	requireDenied(t, err, `webhook-guard denied UPDATE of MutatingWebhookConfiguration "enforced-webhooks"`, "not-owner")

	foreign := framework.NewCA(t, "foreign-ca")
	_, err = f.owner.SetCABundle(ctx, framework.Mutating, enforcedName, foreign.PEM)
	requireDenied(t, err, `MutatingWebhookConfiguration "enforced-webhooks"`, "ca-mismatch", "found "+foreign.Fingerprint()[:16])
	requireUnchanged(t, f.admin, framework.Mutating, enforcedName, got.ResourceVersion, f.ownerCA.PEM)

	f.create(t, framework.Mutating, auditedName, f.ownerCA.PEM)
	f.intruder.Warnings.Take()
	if _, err := f.intruder.Annotate(ctx, framework.Mutating, auditedName, "e2e/touched-by", intruderSA); err != nil {
		t.Fatalf("audit mode rejected the intruder's update of a MutatingWebhookConfiguration: %v", err)
	}
	requireWarning(t, f.intruder.Warnings.Take(), "webhook-guard (audit) would deny", "not-owner", "owners[audited]")
	waitForRecord(t, f.env.Guard, "the audited Mutating write", func(r framework.Record) bool {
		return r.Kind == string(framework.Mutating) && r.Name == auditedName && r.Outcome == "audit"
	})
}

// Scenario 13, the negative that explains the design: the same kind of
// guard registered through the API (an ordinary ValidatingWebhookConfiguration,
// not static) is never called for webhook configuration objects, while it is
// called for other resources. The static guard is called for the same writes.
func TestScenario13APIRegisteredGuardIsNeverCalled(t *testing.T) {
	f := newFixture(t, framework.Options{})
	ctx := t.Context()

	// The second guard: a TLS server that counts the AdmissionReviews it
	// gets per resource and would deny every webhook configuration write.
	ca := framework.NewCA(t, "api-registered-guard-ca")
	leaf := ca.Issue(t, "api-registered-guard")
	var mu sync.Mutex
	calls := map[string]int{}
	kp, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review struct {
			Request struct {
				UID      string `json:"uid"`
				Resource struct {
					Resource string `json:"resource"`
				} `json:"resource"`
			} `json:"request"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &review)
		res := review.Request.Resource.Resource
		mu.Lock()
		calls[res]++
		mu.Unlock()
		allowed := !strings.HasSuffix(res, "webhookconfigurations")
		w.Header().Set("Content-Type", "application/json")
		// kube-apiserver sees a failed answer, and the test asserts what it did.
		_ = json.NewEncoder(w).Encode(map[string]any{ //nolint:errchkjson // see above
			"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
			"response": map[string]any{"uid": review.Request.UID, "allowed": allowed,
				"status": map[string]any{"code": 403, "message": "api-registered guard denies"}},
		})
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	count := func(res string) int { mu.Lock(); defer mu.Unlock(); return calls[res] }

	url := fmt.Sprintf("https://%s/validate", l.Addr())
	all := []admv1.OperationType{admv1.Create, admv1.Update, admv1.Delete}
	reg := &admv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "api-registered-guard"},
		Webhooks: []admv1.ValidatingWebhook{{
			Name:         "guard.api-registered.e2e.webhook-guard.io",
			ClientConfig: admv1.WebhookClientConfig{URL: &url, CABundle: ca.PEM},
			Rules: []admv1.RuleWithOperations{
				{Operations: all, Rule: admv1.Rule{APIGroups: []string{"admissionregistration.k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}}},
				// The control: the same registration for ConfigMaps.
				{Operations: all, Rule: admv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}},
			},
			FailurePolicy:           ptr.To(admv1.Fail),
			SideEffects:             ptr.To(admv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": intruderNamespace}},
		}},
	}
	if _, err := f.env.AdminKube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, reg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("register the second guard through the API: %v", err)
	}

	// The registration takes effect for ConfigMaps (kube-apiserver's
	// webhook informer picks it up within moments).
	i := 0
	framework.Eventually(t, 15*time.Second, "the API-registered webhook is called for ConfigMaps", func() bool {
		i++
		_, _ = f.intruder.Kube.CoreV1().ConfigMaps(intruderNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("control-%d", i)}}, metav1.CreateOptions{})
		return count("configmaps") > 0
	})

	// Webhook configuration writes of every kind and operation.
	f.create(t, framework.Validating, enforcedName, f.ownerCA.PEM)
	f.create(t, framework.Mutating, enforcedName, f.ownerCA.PEM)
	staticCalls := f.env.Guard.Metric(t, "webhook_guard_decisions_total", nil)
	for _, kind := range []framework.Kind{framework.Validating, framework.Mutating} {
		if _, err := f.owner.Annotate(ctx, kind, enforcedName, "e2e/step", "owner"); err != nil {
			t.Errorf("owner update of %s: %v", kind, err)
		}
		_, err := f.intruder.Annotate(ctx, kind, enforcedName, "e2e/step", "intruder")
		requireDenied(t, err, "not-owner") // the static guard answered
		if _, err := f.owner.Create(ctx, framework.Spec{Kind: kind, Name: "unmanaged-" + strings.ToLower(string(kind))}, metav1.CreateOptions{}); err != nil {
			t.Errorf("create of an unmanaged %s: %v", kind, err)
		}
		if err := f.owner.Delete(ctx, kind, "unmanaged-"+strings.ToLower(string(kind)), metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete of an unmanaged %s: %v", kind, err)
		}
	}
	if _, err := f.admin.Annotate(ctx, framework.Validating, "api-registered-guard", "e2e/step", "admin"); err != nil {
		t.Errorf("update of the API-registered guard's own configuration: %v", err)
	}
	if n := f.env.Guard.Metric(t, "webhook_guard_decisions_total", nil) - staticCalls; n < 8 {
		t.Errorf("the static guard decided %g of the 8 webhook configuration writes; want all", n)
	}

	// A control after the writes bounds the window: the registration was live throughout.
	cmBefore := count("configmaps")
	if _, err := f.intruder.Kube.CoreV1().ConfigMaps(intruderNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "control-after"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("control ConfigMap: %v", err)
	}
	if count("configmaps") <= cmBefore {
		t.Errorf("the API-registered webhook was not called for the control ConfigMap after the writes")
	}
	for _, res := range []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"} {
		if n := count(res); n != 0 {
			t.Errorf("the API-registered webhook was called %d times for %s; kube-apiserver must never call API-registered webhooks for them", n, res)
		}
	}
	t.Logf("API-registered webhook calls: %v", calls)
}
