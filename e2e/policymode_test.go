package e2e

// Policy shape on the real kube-apiserver: no static manifest (what a
// managed cluster offers), the guard running `serve --policy-mode`, and the
// ValidatingAdmissionPolicies it generates deciding inside kube-apiserver.
//
// Scenarios of e2e/README.md that the policy shape runs here:
//   1 owner writes its own CA (allowed), 2 another service account updates
//   (denied in enforce; warned in audit), 3 the owner writes a foreign CA
//   (denied), 6 CA rotation (the param follows the Secret; the owner's next
//   write with the new CA is allowed), 7 DELETE and re-CREATE by a non-owner
//   (denied), 9 break-glass (allowed), 12 MutatingWebhookConfigurations.
//
// Scenarios the policy shape cannot express, and why:
//   4 (8 replicas fighting): denials work (each foreign CA is a ca-mismatch),
//     but the audit half — flapping reported — needs state across requests,
//     which CEL does not have; kube-apiserver's audit log is the only record.
//   5 (cert-manager inject-ca-from): expressible only per mapping, with the
//     CA of the annotation as the guard last resolved it (policy/vap doc);
//     not shown here because envtest has no cert-manager CRDs in this file's
//     environment and the generator's unit and render tests cover it.
//   6, the webhook's half: a Secret holding old+new while the owner writes
//     only new (or old) is allowed by the webhook (each certificate is in the
//     set) and denied here (bytes differ); a write racing the guard's copy of
//     a rotated CA is denied until the param follows (--policy-sync-interval).
//   8 (dry run leaves no record): the policy shape keeps no records at all; dry
//     runs are decided the same way as real requests.
//   9, the webhook's half: break-glass writes are skipped by matchConditions,
//     so they are neither warned about nor recorded (audit log only).
//   10 (guard certificate renewal) and 11 (guard stopped): kube-apiserver
//     never calls the guard in the policy shape. Decisions continue while every
//     guard replica is down; only CA rotations stop being copied.
//   13 (API-registered guard never called): the reason the policy shape exists;
//     not a policy-mode scenario.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	admv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/vap"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// policyOptions start kube-apiserver without the static manifest and the
// guard in the policy shape, with the RBAC the policy shape needs: no ConfigMap
// access (the owners' CAs are in the policies).
func policyOptions(extraArgs ...string) framework.Options {
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	return framework.Options{
		NoStaticManifest: true,
		GuardArgs: append([]string{
			"--policy-mode",
			"--policy-guard-service-account", framework.GuardNamespace + "/" + framework.GuardServiceAccount,
		}, extraArgs...),
		GuardRules: []rbacv1.PolicyRule{
			{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"}, Verbs: all},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: all},
			// What the chart's policy.caParams grants: the policies read the
			// owners' CA Secrets as params.
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}},
		},
	}
}

// policyHoldsCA reports whether every generated policy of mapping compares
// changed caBundles with exactly pem (the base64 literal isOwnerCA writes).
func policyHoldsCA(t testing.TB, f *fixture, mapping string, pem []byte) bool {
	t.Helper()
	want := `"` + base64.StdEncoding.EncodeToString(pem) + `"`
	// With the CA Secret as a param the caBundle checks (and the literal)
	// are in the mapping's second policy.
	policies := f.env.AdminKube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	p, err := policies.Get(context.Background(), vap.CAPolicyName(vap.PolicyName(mapping)), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		p, err = policies.Get(context.Background(), vap.PolicyName(mapping), metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatalf("get the policy of %s: %v", mapping, err)
	}
	// The literal stands once, in syncedCA under a param, else in ca.
	if synced := variableOf(p, "syncedCA"); synced != "" {
		return synced == want
	}
	return variableOf(p, "ca") == want
}

// waitPolicyActive waits until the guard wrote the owner's CA into both
// mappings' policies and kube-apiserver enforces them (a dry-run UPDATE by
// the intruder is denied in enforce and warned about in audit).
func waitPolicyActive(t testing.TB, f *fixture) {
	t.Helper()
	framework.Eventually(t, 20*time.Second, "the guard writes the owner's CA into both policies", func() bool {
		return policyHoldsCA(t, f, enforcedMapping, f.ownerCA.PEM) && policyHoldsCA(t, f, auditedMapping, f.ownerCA.PEM)
	})
	ctx := context.Background()
	for _, name := range []string{enforcedName, auditedName} {
		if _, err := f.admin.Get(ctx, framework.Validating, name); apierrors.IsNotFound(err) {
			f.create(t, framework.Validating, name, f.ownerCA.PEM)
		}
	}
	dryRun := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}
	touch := func(m *metav1.ObjectMeta, _ [][]byte) {
		m.Annotations = map[string]string{"e2e/probe": time.Now().String()}
	}
	framework.Eventually(t, 20*time.Second, "kube-apiserver enforces the generated policies", func() bool {
		_, err := f.intruder.Mutate(ctx, framework.Validating, enforcedName, dryRun, touch)
		if err == nil {
			return false
		}
		f.intruder.Warnings.Take()
		if _, err := f.intruder.Mutate(ctx, framework.Validating, auditedName, dryRun, touch); err != nil {
			return false
		}
		return len(framework.Containing(f.intruder.Warnings.Take(), "would deny")) > 0
	})
	// The guard may have written the policies before the CA Secret existed
	// (the fixture creates it after the guard starts) and rewritten them
	// since: wait until kube-apiserver's policy informer holds the version
	// with the owner's CA, i.e. a foreign CA is a ca-mismatch there, not a
	// ca-unavailable.
	foreign := framework.NewCA(t, "probe").PEM
	setForeign := func(_ *metav1.ObjectMeta, bundles [][]byte) {
		for i := range bundles {
			bundles[i] = foreign
		}
	}
	framework.Eventually(t, 20*time.Second, "kube-apiserver checks caBundles against the owner's CA in both policies", func() bool {
		_, err := f.owner.Mutate(ctx, framework.Validating, enforcedName, dryRun, setForeign)
		if err == nil || !strings.Contains(err.Error(), "ca-mismatch") {
			return false
		}
		f.owner.Warnings.Take()
		if _, err := f.owner.Mutate(ctx, framework.Validating, auditedName, dryRun, setForeign); err != nil {
			return false
		}
		return len(framework.Containing(f.owner.Warnings.Take(), "ca-mismatch")) > 0
	})
}

// waitMappingEnforced waits until kube-apiserver enforces the generated
// policy of a mapping besides the fixture's two (waitPolicyActive waits
// for those): kube-apiserver loads each policy and binding on its own, so
// one being enforced says nothing of another written a moment later. The
// probe is a dry-run CREATE of the mapping's configuration name by the
// intruder, which that policy denies as not-owner.
func waitMappingEnforced(t testing.TB, f *fixture, mapping, name string) {
	t.Helper()
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	from := policyRef(vap.PolicyName(mapping))
	framework.Eventually(t, 20*time.Second, "kube-apiserver enforces the policy of mapping "+mapping, func() bool {
		_, err := f.intruder.Create(t.Context(), framework.Spec{Kind: framework.Validating, Name: name}, dryRun)
		return err != nil && strings.Contains(err.Error(), from) && strings.Contains(err.Error(), "not-owner")
	})
}

// policyRef is how kube-apiserver names a ValidatingAdmissionPolicy in the
// message of a denial it caused.
func policyRef(name string) string {
	return "ValidatingAdmissionPolicy '" + name + "'"
}

// requirePolicyDenied asserts a 403 from a generated ValidatingAdmissionPolicy
// whose message holds every want.
func requirePolicyDenied(t testing.TB, err error, policyName string, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the request was allowed; want a 403 from ValidatingAdmissionPolicy %s containing %q", policyName, want)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		t.Fatalf("want an API status error, got %T: %v", err, err)
	}
	code, msg := status.Status().Code, status.Status().Message
	if code != http.StatusForbidden {
		t.Fatalf("want HTTP 403, got %d: %s", code, msg)
	}
	// A mapping whose CA is a Secret key checks caBundles in a second
	// policy that reads the Secret as its param.
	if !strings.Contains(msg, policyRef(policyName)) && !strings.Contains(msg, policyRef(vap.CAPolicyName(policyName))) {
		t.Fatalf("the 403 is not from ValidatingAdmissionPolicy %s: %s", policyName, msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("the denial message lacks %q:\n%s", w, msg)
		}
	}
}

// policyWrites sums webhook_guard_policy_writes_total on one replica.
func policyWrites(t testing.TB, g *framework.Guard) float64 {
	t.Helper()
	return g.Metric(t, "webhook_guard_policy_writes_total", nil)
}

// TestPolicyModeEnforces shows the policy shape enforcing on the real API
// server: the non-owner, the foreign CA and the non-owner DELETE are denied
// by the generated policy; in audit the client receives the warning. The
// guard probes the guarded entries as in the static shape.
func TestPolicyModeEnforces(t *testing.T) {
	f := newFixture(t, policyOptions("--probe-interval=1s"))
	ctx := t.Context()
	waitPolicyActive(t, f)
	policyEnforced, policyAudited := vap.PolicyName(enforcedMapping), vap.PolicyName(auditedMapping)

	t.Run("kube-controller-manager's type checker finds nothing in the live policies", func(t *testing.T) {
		// The same TypeChecker as the ValidatingAdmissionPolicy status
		// controller, with the schemas and REST mappings discovered from
		// this kube-apiserver.
		dc := f.env.AdminKube.Discovery()
		tc := &validating.TypeChecker{
			SchemaResolver: &resolver.ClientDiscoveryResolver{Discovery: dc},
			RestMapper:     restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
		}
		list, err := f.env.AdminKube.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{LabelSelector: vap.LabelManagedBy + "=" + vap.ManagedBy})
		if err != nil {
			t.Fatal(err)
		}
		// Per mapping, the owner policy and the one that reads the CA
		// Secret as its param (policyOptions grants what policy.caParams
		// grants).
		if len(list.Items) != 4 {
			t.Fatalf("%d generated policies; want 4 (two per mapping)", len(list.Items))
		}
		for i := range list.Items {
			if w := tc.Check(&list.Items[i]); len(w) > 0 {
				t.Errorf("type-check warnings for %s: %v", list.Items[i].Name, w)
			}
		}
	})

	t.Run("scenario 1: the owner writes its own CA", func(t *testing.T) {
		for _, name := range []string{enforcedName, auditedName} {
			f.owner.Warnings.Take()
			if _, err := f.owner.SetCABundle(ctx, framework.Validating, name, f.ownerCA.PEM); err != nil {
				t.Fatalf("%s: the owner writing its own CA was rejected: %v", name, err)
			}
			if _, err := f.owner.Annotate(ctx, framework.Validating, name, "e2e/by", "owner"); err != nil {
				t.Fatalf("%s: the owner's update leaving caBundle alone was rejected: %v", name, err)
			}
			if w := f.owner.Warnings.Take(); len(w) > 0 {
				t.Errorf("%s: the owner's allowed writes carried warnings: %q", name, w)
			}
		}
	})

	t.Run("scenario 2: another service account updates", func(t *testing.T) {
		before := f.admin.MustGet(t, framework.Validating, enforcedName)
		_, err := f.intruder.Annotate(ctx, framework.Validating, enforcedName, "e2e/touched-by", intruderSA)
		requirePolicyDenied(t, err, policyEnforced,
			`webhook-guard denied UPDATE of ValidatingWebhookConfiguration "enforced-webhooks" by "system:serviceaccount:other-system:intruder"`,
			`(mapping "enforced", enforce, policy shape)`, "not-owner", "owners[enforced].writers")
		requireUnchanged(t, f.admin, framework.Validating, enforcedName, before.ResourceVersion, f.ownerCA.PEM)

		f.intruder.Warnings.Take()
		got, err := f.intruder.Annotate(ctx, framework.Validating, auditedName, "e2e/touched-by", intruderSA)
		if err != nil {
			t.Fatalf("audit mode rejected the intruder's update: %v", err)
		}
		if got.Annotations["e2e/touched-by"] != intruderSA {
			t.Errorf("the audited write was not stored")
		}
		warnings := f.intruder.Warnings.Take()
		t.Logf("the audited client's warnings: %q", warnings)
		requireWarning(t, warnings, policyAudited, "webhook-guard (audit) would deny UPDATE", "not-owner", intruderUser.Name)
	})

	t.Run("scenario 3: the owner writes a foreign CA", func(t *testing.T) {
		foreign := framework.NewCA(t, "foreign-ca")
		before := f.admin.MustGet(t, framework.Validating, enforcedName)
		// The write carries the generation it read: kube-apiserver sets
		// the generation before the policy reads it, so a changed entry is
		// never skipped as one that leaves the webhooks alone.
		_, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, foreign.PEM)
		t.Logf("kube-apiserver's denial: %v", err)
		requirePolicyDenied(t, err, policyEnforced, "ca-mismatch", `w0.e2e.webhook-guard.io`,
			"expected CA "+f.ownerCA.Fingerprint()[:16], "Secret app-system/app-webhook-ca (key ca.crt)")
		requireUnchanged(t, f.admin, framework.Validating, enforcedName, before.ResourceVersion, f.ownerCA.PEM)

		// Emptying a caBundle is a mismatch too.
		_, err = f.owner.SetCABundle(ctx, framework.Validating, enforcedName, nil)
		requirePolicyDenied(t, err, policyEnforced, "ca-mismatch")

		f.owner.Warnings.Take()
		if _, err := f.owner.SetCABundle(ctx, framework.Validating, auditedName, foreign.PEM); err != nil {
			t.Fatalf("audit mode rejected the foreign CA: %v", err)
		}
		requireWarning(t, f.owner.Warnings.Take(), policyAudited, "would deny", "ca-mismatch")
		// The stored foreign CA is left alone by an owner update that does
		// not touch it (only changed caBundles are checked).
		if _, err := f.owner.Annotate(ctx, framework.Validating, auditedName, "e2e/after", "foreign"); err != nil {
			t.Fatalf("an update leaving the (foreign) caBundle alone was rejected: %v", err)
		}
	})

	t.Run("scenario 7: DELETE and re-CREATE by a non-owner", func(t *testing.T) {
		for _, kind := range []framework.Kind{framework.Validating, framework.Mutating} {
			if _, err := f.admin.Get(ctx, kind, enforcedName); apierrors.IsNotFound(err) {
				f.create(t, kind, enforcedName, f.ownerCA.PEM)
			}
			err := f.intruder.Delete(ctx, kind, enforcedName, metav1.DeleteOptions{})
			requirePolicyDenied(t, err, policyEnforced, `webhook-guard denied DELETE of `+string(kind)+` "enforced-webhooks"`, "not-owner", "takeover")
			if _, err := f.admin.Get(ctx, kind, enforcedName); err != nil {
				t.Fatalf("%s is gone after a denied DELETE: %v", kind, err)
			}
			if err := f.admin.Delete(ctx, kind, enforcedName, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("break-glass delete: %v", err)
			}
			_, err = f.intruder.Create(ctx, framework.Spec{Kind: kind, Name: enforcedName, Bundles: [][]byte{framework.NewCA(t, "intruder").PEM}}, metav1.CreateOptions{})
			requirePolicyDenied(t, err, policyEnforced, `webhook-guard denied CREATE of `+string(kind), "not-owner")
			if _, err := f.owner.Create(ctx, framework.Spec{Kind: kind, Name: enforcedName, Bundles: [][]byte{f.ownerCA.PEM}}, metav1.CreateOptions{}); err != nil {
				t.Errorf("the owner re-creating its %s was rejected: %v", kind, err)
			}
		}
	})

	t.Run("scenario 9: break-glass is allowed", func(t *testing.T) {
		if _, err := f.admin.SetCABundle(ctx, framework.Validating, enforcedName, framework.NewCA(t, "break-glass").PEM); err != nil {
			t.Fatalf("system:masters was denied: %v", err)
		}
		if _, err := f.admin.SetCABundle(ctx, framework.Validating, enforcedName, f.ownerCA.PEM); err != nil {
			t.Fatalf("system:masters was denied: %v", err)
		}
	})

	t.Run("scenario 12: MutatingWebhookConfigurations", func(t *testing.T) {
		_, err := f.intruder.Annotate(ctx, framework.Mutating, enforcedName, "e2e/touched-by", intruderSA)
		requirePolicyDenied(t, err, policyEnforced, `of MutatingWebhookConfiguration "enforced-webhooks"`, "not-owner")
		if _, err := f.owner.SetCABundle(ctx, framework.Mutating, enforcedName, f.ownerCA.PEM); err != nil {
			t.Fatalf("the owner writing its CA into the mutating configuration was rejected: %v", err)
		}
	})

	t.Run("the policy shape's guard probes the guarded entries and exports the same series", func(t *testing.T) {
		// The framework's entries call a URL where nothing listens.
		for _, kind := range []framework.Kind{framework.Validating, framework.Mutating} {
			failed := map[string]string{"kind": string(kind), "configuration": enforcedName, "reason": "unreachable"}
			waitForProbe(t, f.env.Guard, string(kind)+" "+enforcedName+" is reported unreachable", func(m framework.Metrics) bool {
				return m.Sum("webhook_guard_trust_path_probe_failures_total", failed) >= 1 &&
					m.Sum("webhook_guard_trust_path_verified", map[string]string{"kind": string(kind), "configuration": enforcedName}) == 0 &&
					strings.Contains(m.Series("webhook_guard_trust_path_verified"), enforcedName)
			})
		}
	})
}

// TestPolicyModeCARotation: rotating the owner's CA Secret updates the
// policy within a few seconds, and the owner's next write with the new CA is
// allowed.
func TestPolicyModeCARotation(t *testing.T) {
	f := newFixture(t, policyOptions())
	ctx := t.Context()
	waitPolicyActive(t, f)
	if _, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, f.ownerCA.PEM); err != nil {
		t.Fatalf("owner write before the rotation: %v", err)
	}
	next := framework.NewCA(t, "app-webhook-ca-2")
	both := append(append([]byte{}, f.ownerCA.PEM...), next.PEM...)
	for _, step := range []struct {
		name string
		pem  []byte
	}{{"old+new", both}, {"new", next.PEM}} {
		start := time.Now()
		f.setOwnerCA(t, step.pem)
		framework.Eventually(t, 10*time.Second, "the policy follows the Secret ("+step.name+")", func() bool {
			return policyHoldsCA(t, f, enforcedMapping, step.pem)
		})
		latency := time.Since(start)
		t.Logf("rotation to %s: the policy followed the Secret after %s", step.name, latency.Round(time.Millisecond))
		if latency > 5*time.Second {
			t.Errorf("the policy took %s to follow the Secret; want a few seconds (--policy-sync-interval 2s)", latency)
		}
		// kube-apiserver's policy informer sees the new policy within
		// moments; the owner's next write with the new bundle is allowed.
		var err error
		framework.Eventually(t, 5*time.Second, "the owner's write of "+step.name+" is allowed", func() bool {
			_, err = f.owner.SetCABundle(ctx, framework.Validating, enforcedName, step.pem)
			return err == nil
		})
		requireBundles(t, f.admin.MustGet(t, framework.Validating, enforcedName), step.pem)
	}
	// The retired CA is now refused, once kube-apiserver runs the policy
	// version the guard wrote last. kube-apiserver refreshes its policies
	// once a second, and the guard's writes of both rotations can fall
	// within one refresh, so until the next one the version from before the
	// rotations may still answer: probe with dry runs (an admitted real
	// write would store the retired CA). The policy reads the CA Secret as
	// its param, so the owner's writes above may pass before that: the
	// expected CAs the message lists may still include the retired one
	// beside the new one.
	retired := func(_ *metav1.ObjectMeta, bundles [][]byte) {
		for i := range bundles {
			bundles[i] = f.ownerCA.PEM
		}
	}
	framework.Eventually(t, 5*time.Second, "kube-apiserver refuses the retired CA", func() bool {
		_, err := f.owner.Mutate(ctx, framework.Validating, enforcedName, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}, retired)
		return err != nil
	})
	_, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, f.ownerCA.PEM)
	requirePolicyDenied(t, err, vap.PolicyName(enforcedMapping), "ca-mismatch", next.Fingerprint()[:16])
}

// TestPolicyModeThreeReplicasWriteNothing: three leader-elected replicas
// against one API server for 60 s with no change write nothing after the
// first convergence, and killing the leader hands over without a write.
func TestPolicyModeThreeReplicasWriteNothing(t *testing.T) {
	f := newFixture(t, policyOptions("--leader-elect", "--leader-election-namespace", framework.GuardNamespace))
	replicas := []*framework.Guard{f.env.Guard, f.env.StartReplica(t), f.env.StartReplica(t)}
	waitPolicyActive(t, f)

	// Converged: every generated object exists and a full pass after that
	// wrote nothing.
	framework.Eventually(t, 20*time.Second, "the leader converges (two passes without a write)", func() bool {
		before := totalWrites(t, replicas)
		syncs := totalSyncs(t, replicas)
		time.Sleep(2500 * time.Millisecond)
		return totalSyncs(t, replicas) > syncs && totalWrites(t, replicas) == before
	})
	rvs := generatedVersions(t, f)
	if len(rvs) != 8 {
		t.Fatalf("%d generated objects; want 8 (per mapping, two policies and their bindings): %v", len(rvs), rvs)
	}
	writes := make([]float64, len(replicas))
	for i, g := range replicas {
		writes[i] = policyWrites(t, g)
	}
	leader := leaderOf(t, replicas)
	t.Logf("converged: leader is replica %d; writes so far per replica %v", leader, writes)

	const quiet = 60 * time.Second
	syncsBefore := totalSyncs(t, replicas)
	time.Sleep(quiet)
	for i, g := range replicas {
		if w := policyWrites(t, g); w != writes[i] {
			t.Errorf("replica %d wrote %g policy objects during %s without any change\n%s", i, w-writes[i], quiet, g.Metrics(t).Series("webhook_guard_policy_writes_total"))
		}
	}
	passes := totalSyncs(t, replicas) - syncsBefore
	t.Logf("%s quiet: %g sync passes (leader only), 0 writes", quiet, passes)
	if passes < 20 {
		t.Errorf("only %g sync passes in %s: the leader is not re-reading the CAs every 2s", passes, quiet)
	}
	requireSameVersions(t, rvs, generatedVersions(t, f), "after "+quiet.String()+" without change")

	// Kill the leader (SIGKILL: no Lease release); another replica takes
	// over after the Lease expires and its first passes write nothing.
	replicas[leader].Kill(t)
	var next int
	framework.Eventually(t, 40*time.Second, "another replica acquires the Lease", func() bool {
		next = leaderOf(t, replicas)
		return next >= 0 && next != leader
	})
	nextSyncs := replicas[next].Metric(t, "webhook_guard_policy_syncs_total", map[string]string{"result": "success"})
	framework.Eventually(t, 15*time.Second, "the new leader makes two passes", func() bool {
		return replicas[next].Metric(t, "webhook_guard_policy_syncs_total", map[string]string{"result": "success"}) >= nextSyncs+2
	})
	for i, g := range replicas {
		if i == leader {
			continue
		}
		if w := policyWrites(t, g); w != writes[i] {
			t.Errorf("replica %d wrote %g policy objects around the handover", i, w-writes[i])
		}
	}
	requireSameVersions(t, rvs, generatedVersions(t, f), "after the handover")
	t.Logf("handover: replica %d leads after replica %d was killed; 0 writes", next, leader)
}

func totalWrites(t testing.TB, gs []*framework.Guard) float64 {
	var n float64
	for _, g := range gs {
		if g.Running() {
			n += policyWrites(t, g)
		}
	}
	return n
}

func totalSyncs(t testing.TB, gs []*framework.Guard) float64 {
	var n float64
	for _, g := range gs {
		if g.Running() {
			n += g.Metric(t, "webhook_guard_policy_syncs_total", nil)
		}
	}
	return n
}

// leaderOf is the index of the replica that syncs (only the leader
// does), or -1 when none is running as leader yet.
func leaderOf(t testing.TB, gs []*framework.Guard) int {
	t.Helper()
	leader := -1
	for i, g := range gs {
		if g.Running() && g.Metric(t, "webhook_guard_policy_syncs_total", nil) > 0 {
			if leader >= 0 {
				t.Fatalf("replicas %d and %d both synced: more than one leader wrote", leader, i)
			}
			leader = i
		}
	}
	return leader
}

// generatedVersions maps every generated object to its resourceVersion.
func generatedVersions(t testing.TB, f *fixture) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range generatedMeta(t, f) {
		kind := "ValidatingAdmissionPolicy"
		if _, ok := o.(*admv1.ValidatingAdmissionPolicyBinding); ok {
			kind = "ValidatingAdmissionPolicyBinding"
		}
		out[kind+"/"+o.GetName()] = o.GetResourceVersion()
	}
	return out
}

func requireSameVersions(t testing.TB, before, after map[string]string, when string) {
	t.Helper()
	for k, rv := range before {
		if after[k] != rv {
			t.Errorf("%s: resourceVersion of %s moved from %s to %q", when, k, rv, after[k])
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s: %s appeared", when, k)
		}
	}
}

// TestPolicyModeStaticWebhookProtectsPolicyObjects: where the static
// webhook is installed too (rendered with --guard-service-account), the
// generated ValidatingAdmissionPolicies and bindings — exempt from VAP — can
// be changed only by the guard: kube-apiserver calls the guard for another
// subject's DELETE of a generated binding and the guard denies it, while the
// guard's own writes (matchConditions skip them) go through.
func TestPolicyModeStaticWebhookProtectsPolicyObjects(t *testing.T) {
	// One process plays both shapes here: the static webhook calls it, so
	// it serves the admission endpoint --policy-mode otherwise turns off.
	opts := policyOptions("--records-flush-interval", flushInterval.String(), "--admission-endpoint")
	opts.NoStaticManifest = false
	opts.ReportCRDs = true
	opts.RenderArgs = []string{"--guard-service-account", framework.GuardNamespace + "/" + framework.GuardServiceAccount}
	f := newFixture(t, opts)
	ctx := t.Context()
	waitPolicyActive(t, f)
	if !strings.Contains(f.env.StaticManifest(), "policy-objects.webhook-guard.io") {
		t.Fatalf("the rendered static manifest has no policy-objects entry:\n%s", f.env.StaticManifest())
	}

	// The intruder may delete bindings as far as RBAC goes.
	_, err := f.env.AdminKube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-policy-writer"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"}, Verbs: []string{"get", "list", "update", "delete"}},
			// kube-apiserver itself refuses (422) a binding update by anyone
			// who may not get the Secret its paramRef names; with get on
			// it, the write reaches the static webhook, which is tested here.
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{caSecret}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.env.AdminKube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-policy-writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "e2e-policy-writer"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: intruderUser.Name}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bindings := f.intruder.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	name := vap.PolicyName(enforcedMapping)
	denies := f.env.Guard.Metric(t, "webhook_guard_decisions_total", map[string]string{"rule": "policy-object", "decision": "deny"})
	var derr error
	framework.Eventually(t, 10*time.Second, "RBAC lets the intruder reach admission", func() bool {
		derr = bindings.Delete(ctx, name, metav1.DeleteOptions{})
		return !apierrors.IsForbidden(derr) || strings.Contains(derr.Error(), "denied the request")
	})
	requireDenied(t, derr, `webhook-guard denied DELETE of ValidatingAdmissionPolicyBinding "webhook-guard-enforced"`, "policy-object",
		"only system:serviceaccount:webhook-guard:webhook-guard")
	if n := f.env.Guard.Metric(t, "webhook_guard_decisions_total", map[string]string{"rule": "policy-object", "decision": "deny"}); n != denies+1 {
		t.Errorf("webhook_guard_decisions_total{rule=policy-object,decision=deny} went from %g to %g; want +1 (kube-apiserver must call the guard)", denies, n)
	}
	live, err := bindings.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the binding is gone after a denied DELETE: %v", err)
	}
	// Recorded like every denial: a ClusterReport owned by the binding
	// names the intruder.
	reports := reportClient(t, f)
	var rep reportsv1alpha1.ClusterReport
	framework.Eventually(t, 10*flushInterval, "the denial is recorded in the binding's ClusterReport", func() bool {
		return reports.Get(ctx, types.NamespacedName{Name: records.ReportName(policy.KindAdmissionPolicyBinding, name)}, &rep) == nil
	})
	if len(rep.OwnerReferences) != 1 || rep.OwnerReferences[0].UID != live.UID {
		t.Errorf("the report's owner references %+v; want the binding (uid %s)", rep.OwnerReferences, live.UID)
	}
	if len(rep.Results) != 1 || rep.Results[0].Rule != string(policy.RuleAdmissionPolicyObject) || rep.Results[0].Result != "fail" ||
		rep.Results[0].Properties[records.PropSubject] != intruderUser.Name {
		t.Errorf("the report's results %+v; want one policy-object fail by %s", rep.Results, intruderUser.Name)
	}
	// Weakening the policy (Deny -> Warn) is denied too.
	b, err := bindings.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Spec.ValidationActions = []admv1.ValidationAction{admv1.Warn}
	_, err = bindings.Update(ctx, b, metav1.UpdateOptions{})
	requireDenied(t, err, "policy-object")

	// The guard's own writes pass: a config reload that switches the
	// enforced mapping to audit makes it update the binding.
	cfg := guardConfig()
	cfg.Owners[0].Mode = "audit"
	f.env.Guard.RewriteConfig(t, cfg)
	framework.Eventually(t, 10*time.Second, "the guard rewrites its binding to Warn+Audit", func() bool {
		b, err := f.env.AdminKube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{})
		return err == nil && len(b.Spec.ValidationActions) == 2
	})
}

// Test_chartPolicyShapeWithChartRBAC runs `webhook-guard serve` with the
// policy shape's Deployment args and nothing but the chart's RBAC, on an API
// server without the static manifest: the leader generates the policy
// objects (the chart's ClusterRole suffices: no "forbidden"),
// and kube-apiserver then audits a stranger's write through them.
func Test_chartPolicyShapeWithChartRBAC(t *testing.T) {
	rel := chartRelease{name: "wg", namespace: "webhook-guard", values: []string{"config/samples/values-koordinator.yaml"}, set: []string{"shape=policy"}}
	const sa = "wg-webhook-guard"
	objs := chartTemplate(t, rel)
	var guardYAML string
	var args []string
	for _, o := range objs {
		switch o.GetKind() {
		case "ConfigMap":
			guardYAML, _, _ = unstructured.NestedString(o.Object, "data", "guard.yaml")
		case "Deployment":
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				if c := c.(map[string]any); c["name"] == "webhook-guard" {
					args, _, _ = unstructured.NestedStringSlice(c, "args")
				}
			}
		}
	}
	if guardYAML == "" || !slices.Contains(args, "--policy-mode") {
		t.Fatalf("the policy shape rendered no guard.yaml or no --policy-mode in %v", args)
	}
	dir := t.TempDir()
	configDir := filepath.Join(dir, "config")
	framework.WriteSecretDir(t, configDir, map[string][]byte{"guard.yaml": []byte(guardYAML)})
	guardCA := framework.NewCA(t, "wg-webhook-guard-ca")
	certDir := filepath.Join(dir, "tls")
	framework.WriteSecretDir(t, certDir, framework.SecretData(guardCA, guardCA.Issue(t, "localhost")))
	healthAddr := fmt.Sprintf("127.0.0.1:%d", framework.FreePort(t))
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", framework.FreePort(t))

	env, cfg := startChartControlPlane(t, "")
	admin := kubernetes.NewForConfigOrDie(cfg)
	createChartObjects(t, cfg, rel, objs)
	ownerCA := koordinatorCA(t, admin)
	kubeconfigPath := userKubeconfig(t, env, dir, framework.ServiceAccountUser(rel.namespace, sa))
	serveArgs := rewriteChartArgs(t, args, map[string]string{
		"--config":                    filepath.Join(configDir, "guard.yaml"),
		"--cert-dir":                  certDir,
		"--bind-address":              "127.0.0.1",
		"--port":                      fmt.Sprint(framework.FreePort(t)),
		"--metrics-bind-address":      metricsAddr,
		"--health-probe-bind-address": healthAddr,
	})
	guardLog := startChartGuard(t, framework.GuardBinary(t), append(serveArgs, "--kubeconfig="+kubeconfigPath), healthAddr)

	framework.Eventually(t, 30*time.Second, "the leader writes the owner's CA into the policy", func() bool {
		p, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(t.Context(), vap.PolicyName("koordinator"), metav1.GetOptions{})
		// The chart grants no cluster-wide Secret read by default
		// (policy.caParams): one policy, with the CA as a literal.
		return err == nil && variableOf(p, "ca") == `"`+base64.StdEncoding.EncodeToString(ownerCA.PEM)+`"`
	})
	// Policies first, bindings last within a pass: wait for the binding too.
	framework.Eventually(t, 10*time.Second, "the leader creates the binding", func() bool {
		_, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(t.Context(), vap.PolicyName("koordinator"), metav1.GetOptions{})
		return err == nil
	})

	const name = "koord-validating-webhook-configuration"
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), chartTestWebhookConfig(name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stranger := chartUser(t, env, admin, framework.ServiceAccountUser("default", "intruder"))
	framework.Eventually(t, 20*time.Second, "kube-apiserver audits the stranger's write through the generated policy", func() bool {
		stranger.warnings.Take()
		if err := setCABundle(t.Context(), stranger.kube, name, framework.NewCA(t, "intruder-ca").PEM); err != nil {
			t.Fatalf("the stranger's write in audit mode: %v", err)
		}
		return len(framework.Containing(stranger.warnings.Take(), "webhook-guard (audit) would deny")) > 0
	})
	if strings.Contains(strings.ToLower(guardLog.String()), "forbidden") {
		t.Errorf("the guard hit a forbidden request under the chart's RBAC:\n%s", guardLog.Tail(40))
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m, err := framework.ParseMetrics(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if n := m.Sum("webhook_guard_policy_syncs_total", map[string]string{"result": "error"}); n != 0 {
		t.Errorf("%g failed policy syncs under the chart's RBAC\n%s", n, guardLog.Tail(20))
	}
}

// policyAnchor is the ClusterRole the generated objects are owned by, as
// the chart's policy-anchor.yaml creates it.
const policyAnchor = "webhook-guard-policy-anchor"

// newAnchoredFixture is a policy-shape fixture whose guard is told the
// anchor (--policy-anchor, and get on that ClusterRole, as the chart grants),
// with the anchor created as helm install creates it.
func newAnchoredFixture(t *testing.T) *fixture {
	t.Helper()
	opts := policyOptions("--policy-anchor", policyAnchor)
	opts.GuardRules = append(opts.GuardRules, rbacv1.PolicyRule{
		APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"get"}, ResourceNames: []string{policyAnchor},
	})
	f := newFixture(t, opts)
	if _, err := f.env.AdminKube.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: policyAnchor}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestPolicyModeSafe shows that the policy shape can deny nothing but what
// its mappings decide, whatever happens to the guard: label-selected
// deletecollections and generateName CREATEs are decided like any request;
// with the guard stopped and the owners' CA source gone, only caBundle
// changes of the mappings are denied and everything else is decided as
// before, until the source is back; and after an
// uninstall (guard stopped, its namespace deleted, the anchor ClusterRole
// deleted) the garbage collector leaves no generated object and every write
// is admitted. kube-controller-manager runs its garbage collector and
// namespace controller, as in any cluster.
func TestPolicyModeSafe(t *testing.T) {
	f := newAnchoredFixture(t)
	ctx := t.Context()
	roles := f.env.AdminKube.RbacV1().ClusterRoles()
	framework.StartControllerManager(t, f.env.Admin, "garbagecollector", "namespace")
	waitPolicyActive(t, f)
	// Two policies and two bindings per mapping, and the anchor's own pair.
	framework.Eventually(t, 20*time.Second, "every generated object is owned by the anchor", func() bool {
		return len(generatedObjects(t, f)) == 10 && len(unanchored(t, f)) == 0
	})

	// The intruder may deletecollection webhook configurations (RBAC), so
	// that only admission decides.
	_, err := roles.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-deletecollection"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}, Verbs: []string{"deletecollection"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.env.AdminKube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-deletecollection"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "e2e-deletecollection"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: intruderUser.Name}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const unrelated = "unrelated-webhooks"
	for _, kind := range []framework.Kind{framework.Validating, framework.Mutating} {
		f.create(t, kind, unrelated, framework.NewCA(t, "unrelated").PEM)
		if _, err := f.admin.Get(ctx, kind, enforcedName); apierrors.IsNotFound(err) {
			f.create(t, kind, enforcedName, f.ownerCA.PEM)
		}
	}

	t.Run("deletecollection and generateName CREATEs are decided like any request", func(t *testing.T) {
		vwcs := f.intruder.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
		var generated []string
		for range 2 {
			o := framework.Spec{Name: "", Labels: map[string]string{"e2e/set": "intruder"}, Bundles: [][]byte{framework.NewCA(t, "intruder").PEM}}.Validating()
			o.GenerateName = "intruder-"
			got, err := vwcs.Create(ctx, o, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("the intruder's generateName CREATE of an unguarded configuration was refused: %v", err)
			}
			generated = append(generated, got.Name)
		}
		sel := metav1.ListOptions{LabelSelector: "e2e/set=intruder"}
		if err := vwcs.DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
			t.Fatalf("the intruder's deletecollection of unguarded configurations %v was refused: %v", generated, err)
		}
		if left, err := vwcs.List(ctx, sel); err != nil || len(left.Items) != 0 {
			t.Fatalf("after the deletecollection: %v left, err %v", left, err)
		}
		// A deletecollection that reaches a guarded configuration is
		// decided for it like a DELETE: the name comes from oldObject.
		if _, err := f.admin.Mutate(ctx, framework.Validating, enforcedName, metav1.UpdateOptions{}, func(m *metav1.ObjectMeta, _ [][]byte) {
			m.Labels = map[string]string{"e2e/set": "guarded"}
		}); err != nil {
			t.Fatal(err)
		}
		err := vwcs.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "e2e/set=guarded"})
		requirePolicyDenied(t, err, vap.PolicyName(enforcedMapping), `webhook-guard denied DELETE of ValidatingWebhookConfiguration "enforced-webhooks"`, "not-owner")
		f.admin.MustGet(t, framework.Validating, enforcedName)
	})

	t.Run("with the guard stopped and the CA source gone, only caBundle changes of the mappings are denied", func(t *testing.T) {
		// Both mappings read the one CA Secret. Once it is gone the guard
		// writes policies holding no CA (caBundle changes fail closed);
		// then the guard stops, and nothing the policies depend on is left
		// in its namespace or anywhere else.
		secrets := f.env.AdminKube.CoreV1().Secrets(appNamespace)
		if err := secrets.Delete(ctx, caSecret, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 20*time.Second, "the guard writes policies holding no CA", func() bool {
			return !policyHoldsCA(t, f, enforcedMapping, f.ownerCA.PEM) && !policyHoldsCA(t, f, auditedMapping, f.ownerCA.PEM)
		})
		f.env.Guard.Stop(t)
		var err error
		// kube-apiserver's policy informer sees the rewritten policy within
		// moments; until then the old one answers ca-mismatch.
		framework.Eventually(t, 10*time.Second, "kube-apiserver denies the owner's caBundle change as ca-unavailable", func() bool {
			_, err = f.owner.SetCABundle(ctx, framework.Validating, enforcedName, framework.NewCA(t, "next").PEM)
			return err != nil && strings.Contains(err.Error(), "ca-unavailable")
		})
		requirePolicyDenied(t, err, vap.PolicyName(enforcedMapping), "ca-unavailable", "cannot be verified", "Secret app-system/"+caSecret)
		_, err = f.owner.SetCABundle(ctx, framework.Mutating, enforcedName, framework.NewCA(t, "next").PEM)
		requirePolicyDenied(t, err, vap.PolicyName(enforcedMapping), "ca-unavailable")
		for _, kind := range []framework.Kind{framework.Validating, framework.Mutating} {
			for _, c := range []*framework.Client{f.intruder, f.owner, f.admin} {
				if _, err := c.SetCABundle(ctx, kind, unrelated, framework.NewCA(t, "anyone").PEM); err != nil {
					t.Errorf("%s %s: %s's caBundle write was refused: %v", kind, unrelated, c.User.Name, err)
				}
			}
			if _, err := f.owner.Annotate(ctx, kind, enforcedName, "e2e/by", "owner"); err != nil {
				t.Errorf("%s: the owner's write leaving caBundle alone was refused: %v", kind, err)
			}
			for _, pem := range [][]byte{framework.NewCA(t, "break-glass").PEM, f.ownerCA.PEM} {
				if _, err := f.admin.SetCABundle(ctx, kind, enforcedName, pem); err != nil {
					t.Errorf("%s: break-glass's caBundle change was refused: %v", kind, err)
				}
			}
			_, err := f.intruder.Annotate(ctx, kind, enforcedName, "e2e/by", "intruder")
			requirePolicyDenied(t, err, vap.PolicyName(enforcedMapping), "not-owner")
		}
		// The audited mapping decides as before: it warns.
		f.intruder.Warnings.Take()
		if _, err := f.intruder.Annotate(ctx, framework.Validating, auditedName, "e2e/by", "intruder"); err != nil {
			t.Fatalf("the audited mapping refused the intruder: %v", err)
		}
		requireWarning(t, f.intruder.Warnings.Take(), vap.PolicyName(auditedMapping), "would deny", "not-owner")

		// The source comes back and the guard restarts: the owner's CA is
		// in the policy again and its caBundle writes pass.
		f.setOwnerCA(t, f.ownerCA.PEM)
		f.env.Guard.Start(t)
		framework.Eventually(t, 20*time.Second, "the guard writes the owner's CA back into the policy", func() bool {
			return policyHoldsCA(t, f, enforcedMapping, f.ownerCA.PEM)
		})
		framework.Eventually(t, 10*time.Second, "kube-apiserver checks caBundles against the owner's CA again", func() bool {
			_, err = f.owner.SetCABundle(ctx, framework.Validating, enforcedName, framework.NewCA(t, "foreign").PEM)
			return err != nil && strings.Contains(err.Error(), "ca-mismatch")
		})
		if _, err := f.admin.SetCABundle(ctx, framework.Validating, enforcedName, framework.NewCA(t, "break-glass").PEM); err != nil {
			t.Fatal(err)
		}
		if _, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, f.ownerCA.PEM); err != nil {
			t.Errorf("the owner's change back to its own CA was refused: %v", err)
		}
	})

	t.Run("after uninstall nothing is left that could deny a write", func(t *testing.T) {
		f.env.Guard.Stop(t)
		if err := f.env.AdminKube.CoreV1().Namespaces().Delete(ctx, framework.GuardNamespace, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := roles.Delete(ctx, policyAnchor, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		framework.Eventually(t, 30*time.Second, "the garbage collector deletes every generated object", func() bool {
			return len(generatedObjects(t, f)) == 0
		})
		t.Logf("the garbage collector removed the generated objects %s after the anchor's deletion", time.Since(start).Round(time.Millisecond))
		framework.Eventually(t, 30*time.Second, "the namespace controller deletes the guard's namespace", func() bool {
			_, err := f.env.AdminKube.CoreV1().Namespaces().Get(ctx, framework.GuardNamespace, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
		ps, err := f.env.AdminKube.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bs, err := f.env.AdminKube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ps.Items)+len(bs.Items) != 0 {
			t.Errorf("%d policies and %d bindings are left after uninstall", len(ps.Items), len(bs.Items))
		}
		// kube-apiserver's policy informer drops the deleted policies
		// within moments; then every write by anyone is admitted.
		framework.Eventually(t, 10*time.Second, "the intruder's caBundle change of a formerly guarded configuration is admitted", func() bool {
			_, err := f.intruder.SetCABundle(ctx, framework.Validating, enforcedName, framework.NewCA(t, "after").PEM)
			return err == nil
		})
		for _, kind := range []framework.Kind{framework.Validating, framework.Mutating} {
			for _, name := range []string{enforcedName, auditedName, unrelated} {
				if _, err := f.admin.Get(ctx, kind, name); apierrors.IsNotFound(err) {
					if _, err := f.intruder.Create(ctx, framework.Spec{Kind: kind, Name: name}, metav1.CreateOptions{}); err != nil {
						t.Errorf("%s %s: the intruder's CREATE after uninstall was refused: %v", kind, name, err)
					}
				}
				if _, err := f.intruder.SetCABundle(ctx, kind, name, framework.NewCA(t, "after").PEM); err != nil {
					t.Errorf("%s %s: the intruder's caBundle change after uninstall was refused: %v", kind, name, err)
				}
				if _, err := f.intruder.Annotate(ctx, kind, name, "e2e/after", "uninstall"); err != nil {
					t.Errorf("%s %s: the intruder's update after uninstall was refused: %v", kind, name, err)
				}
				if err := f.intruder.Delete(ctx, kind, name, metav1.DeleteOptions{}); err != nil {
					t.Errorf("%s %s: the intruder's DELETE after uninstall was refused: %v", kind, name, err)
				}
			}
		}
	})
}

// generatedObjects names every object the guard generated that is left.
func generatedObjects(t testing.TB, f *fixture) []string {
	t.Helper()
	var out []string
	for _, o := range generatedMeta(t, f) {
		out = append(out, o.GetName())
	}
	return out
}

// unanchored names the generated objects without an owner reference to
// the anchor ClusterRole.
func unanchored(t testing.TB, f *fixture) []string {
	t.Helper()
	var out []string
	for _, o := range generatedMeta(t, f) {
		if !slices.ContainsFunc(o.GetOwnerReferences(), func(r metav1.OwnerReference) bool {
			return r.Kind == "ClusterRole" && r.Name == policyAnchor
		}) {
			out = append(out, o.GetName())
		}
	}
	return out
}

func generatedMeta(t testing.TB, f *fixture) []metav1.Object {
	t.Helper()
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: vap.LabelManagedBy + "=" + vap.ManagedBy}
	var out []metav1.Object
	ps, err := f.env.AdminKube.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ps.Items {
		out = append(out, &ps.Items[i])
	}
	bs, err := f.env.AdminKube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for i := range bs.Items {
		out = append(out, &bs.Items[i])
	}
	return out
}

// variableOf is the expression of the policy's variable called name.
func variableOf(p *admv1.ValidatingAdmissionPolicy, name string) string {
	for _, v := range p.Spec.Variables {
		if v.Name == name {
			return v.Expression
		}
	}
	return ""
}
