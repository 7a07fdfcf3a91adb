package e2e

// A CRD's or APIService's endpoint moved by DELETE and CREATE: the guard
// keeps nothing across a delete, so the endpoint a CREATE names is a trust
// choice, as an UPDATE moving it is. An installer that is no writer may
// delete the objects, but recreating one at its own Service, pointing at
// the pin with an empty caBundle for cert-manager's cainjector (running
// here) to fill with the owner's CA, is not-owner in both shapes; the
// writer's recreate of the same object passes and cainjector fills it.

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// TestTrustRecreateStaticShape: the static shape denies an installer's
// recreate of the pinned APIService at its own Service and of the pinned
// CRD at its own URL (not-owner), allows its deletes, and allows the
// writer's recreate, which cainjector fills.
func TestTrustRecreateStaticShape(t *testing.T) {
	t.Parallel()
	r := startInjectorRun(t, injectorRunOptions{opts: framework.Options{Config: pinnedConfig()}, targets: trustTargets})
	recreateByInstaller(t, r, func(t *testing.T, _ framework.Kind, err error) {
		t.Helper()
		requireDenied(t, err, `(mapping "pinned", enforce)`, "not-owner", intruderUser.Name)
	})
	r.requireNoCAInjectorDenials(t)
}

// TestTrustRecreatePolicyShape: the same through the generated policies.
func TestTrustRecreatePolicyShape(t *testing.T) {
	t.Parallel()
	opts := policyOptions()
	opts.Config = pinnedConfig()
	// cainjector starts once kube-apiserver checks both objects' caBundles
	// against the pinned Certificate's CA, as in the other policy-shape
	// cainjector tests: its first injection must not race the guard's
	// first pass (that window is measured on its own, and documented).
	r := startInjectorRun(t, injectorRunOptions{opts: opts, targets: trustTargets, beforeInjector: waitTrustPoliciesCheckCA})
	apiPolicy := vap.PolicyName(pinnedMapping) + "-apiservices"
	crdPolicy := vap.PolicyName(pinnedMapping) + "-crds"
	dryRun := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}
	framework.Eventually(t, 30*time.Second, "kube-apiserver enforces "+apiPolicy+" and "+crdPolicy, func() bool {
		err := updateTrustObjectWith(t.Context(), r.f.intruder, framework.APIService, injectedAPISvc, dryRun, func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "evil", "spec", "service", "name")
		})
		if err == nil || !strings.Contains(err.Error(), policyRef(apiPolicy)) {
			return false
		}
		err = updateTrustObjectWith(t.Context(), r.f.intruder, framework.CRD, injectedCRD, dryRun, func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, evilURL, "spec", "conversion", "webhook", "clientConfig", "url")
		})
		return err != nil && strings.Contains(err.Error(), policyRef(crdPolicy))
	})
	policies := map[framework.Kind]string{framework.APIService: apiPolicy, framework.CRD: crdPolicy}
	recreateByInstaller(t, r, func(t *testing.T, kind framework.Kind, err error) {
		t.Helper()
		requirePolicyDenied(t, err, policies[kind], "not-owner", intruderUser.Name)
	})
	r.requireNoCAInjectorDenials(t)
}

// recreateByInstaller deletes each target as the installer (allowed),
// creates it again at the installer's endpoint, pointing at the pin with
// an empty caBundle (denied), then as the writer at the original endpoint
// (allowed), and waits for cainjector to fill the writer's object.
func recreateByInstaller(t *testing.T, r *injectorRun, denied func(*testing.T, framework.Kind, error)) {
	t.Helper()
	ctx := t.Context()
	moves := map[framework.Kind]func(*unstructured.Unstructured){
		framework.APIService: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedMap(u.Object, map[string]any{"namespace": intruderNamespace, "name": "metrics", "port": int64(443)}, "spec", "service")
		},
		framework.CRD: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, evilURL, "spec", "conversion", "webhook", "clientConfig", "url")
		},
	}
	for _, tg := range trustTargets {
		t.Run(string(tg.kind)+": the installer's recreate at its own endpoint is denied, the writer's allowed", func(t *testing.T) {
			orig := getTrustObject(t, r.f.admin, tg.kind, tg.name)
			if err := deleteTrustObject(ctx, r.f.intruder, tg.kind, tg.name); err != nil {
				t.Fatalf("the installer's delete was refused: %v", err)
			}
			u := fresh(orig)
			moves[tg.kind](u)
			denied(t, tg.kind, createTrustObject(ctx, r.f.intruder, tg.kind, u))

			if err := createTrustObject(ctx, r.f.owner, tg.kind, fresh(orig)); err != nil {
				t.Fatalf("the writer's recreate at the original endpoint was refused: %v", err)
			}
			framework.Eventually(t, 20*time.Second, "cainjector fills the recreated "+string(tg.kind), func() bool {
				wc, err := r.f.admin.Get(ctx, tg.kind, tg.name)
				return err == nil && bytes.Contains(wc.Bundles[0], r.cert.CA.PEM)
			})
		})
	}
}

// getTrustObject reads a CRD or APIService whole.
func getTrustObject(t *testing.T, c *framework.Client, kind framework.Kind, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := dynamic.NewForConfigOrDie(c.Config).Resource(trustGVRs[kind]).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// fresh is orig as an installer creates it again: its metadata but for the
// name, labels and annotations gone, no status, an empty caBundle.
func fresh(orig *unstructured.Unstructured) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": orig.GetAPIVersion(), "kind": orig.GetKind()}}
	spec, _, _ := unstructured.NestedMap(orig.Object, "spec")
	_ = unstructured.SetNestedMap(u.Object, spec, "spec")
	u.SetName(orig.GetName())
	u.SetLabels(orig.GetLabels())
	u.SetAnnotations(orig.GetAnnotations())
	unstructured.RemoveNestedField(u.Object, "spec", "caBundle")
	unstructured.RemoveNestedField(u.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	return u
}

// deleteTrustObject deletes the object as c and waits until it is gone (a
// CRD's deletion waits for its finalizer).
func deleteTrustObject(ctx context.Context, c *framework.Client, kind framework.Kind, name string) error {
	res := dynamic.NewForConfigOrDie(c.Config).Resource(trustGVRs[kind])
	if err := res.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err := res.Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return nil
		}
	}
	return context.DeadlineExceeded
}

func createTrustObject(ctx context.Context, c *framework.Client, kind framework.Kind, u *unstructured.Unstructured) error {
	_, err := dynamic.NewForConfigOrDie(c.Config).Resource(trustGVRs[kind]).Create(ctx, u, metav1.CreateOptions{})
	return err
}

// waitTrustPoliciesCheckCA waits until kube-apiserver decides the writer's
// dry-run caBundle writes of the CRD and the APIService against the
// Certificate's CA: a foreign CA denied ca-mismatch, the CA allowed.
func waitTrustPoliciesCheckCA(t *testing.T, r *injectorRun) {
	t.Helper()
	foreign := framework.NewCA(t, "probe").PEM
	dryRun := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}
	set := func(pem []byte) func(*metav1.ObjectMeta, [][]byte) {
		return func(_ *metav1.ObjectMeta, bundles [][]byte) { bundles[0] = pem }
	}
	for _, kind := range []framework.Kind{framework.CRD, framework.APIService} {
		name := injectedCRD
		if kind == framework.APIService {
			name = injectedAPISvc
		}
		framework.Eventually(t, 30*time.Second, "kube-apiserver checks the caBundle of "+name+" against the Certificate's CA", func() bool {
			_, err := r.f.owner.Mutate(t.Context(), kind, name, dryRun, set(foreign))
			if err == nil || !strings.Contains(err.Error(), "ca-mismatch") {
				return false
			}
			_, err = r.f.owner.Mutate(t.Context(), kind, name, dryRun, set(r.cert.CA.PEM))
			return err == nil
		})
	}
}
