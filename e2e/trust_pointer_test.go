package e2e

// The whole trust is owned: the CA pointer cert-manager's cainjector
// follows and the endpoint kube-apiserver calls, not only the caBundle
// bytes. The real cainjector (framework.StartCAInjector) reconciles the
// objects while the writer and an installer try to move the trust around
// the caBundle.

import (
	"bytes"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

const (
	pinnedMapping = "pinned"
	// writersCert is a Certificate of the writer's own, under another CA:
	// what a re-pointed annotation would have cainjector inject.
	writersCert = "app-own-serving"
	// pointerSampling is how long the tests watch the stored caBundles
	// for the writer's CA while cainjector reconciles.
	pointerSampling = 20 * time.Second
)

// pinnedTargets are every kind cainjector injects into.
var pinnedTargets = append(append([]injectedTarget{}, injectedTargets...), trustTargets...)

// pinnedConfig maps the webhook configurations, the CRD and the APIService
// to the application, their CA pinned to the Certificate their annotation
// names.
func pinnedConfig() *guardapi.GuardConfig {
	cfg := guardConfig(guardapi.Owner{
		Name: pinnedMapping,
		Mode: guardapi.ModeEnforce,
		Match: guardapi.Match{
			Validating: []string{injectedVWC}, Mutating: []string{injectedMWC},
			CustomResourceDefinitions: []string{injectedCRD}, APIServices: []string{injectedAPISvc},
		},
		Writers: guardapi.Subjects{ServiceAccounts: []string{appNamespace + "/" + ownerSA}},
		CA: guardapi.CASource{InjectedByCertManager: &guardapi.InjectedByCertManager{
			Certificate: &guardapi.ObjectRef{Namespace: appNamespace, Name: injectedCert},
		}},
	})
	cfg.CertManager.CAInjectorServiceAccount = framework.CAInjectorNamespace + "/" + framework.CAInjectorServiceAccount
	return cfg
}

// bundleSampler reads every target's caBundles until stopped and counts the
// samples in which any of them holds a CA's certificate.
type bundleSampler struct {
	mu      sync.Mutex
	samples int
	holding int
	stop    chan struct{}
	done    chan struct{}
}

func sampleBundles(t *testing.T, r *injectorRun, ca *framework.CA) *bundleSampler {
	s := &bundleSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			held := false
			for _, tg := range r.targets {
				wc, err := r.f.admin.Get(t.Context(), tg.kind, tg.name)
				if err != nil {
					continue
				}
				for _, b := range wc.Bundles {
					held = held || bytes.Contains(b, ca.PEM)
				}
			}
			s.mu.Lock()
			s.samples++
			if held {
				s.holding++
			}
			s.mu.Unlock()
		}
	}()
	return s
}

// finish stops sampling and returns the counts.
func (s *bundleSampler) finish() (samples, holding int) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, s.holding
}

// TestTrustPointerStaticShape: with the injected CA pinned, the writer can
// re-point cainjector neither in two steps (the annotation alone) nor in
// one (annotation and caBundle); an installer may not re-point a CRD's or
// APIService's annotation or endpoint, with or without a caBundle, but may
// still update the rest of them; cainjector is never refused; and for
// pointerSampling no stored caBundle holds the writer's CA.
func TestTrustPointerStaticShape(t *testing.T) {
	t.Parallel()
	r := startInjectorRun(t, injectorRunOptions{opts: framework.Options{Config: pinnedConfig()}, targets: pinnedTargets})
	ctx := t.Context()
	own := framework.CreateCertificate(t, r.f.env, framework.CertificateOptions{Namespace: appNamespace, Name: writersCert})
	r.others = append(r.others, own.CA)
	sampler := sampleBundles(t, r, own.CA)
	start := time.Now()

	t.Run("the writer re-pointing inject-ca-from alone is denied", func(t *testing.T) {
		for _, tg := range pinnedTargets[:2] {
			_, err := r.f.owner.Annotate(ctx, tg.kind, tg.name, "cert-manager.io/inject-ca-from", own.InjectCAFrom())
			requireDenied(t, err, `(mapping "pinned", enforce)`, "ca-mismatch", "metadata.annotations[cert-manager.io/inject-ca-from]",
				`"`+own.InjectCAFrom()+`" where the mapping pins cert-manager.io/inject-ca-from: `+r.cert.InjectCAFrom())
		}
	})

	t.Run("the writer re-pointing with its CA in one write is denied", func(t *testing.T) {
		_, err := r.f.owner.Mutate(ctx, framework.Validating, injectedVWC, metav1.UpdateOptions{}, func(meta *metav1.ObjectMeta, bundles [][]byte) {
			meta.Annotations["cert-manager.io/inject-ca-from"] = own.InjectCAFrom()
			for i := range bundles {
				bundles[i] = own.CA.PEM
			}
		})
		requireDenied(t, err, "ca-mismatch", "metadata.annotations[cert-manager.io/inject-ca-from]")
	})

	t.Run("an installer may not re-point a CRD's or APIService's annotation", func(t *testing.T) {
		for _, tg := range trustTargets {
			_, err := r.f.intruder.Annotate(ctx, tg.kind, tg.name, "cert-manager.io/inject-ca-from", own.InjectCAFrom())
			requireDenied(t, err, "not-owner", intruderUser.Name)
		}
	})

	t.Run("an installer may not move a CRD's conversion webhook or an APIService", func(t *testing.T) {
		moves := map[string]func(u *unstructured.Unstructured){
			"CRD to a URL": func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "https://evil.example.com/convert", "spec", "conversion", "webhook", "clientConfig", "url")
			},
			"CRD to a Service": func(u *unstructured.Unstructured) {
				unstructured.RemoveNestedField(u.Object, "spec", "conversion", "webhook", "clientConfig", "url")
				_ = unstructured.SetNestedMap(u.Object, map[string]any{"namespace": intruderNamespace, "name": "other", "path": "/convert", "port": int64(443)},
					"spec", "conversion", "webhook", "clientConfig", "service")
			},
			"CRD to a URL without caBundle, under a bogus annotation": func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "https://evil.example.com/convert", "spec", "conversion", "webhook", "clientConfig", "url")
				unstructured.RemoveNestedField(u.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
				ann := u.GetAnnotations()
				ann["cert-manager.io/inject-ca-from"] = "nowhere/nothing"
				u.SetAnnotations(ann)
			},
		}
		for what, move := range moves {
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				return r.f.intruder.UpdateTrustObject(ctx, framework.CRD, injectedCRD, move)
			})
			if err == nil {
				t.Errorf("%s: allowed", what)
				continue
			}
			requireDenied(t, err, "not-owner")
		}
		err := r.f.intruder.UpdateTrustObject(ctx, framework.APIService, injectedAPISvc, func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "other", "spec", "service", "name")
		})
		requireDenied(t, err, "not-owner")
	})

	t.Run("an installer may still update the rest of them", func(t *testing.T) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			return r.f.intruder.UpdateTrustObject(ctx, framework.CRD, injectedCRD, func(u *unstructured.Unstructured) {
				u.SetLabels(map[string]string{"app.kubernetes.io/version": "2"})
				_ = unstructured.SetNestedField(u.Object, []any{"wd"}, "spec", "names", "shortNames")
			})
		})
		if err != nil {
			t.Errorf("a label and schema update of the CRD was refused: %v", err)
		}
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			return r.f.intruder.UpdateTrustObject(ctx, framework.APIService, injectedAPISvc, func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, int64(20), "spec", "versionPriority")
			})
		})
		if err != nil {
			t.Errorf("a priority update of the APIService was refused: %v", err)
		}
	})

	// The writer's Certificate is rotated meanwhile: cainjector would
	// inject it into any object pointing at it.
	framework.RotateCertificateSecret(t, r.f.env, own, nil)
	r.others = append(r.others, own.CA)
	sampler2 := sampleBundles(t, r, own.CA)
	time.Sleep(pointerSampling - time.Since(start))
	samples, holding := sampler.finish()
	samples2, holding2 := sampler2.finish()
	t.Logf("over %s: %d samples of every caBundle, %d holding the writer's first CA; %d samples, %d holding its second",
		time.Since(start).Round(time.Second), samples, holding, samples2, holding2)
	if holding+holding2 > 0 || samples < 20 {
		t.Errorf("the writer's CA was trusted in %d of %d samples (and its second in %d of %d); want 0 of at least 20",
			holding, samples, holding2, samples2)
	}
	if !r.converged(t) {
		t.Errorf("the stored caBundles moved off the pinned Certificate's CA:%s", r.stateOf(t))
	}
	r.requireNoCAInjectorDenials(t)
}
