package e2e

// Policy shape's syncer on the real kube-apiserver: a generated policy
// kube-apiserver refuses leaves its mapping failing closed, and the anchor
// ClusterRole that owns every generated object is protected from everyone
// but break-glass, and its loss is visible at once.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap"
	"github.com/webhook-guard/webhook-guard/webhook/policysync"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// maxLiteralCA is the largest owner CA (PEM bytes) whose generated
// policies kube-apiserver accepts for the mapping named owner of cfg, its
// CA a Secret key read as the policy's param: kube-apiserver's CEL parser
// refuses an expression of more than 100,000 code points ("expression
// code point size exceeds limit"), and the policies hold the CA as a
// base64 literal, once in a variable and once in the changes-trust
// matchCondition, which cannot read variables. It is found by generating
// the policies with CAs of growing size (each expression is ASCII: a code
// point a byte); the test then shows kube-apiserver refusing a CA past it.
func maxLiteralCA(t testing.TB, cfg *guardapi.GuardConfig, owner string) int {
	t.Helper()
	spec := *cfg
	spec.APIVersion, spec.Kind = guardapi.APIVersion, guardapi.Kind
	doc, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	mappings, err := policy.Load(doc)
	if err != nil {
		t.Fatal(err)
	}
	fits := func(n int) bool {
		pemBytes := []byte("-----BEGIN CERTIFICATE-----\n" + strings.Repeat("A", n-55) + "\n-----END CERTIFICATE-----\n")
		ref := mappings.Spec.Owners[slices.IndexFunc(mappings.Spec.Owners, func(o guardapi.Owner) bool { return o.Name == owner })].CA.Secret
		objs, err := vap.Generate(vap.Input{Config: mappings, CAs: map[string]vap.CA{owner: {PEM: pemBytes, Source: "size probe", Param: ref}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range objs.Policies {
			for _, e := range policyExpressions(p) {
				if len(e) > 100000 {
					return false
				}
			}
		}
		return true
	}
	lo, hi := 1000, 200000 // fits(lo), !fits(hi)
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// policyExpressions are every CEL expression of p.
func policyExpressions(p *admv1.ValidatingAdmissionPolicy) []string {
	var out []string
	for _, c := range p.Spec.MatchConditions {
		out = append(out, c.Expression)
	}
	for _, v := range p.Spec.Variables {
		out = append(out, v.Expression)
	}
	for _, v := range p.Spec.Validations {
		out = append(out, v.Expression, v.MessageExpression)
	}
	return out
}

// paddedCA is a self-signed CA certificate (PEM) of about 3 KB: many
// DNS names, as a CA with name constraints or a long SAN list carries.
func paddedCA(t testing.TB, i int) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for j := range 60 {
		names = append(names, fmt.Sprintf("host-%03d.padded-ca-%03d.webhook-guard.example.com", j, i))
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(int64(i) + 1), Subject: pkix.Name{CommonName: fmt.Sprintf("padded-ca-%d", i)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, DNSNames: names,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// eventsWithReason lists the Events of reason in the guard's Events namespace.
func eventsWithReason(t testing.TB, f *fixture, reason string) []string {
	t.Helper()
	evs, err := f.env.AdminKube.EventsV1().Events(records.EventNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		if e.Reason == reason {
			out = append(out, e.Regarding.Kind+"/"+e.Regarding.Name+": "+e.Note)
		}
	}
	return out
}

// TestHardeningSyncRefusedPolicyFailsClosed: a mapping whose CA is past
// what kube-apiserver accepts in a policy is refused; the guard then writes
// the mapping a policy without a CA, so the owner's caBundle changes are
// denied ca-unavailable naming the refusal, while the other mappings keep
// their CA and the refusal is counted and written as an Event.
func TestHardeningSyncRefusedPolicyFailsClosed(t *testing.T) {
	const bigMapping, bigName, bigSecret = "big", "big-webhooks", "big-ca"
	big := mapping(bigMapping, guardapi.ModeEnforce, bigName, guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: appNamespace, Name: bigSecret, Key: "ca.crt"}})
	opts := policyOptions()
	opts.Config = guardConfig(big)
	f := newFixture(t, opts)
	ctx := t.Context()
	// A bundle of distinct CA certificates (the guard reads at most 64 per
	// source), each with enough names to make it a few KB: past the limit.
	limit := maxLiteralCA(t, opts.Config, bigMapping)
	var bigPEM []byte
	for i := 0; len(bigPEM) <= limit; i++ {
		bigPEM = append(bigPEM, paddedCA(t, i)...)
	}
	t.Logf("the big mapping's CA: %d certificates, %d bytes (limit %d)", bytes.Count(bigPEM, []byte("BEGIN CERTIFICATE")), len(bigPEM), limit)
	if _, err := f.env.AdminKube.CoreV1().Secrets(appNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bigSecret}, Data: map[string][]byte{"ca.crt": bigPEM},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPolicyActive(t, f)
	f.create(t, framework.Validating, bigName, f.ownerCA.PEM)

	framework.Eventually(t, 30*time.Second, "the guard counts the big mapping refused", func() bool {
		return f.env.Guard.Metric(t, "webhook_guard_policy_mapping_refused", map[string]string{"mapping": bigMapping}) == 1
	})
	if n := f.env.Guard.Metric(t, "webhook_guard_policy_write_refusals_total", map[string]string{"mapping": bigMapping}); n < 1 {
		t.Errorf("webhook_guard_policy_write_refusals_total{mapping=big} = %g; want >= 1", n)
	}
	for _, m := range []string{enforcedMapping, auditedMapping} {
		if v := f.env.Guard.Metric(t, "webhook_guard_policy_mapping_refused", map[string]string{"mapping": m}); v != 0 {
			t.Errorf("mapping %s counted refused (%g): only the big one is", m, v)
		}
	}

	t.Run("the owner's caBundle change is denied ca-unavailable, naming the refusal", func(t *testing.T) {
		other := framework.NewCA(t, "any-new-ca").PEM
		var err error
		defer func() {
			if t.Failed() {
				t.Logf("kube-apiserver's last answer to the owner's write: %v", err)
			}
		}()
		// Until kube-apiserver has loaded the fail-closed policy it
		// enforces what the guard's first pass wrote before the refusal:
		// the mapping's not-owner policy alone, which admits the owner's
		// write (as no policy did before the guard's first pass). Wait for
		// the refusal's denial, with a new CA after a write admitted in
		// that window: writing the same one again changes no entry, which
		// every policy lets a writer do.
		attempt := 0
		framework.Eventually(t, 20*time.Second, "kube-apiserver enforces the fail-closed policy", func() bool {
			_, err = f.owner.SetCABundle(ctx, framework.Validating, bigName, other)
			if err == nil {
				attempt++
				other = framework.NewCA(t, fmt.Sprintf("any-new-ca-%d", attempt)).PEM
			}
			return err != nil && strings.Contains(err.Error(), "kube-apiserver refused the mapping's generated policy")
		})
		if attempt > 0 {
			t.Logf("%d write(s) admitted before kube-apiserver loaded the fail-closed policy", attempt)
		}
		requirePolicyDenied(t, err, vap.PolicyName(bigMapping), "ca-unavailable", "kube-apiserver refused the mapping's generated policy", "code point size exceeds limit")
		if _, err := f.owner.SetCABundle(ctx, framework.Validating, bigName, bigPEM); err == nil || !strings.Contains(err.Error(), "ca-unavailable") {
			t.Errorf("the owner writing the (oversized) CA itself: want ca-unavailable, got %v", err)
		}
		if _, err := f.owner.Annotate(ctx, framework.Validating, bigName, "e2e/by", "owner"); err != nil {
			t.Errorf("the owner's update leaving caBundle alone was denied: %v", err)
		}
		if _, err := f.intruder.Annotate(ctx, framework.Validating, bigName, "e2e/by", "intruder"); err == nil || !strings.Contains(err.Error(), "not-owner") {
			t.Errorf("a stranger's write: want not-owner, got %v", err)
		}
	})
	t.Run("the other mappings are unaffected", func(t *testing.T) {
		if !policyHoldsCA(t, f, enforcedMapping, f.ownerCA.PEM) {
			t.Error("the enforced mapping's policy lost its CA")
		}
		if _, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, f.ownerCA.PEM); err != nil {
			t.Errorf("the owner writing its own CA to another mapping's configuration: %v", err)
		}
	})
	t.Run("a refused mapping costs no write per pass", func(t *testing.T) {
		// Once the fail-closed policy is written, every pass tries the
		// refused object again (kube-apiserver refuses it; nothing is
		// stored) and writes nothing.
		gs := []*framework.Guard{f.env.Guard}
		writes, syncs := totalWrites(t, gs), totalSyncs(t, gs)
		framework.Eventually(t, 20*time.Second, "three more sync passes", func() bool {
			return totalSyncs(t, gs) >= syncs+3
		})
		if after := totalWrites(t, gs); after != writes {
			t.Errorf("webhook_guard_policy_writes_total rose from %g to %g over three passes with a refused mapping", writes, after)
		}
	})
	t.Run("the refusal is an Event about the mapping's policy", func(t *testing.T) {
		evs := eventsWithReason(t, f, policysync.ReasonPolicyRefused)
		if len(evs) != 1 || !strings.Contains(evs[0], "ValidatingAdmissionPolicy/"+vap.PolicyName(bigMapping)) || !strings.Contains(evs[0], `mapping "big"`) {
			t.Errorf("PolicyRefused Events: %q; want one about %s", evs, vap.PolicyName(bigMapping))
		}
	})
}

// TestHardeningAnchorProtected: the anchor's own policy denies its deletion
// to a cluster-admin who is not break-glass (kube-apiserver evaluates
// policies on ClusterRoles); break-glass may delete it, which is seen at
// once (gauge, Event), and `helm upgrade` creating it again brings every
// generated object back.
func TestHardeningAnchorProtected(t *testing.T) {
	f := newAnchoredFixture(t)
	ctx := t.Context()
	roles := f.env.AdminKube.RbacV1().ClusterRoles()
	framework.StartControllerManager(t, f.env.Admin, "garbagecollector")
	waitPolicyActive(t, f)
	framework.Eventually(t, 20*time.Second, "the anchor's policy and binding exist, anchored", func() bool {
		return len(generatedObjects(t, f)) == 10 && len(unanchored(t, f)) == 0
	})
	if v := f.env.Guard.Metric(t, "webhook_guard_policy_anchor_present", map[string]string{"anchor": policyAnchor}); v != 1 {
		t.Fatalf("webhook_guard_policy_anchor_present = %g; want 1", v)
	}

	t.Run("kube-controller-manager's type checker finds nothing in the anchor policy", func(t *testing.T) {
		dc := f.env.AdminKube.Discovery()
		tc := &validating.TypeChecker{
			SchemaResolver: &resolver.ClientDiscoveryResolver{Discovery: dc},
			RestMapper:     restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
		}
		p, err := f.env.AdminKube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, vap.AnchorPolicyName(policyAnchor), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if w := tc.Check(p); len(w) > 0 {
			t.Errorf("type-check warnings for %s: %v", p.Name, w)
		}
	})

	// A cluster admin who is not in system:masters (nor break-glass).
	alice := f.env.Client(t, envtest.User{Name: "alice", Groups: []string{"platform-admins"}})
	if _, err := f.env.AdminKube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-alice-cluster-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "alice"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("a cluster-admin who is not break-glass cannot delete the anchor", func(t *testing.T) {
		dryRun := metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
		var err error
		framework.Eventually(t, 20*time.Second, "kube-apiserver enforces the anchor policy (RBAC allows alice)", func() bool {
			err = alice.Kube.RbacV1().ClusterRoles().Delete(ctx, policyAnchor, dryRun)
			return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy")
		})
		err = alice.Kube.RbacV1().ClusterRoles().Delete(ctx, policyAnchor, metav1.DeleteOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), policyRef(vap.AnchorPolicyName(policyAnchor))) || !strings.Contains(err.Error(), "only break-glass may delete it") {
			t.Fatalf("alice deleting the anchor: want a 403 from %s, got %v", vap.AnchorPolicyName(policyAnchor), err)
		}
		t.Logf("kubectl delete clusterrole %s as a cluster-admin: %v", policyAnchor, err)
		r, err := roles.Get(ctx, policyAnchor, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r.Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}
		if _, err := alice.Kube.RbacV1().ClusterRoles().Update(ctx, r, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil || !strings.Contains(err.Error(), "must grant nothing") {
			t.Errorf("alice giving the anchor rules: want denied, got %v", err)
		}
		r.Rules = nil
		r.Labels = map[string]string{"helm.sh/chart": "webhook-guard-next"}
		if _, err := alice.Kube.RbacV1().ClusterRoles().Update(ctx, r, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("alice relabelling the anchor (helm upgrade): %v", err)
		}
	})
	t.Run("break-glass deleting the anchor is visible at once", func(t *testing.T) {
		if err := roles.Delete(ctx, policyAnchor, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("break-glass (system:masters) deleting the anchor: %v", err)
		}
		start := time.Now()
		framework.Eventually(t, 20*time.Second, "the gauge drops to 0", func() bool {
			return f.env.Guard.Metric(t, "webhook_guard_policy_anchor_present", map[string]string{"anchor": policyAnchor}) == 0
		})
		t.Logf("webhook_guard_policy_anchor_present fell to 0 %s after the deletion", time.Since(start).Round(time.Millisecond))
		framework.Eventually(t, 10*time.Second, "a PolicyAnchorMissing Event", func() bool {
			return len(eventsWithReason(t, f, policysync.ReasonAnchorMissing)) == 1
		})
		framework.Eventually(t, 30*time.Second, "the garbage collector deletes every generated object", func() bool {
			return len(generatedObjects(t, f)) == 0
		})
	})
	t.Run("creating the anchor again (helm upgrade) brings every object back", func(t *testing.T) {
		if _, err := roles.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: policyAnchor}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 30*time.Second, "every generated object, anchored to the new anchor", func() bool {
			return len(generatedObjects(t, f)) == 10 && len(unanchored(t, f)) == 0
		})
		if v := f.env.Guard.Metric(t, "webhook_guard_policy_anchor_present", map[string]string{"anchor": policyAnchor}); v != 1 {
			t.Errorf("webhook_guard_policy_anchor_present = %g; want 1", v)
		}
	})
}
