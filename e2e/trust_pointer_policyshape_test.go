package e2e

// The whole trust in the policy shape: besides the caBundle, the CA pointer
// (cainjector's annotations) and the endpoint of a CRD's conversion webhook
// or an APIService, decided by the generated policies on a real
// kube-apiserver, with cert-manager's own cainjector injecting.

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap"
)

const (
	injectFrom = "cert-manager.io/inject-ca-from"
	// pointerSample is how long the test watches the caBundles after the
	// denied re-points: cainjector reconciles an annotation change within
	// a second (it did in 100 of 100 samples over 20 s before the rule),
	// so 5 s show it never got one to act on.
	pointerSample = 5 * time.Second

	endpointMapping = "endpoints"
	endpointCRD     = "pointers.e2e.webhook-guard.io"
	noneCRD         = "hollows.e2e.webhook-guard.io"
	endpointAPISvc  = "v1.pointers.e2e.webhook-guard.io"
	evilURL         = "https://evil.example.com/convert"
)

// TestTrustPointerPolicyShape: with the CA pinned to the Certificate
// cainjector injects from, the product's controller (a writer) re-pointing
// inject-ca-from to a Certificate of its own, whose Secret holds another
// CA, is denied ca-mismatch, alone and together with that CA in the
// caBundles; cainjector keeps running, and over 5 s of samples no
// caBundle ever holds the other CA.
func TestTrustPointerPolicyShape(t *testing.T) {
	t.Parallel()
	opts := policyOptions()
	cfg := injectedConfig(t, guardapi.ModeEnforce)
	pinned := &cfg.Owners[len(cfg.Owners)-1]
	pinned.CA.InjectedByCertManager = &guardapi.InjectedByCertManager{Certificate: &guardapi.ObjectRef{Namespace: appNamespace, Name: injectedCert}}
	opts.Config = cfg
	policyName := vap.PolicyName(cainjectorMapping)
	r := startInjectorRun(t, injectorRunOptions{opts: opts, beforeInjector: waitPolicyChecksCertificateCA})
	ctx := t.Context()

	other := framework.CreateCertificate(t, r.f.env, framework.CertificateOptions{Namespace: appNamespace, Name: "app-own-serving"})
	r.others = append(r.others, other.CA)

	_, err := r.f.owner.Annotate(ctx, framework.Validating, injectedVWC, injectFrom, other.InjectCAFrom())
	requirePolicyDenied(t, err, policyName, "ca-mismatch", "metadata.annotations", "is not the mapping's pin")
	_, err = r.f.owner.Mutate(ctx, framework.Mutating, injectedMWC, metav1.UpdateOptions{}, func(m *metav1.ObjectMeta, bundles [][]byte) {
		m.Annotations[injectFrom] = other.InjectCAFrom()
		for i := range bundles {
			bundles[i] = other.CA.PEM
		}
	})
	requirePolicyDenied(t, err, policyName, "ca-mismatch")

	samples := 0
	for start := time.Now(); time.Since(start) < pointerSample; samples++ {
		for _, tg := range r.targets {
			wc := r.f.admin.MustGet(t, tg.kind, tg.name)
			if got := wc.Annotations[injectFrom]; got != r.cert.InjectCAFrom() {
				t.Fatalf("%s %s points at %q; want the pin %q", tg.kind, tg.name, got, r.cert.InjectCAFrom())
			}
			for i, b := range wc.Bundles {
				if bytes.Contains(b, other.CA.PEM) {
					t.Fatalf("sample %d: %s %s webhooks[%d] trusts the writer's CA: %s", samples, tg.kind, tg.name, i, framework.DescribeBundle(b, r.allCAs()...))
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !r.converged(t) {
		t.Fatalf("the caBundles moved off the pinned Certificate's CA:%s", r.stateOf(t))
	}
	t.Logf("%d samples over %s: every caBundle held only %s", samples, pointerSample, framework.DescribeBundle(r.want(), r.allCAs()...))
	r.requireNoCAInjectorDenials(t)
}

// waitPolicyChecksCertificateCA waits until the generated policy knows the
// Certificate's CA: the owner's dry-run write of a foreign CA is denied and
// of the Certificate's CA allowed.
func waitPolicyChecksCertificateCA(t *testing.T, r *injectorRun) {
	t.Helper()
	foreign := framework.NewCA(t, "probe").PEM
	dryRun := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}
	set := func(pem []byte) func(*metav1.ObjectMeta, [][]byte) {
		return func(_ *metav1.ObjectMeta, bundles [][]byte) {
			for i := range bundles {
				bundles[i] = pem
			}
		}
	}
	framework.Eventually(t, 30*time.Second, "kube-apiserver checks caBundles of "+injectedVWC+" against the Certificate's CA", func() bool {
		_, err := r.f.owner.Mutate(t.Context(), framework.Validating, injectedVWC, dryRun, set(foreign))
		if err == nil || !strings.Contains(err.Error(), "ca-mismatch") {
			return false
		}
		_, err = r.f.owner.Mutate(t.Context(), framework.Validating, injectedVWC, dryRun, set(r.cert.CA.PEM))
		return err == nil
	})
}

// TestTrustEndpointPolicyShape: a subject that may update CRDs and
// APIServices but is no writer (an installer) may change their schema,
// labels and priorities, but not where kube-apiserver sends their traffic
// (a conversion webhook's Service or URL, an APIService's Service), and
// not switch a CRD to a URL webhook without a caBundle under a bogus
// cainjector annotation.
func TestTrustEndpointPolicyShape(t *testing.T) {
	t.Parallel()
	opts := policyOptions()
	opts.Config = guardConfig(guardapi.Owner{
		Name:    endpointMapping,
		Mode:    guardapi.ModeEnforce,
		Match:   guardapi.Match{CustomResourceDefinitions: []string{endpointCRD, noneCRD}, APIServices: []string{endpointAPISvc}},
		Writers: guardapi.Subjects{ServiceAccounts: []string{appNamespace + "/" + ownerSA}},
		CA:      caFromSecret(),
	})
	f := newFixture(t, opts)
	ctx := t.Context()
	crdPolicy := vap.PolicyName(endpointMapping) + "-crds"
	apiPolicy := vap.PolicyName(endpointMapping) + "-apiservices"
	f.admin.MustCreate(t, framework.Spec{Kind: framework.CRD, Name: endpointCRD, Bundles: [][]byte{f.ownerCA.PEM}})
	f.admin.MustCreate(t, framework.Spec{Kind: framework.APIService, Name: endpointAPISvc, Bundles: [][]byte{f.ownerCA.PEM}})
	f.admin.MustCreate(t, framework.Spec{Kind: framework.CRD, Name: noneCRD})
	if err := updateTrustObject(ctx, f.admin, framework.CRD, noneCRD, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedMap(u.Object, map[string]any{"strategy": "None"}, "spec", "conversion")
	}); err != nil {
		t.Fatalf("switch %s to strategy None: %v", noneCRD, err)
	}

	toURL := func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, evilURL, "spec", "conversion", "webhook", "clientConfig", "url")
	}
	dryRun := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}
	framework.Eventually(t, 20*time.Second, "kube-apiserver enforces "+crdPolicy+" and "+apiPolicy, func() bool {
		err := updateTrustObjectWith(ctx, f.intruder, framework.CRD, endpointCRD, dryRun, toURL)
		if err == nil || !strings.Contains(err.Error(), policyRef(crdPolicy)) {
			return false
		}
		err = updateTrustObjectWith(ctx, f.intruder, framework.APIService, endpointAPISvc, dryRun, func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "evil", "spec", "service", "name")
		})
		return err != nil && strings.Contains(err.Error(), policyRef(apiPolicy))
	})

	denied := map[string]struct {
		kind   framework.Kind
		name   string
		policy string
		change func(*unstructured.Unstructured)
	}{
		"a CRD's conversion webhook moved to another Service": {framework.CRD, endpointCRD, crdPolicy, func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedMap(u.Object, map[string]any{"namespace": "default", "name": "evil", "path": "/convert", "port": int64(443)},
				"spec", "conversion", "webhook", "clientConfig", "service")
			unstructured.RemoveNestedField(u.Object, "spec", "conversion", "webhook", "clientConfig", "url")
		}},
		"a CRD's conversion webhook moved to a URL": {framework.CRD, endpointCRD, crdPolicy, toURL},
		"an APIService moved to another Service": {framework.APIService, endpointAPISvc, apiPolicy, func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "evil", "spec", "service", "name")
		}},
		"a CRD switched to a URL webhook without a caBundle under a bogus annotation": {framework.CRD, noneCRD, crdPolicy, func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{injectFrom: "nowhere/nothing"})
			_ = unstructured.SetNestedMap(u.Object, map[string]any{"strategy": "Webhook", "webhook": map[string]any{
				"conversionReviewVersions": []any{"v1"}, "clientConfig": map[string]any{"url": evilURL},
			}}, "spec", "conversion")
		}},
	}
	for name, c := range denied {
		t.Run("an installer's "+name+": denied", func(t *testing.T) {
			err := updateTrustObject(ctx, f.intruder, c.kind, c.name, c.change)
			requirePolicyDenied(t, err, c.policy, "not-owner", intruderUser.Name)
		})
	}
	t.Run("the owner's CRD switched to a URL webhook without a caBundle under a bogus annotation: denied", func(t *testing.T) {
		err := updateTrustObject(ctx, f.owner, framework.CRD, noneCRD, denied["a CRD switched to a URL webhook without a caBundle under a bogus annotation"].change)
		requirePolicyDenied(t, err, crdPolicy, "ca-mismatch", "no caBundle")
	})

	allowed := map[string]struct {
		kind   framework.Kind
		name   string
		change func(*unstructured.Unstructured)
	}{
		"a CRD's label and schema": {framework.CRD, endpointCRD, func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{"app.kubernetes.io/version": "2"})
			versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
			_ = unstructured.SetNestedField(versions[0].(map[string]any), map[string]any{"spec": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
				"schema", "openAPIV3Schema", "properties")
			_ = unstructured.SetNestedSlice(u.Object, versions, "spec", "versions")
		}},
		"an APIService's label and priorities": {framework.APIService, endpointAPISvc, func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{"app.kubernetes.io/version": "2"})
			_ = unstructured.SetNestedField(u.Object, int64(200), "spec", "groupPriorityMinimum")
			_ = unstructured.SetNestedField(u.Object, int64(20), "spec", "versionPriority")
		}},
	}
	for name, c := range allowed {
		t.Run("an installer's update of "+name+": allowed", func(t *testing.T) {
			if err := updateTrustObject(ctx, f.intruder, c.kind, c.name, c.change); err != nil {
				t.Fatalf("an update that leaves the trust alone was refused: %v", err)
			}
		})
	}
}

// trustGVRs are the resources of the two kinds beside the webhook
// configurations.
var trustGVRs = map[framework.Kind]schema.GroupVersionResource{
	framework.CRD:        {Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
	framework.APIService: {Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"},
}

// updateTrustObject reads a CRD or APIService as c, lets fn change it and
// writes it back (a plain UPDATE, as an installer does), again on a
// conflict: kube-apiserver writes a CRD's and an APIService's status
// beside the test.
func updateTrustObject(ctx context.Context, c *framework.Client, kind framework.Kind, name string, fn func(*unstructured.Unstructured)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		return updateTrustObjectWith(ctx, c, kind, name, metav1.UpdateOptions{}, fn)
	})
}

func updateTrustObjectWith(ctx context.Context, c *framework.Client, kind framework.Kind, name string, opts metav1.UpdateOptions, fn func(*unstructured.Unstructured)) error {
	dc, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	r := dc.Resource(trustGVRs[kind])
	u, err := r.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	fn(u)
	_, err = r.Update(ctx, u, opts)
	return err
}

// TestRealWriterCAInjectorPolicyShapeFirstInjectionPinned: with the CA
// pinned to the Certificate cainjector injects from, in the order one
// install applies a product (cainjector and the guard running; the
// Certificate, its Secret and the configurations created together). The
// guard knows the pinned source's name before it exists and writes the
// policy as soon as the Secret appears, racing cainjector, which injects
// when the same Secret appears. What is left is bounded by one pass of the
// guard (its cost check runs after the policies are written): the
// refusals, if any, end within 5 s (1.0 s measured, most of it cainjector's retry backoff), every entry holds the CA within 10 s
// (startInjectorRun), and the product's own CA is still denied.
func TestRealWriterCAInjectorPolicyShapeFirstInjectionPinned(t *testing.T) {
	t.Parallel()
	opts := policyOptions()
	cfg := injectedConfig(t, guardapi.ModeEnforce)
	pinned := &cfg.Owners[len(cfg.Owners)-1]
	pinned.CA.InjectedByCertManager = &guardapi.InjectedByCertManager{Certificate: &guardapi.ObjectRef{Namespace: appNamespace, Name: injectedCert}}
	opts.Config = cfg
	r := startInjectorRun(t, injectorRunOptions{opts: opts, injectorFirst: true, certificateWithConfigurations: true})
	logFirstDenials(t, r)
	if denied := deniedRequests(caInjectorRequests(t, r.f.env)); len(denied) > 0 {
		if span := denied[len(denied)-1].RequestReceivedTimestamp.Sub(denied[0].RequestReceivedTimestamp.Time); span > 5*time.Second {
			t.Errorf("cainjector's first injection was refused for %s; want at most one pass of the guard (5 s)", span.Round(time.Millisecond))
		}
	}
	own := framework.NewCA(t, "app-self-generated-ca")
	_, err := r.f.owner.SetCABundle(t.Context(), framework.Validating, injectedVWC, own.PEM)
	requirePolicyDenied(t, err, vap.PolicyName(cainjectorMapping), "ca-mismatch")
}
