package perf

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	jsoniter "github.com/json-iterator/go"
	admissionv1 "k8s.io/api/admission/v1"
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	apiadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

	"github.com/webhook-guard/webhook-guard/webhook"
)

// Entry counts of the generated reviews: a typical configuration, and a
// large one.
var entryCounts = []int{5, 50}

var (
	fixturesOnce sync.Once
	fixtures     map[int]*Fixture
	errFixtures  error
)

func fixtureFor(tb testing.TB, n int) *Fixture {
	tb.Helper()
	fixturesOnce.Do(func() {
		oldCA, err := NewCA("koordinator-webhook-ca")
		if err != nil {
			errFixtures = err
			return
		}
		newCA, err := NewCA("koordinator-webhook-ca-2")
		if err != nil {
			errFixtures = err
			return
		}
		fixtures = map[int]*Fixture{}
		for _, n := range entryCounts {
			if fixtures[n], errFixtures = NewFixture(oldCA, newCA, n); errFixtures != nil {
				return
			}
		}
	})
	if errFixtures != nil {
		tb.Fatal(errFixtures)
	}
	return fixtures[n]
}

// minimalReview is what the floor decodes: exactly the fields the guard
// reads (the same shape as webhook.Handler's decoder types), objects included.
type minimalReview struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Request    *struct {
		UID       types.UID               `json:"uid"`
		Kind      metav1.GroupVersionKind `json:"kind"`
		Name      string                  `json:"name"`
		Operation string                  `json:"operation"`
		UserInfo  struct {
			Username string   `json:"username"`
			Groups   []string `json:"groups"`
		} `json:"userInfo"`
		Object    *minimalConfig `json:"object"`
		OldObject *minimalConfig `json:"oldObject"`
		DryRun    *bool          `json:"dryRun"`
	} `json:"request"`
}

type minimalConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Webhooks []struct {
		Name         string `json:"name"`
		ClientConfig struct {
			CABundle []byte `json:"caBundle"`
		} `json:"clientConfig"`
	} `json:"webhooks"`
}

func allowResponse(r *minimalReview) admissionv1.AdmissionReview {
	return admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: &admissionv1.AdmissionResponse{UID: r.Request.UID, Allowed: true, Result: &metav1.Status{Code: 200}},
	}
}

// decoders are the floor's candidates. Each decodes the review into
// minimalReview and encodes an allow response: the least any webhook does.
var decoders = []struct {
	name   string
	decode func([]byte, *minimalReview) error
	encode func(*bytes.Buffer, any) error
}{
	{"encoding-json",
		func(b []byte, r *minimalReview) error { return json.Unmarshal(b, r) },
		func(w *bytes.Buffer, v any) error { return json.NewEncoder(w).Encode(v) }},
	{"sigs-k8s-json",
		func(b []byte, r *minimalReview) error { return sigsjson.UnmarshalCaseSensitivePreserveInts(b, r) },
		func(w *bytes.Buffer, v any) error { return json.NewEncoder(w).Encode(v) }},
	{"json-v2",
		func(b []byte, r *minimalReview) error { return jsonv2.Unmarshal(b, r) },
		func(w *bytes.Buffer, v any) error { return jsonv2.MarshalWrite(w, v) }},
	{"jsoniter-casesensitive",
		func(b []byte, r *minimalReview) error { return jsoniterStrict.Unmarshal(b, r) },
		func(w *bytes.Buffer, v any) error { return jsoniterStrict.NewEncoder(w).Encode(v) }},
}

// jsoniterStrict is json-iterator as Kubernetes configured it before
// sigs.k8s.io/json: case-sensitive field names.
var jsoniterStrict = jsoniter.Config{EscapeHTML: true, SortMapKeys: true, ValidateJsonRawMessage: true, CaseSensitive: true}.Froze()

// BenchmarkFloor is the decode floor: decode the review into the minimal
// typed objects and encode an allow response, per decoder.
func BenchmarkFloor(b *testing.B) {
	for _, n := range entryCounts {
		f := fixtureFor(b, n)
		for _, d := range decoders {
			b.Run(fmt.Sprintf("decoder=%s/entries=%d", d.name, n), func(b *testing.B) {
				var out bytes.Buffer
				b.SetBytes(int64(len(f.Review)))
				b.ReportAllocs()
				for b.Loop() {
					var r minimalReview
					if err := d.decode(f.Review, &r); err != nil {
						b.Fatal(err)
					}
					if len(r.Request.Object.Webhooks) != n {
						b.Fatalf("decoded %d webhooks, want %d", len(r.Request.Object.Webhooks), n)
					}
					out.Reset()
					if err := d.encode(&out, allowResponse(&r)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// guardServer is the webhook server of `serve` without its listener: the
// same controller-runtime server, the same Register (so the same metrics
// middleware), the guard's Handler at /validate and, for comparison, its
// decision behind controller-runtime's generic admission.Webhook at
// /generic (GenericHandler).
func guardServer(b *testing.B, f *Fixture) (http.Handler, *webhook.Handler) {
	b.Helper()
	h, err := Guard(f, GuardConfigYAML)
	if err != nil {
		b.Fatal(err)
	}
	if err := Warm(b.Context(), h, f); err != nil {
		b.Fatal(err)
	}
	srv := ctrlwebhook.NewServer(ctrlwebhook.Options{})
	srv.Register(webhook.Path, h)
	srv.Register("/generic", &admission.Webhook{Handler: GenericHandler{Guard: h}})
	return srv.WebhookMux(), h
}

func serve(b *testing.B, mux http.Handler, path string, body []byte) {
	req := httptest.NewRequestWithContext(b.Context(), http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"allowed":true`)) {
		b.Fatalf("%s answered %d: %s", path, rec.Code, rec.Body.Bytes())
	}
}

// BenchmarkGuard is the guard's full path exactly as the server runs it:
// the webhook server's mux (controller-runtime's metrics middleware),
// the Handler's single decode, the CA from casource's warm cache,
// fingerprints from the warm FingerprintCache, the decision, its metrics
// and log calls, and the encoded response.
func BenchmarkGuard(b *testing.B) {
	for _, n := range entryCounts {
		f := fixtureFor(b, n)
		mux, rh := guardServer(b, f)
		b.Run(fmt.Sprintf("path=server/entries=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(f.Review)))
			b.ReportAllocs()
			for b.Loop() {
				serve(b, mux, webhook.Path, f.Review)
			}
		})
		// The same without HTTP plumbing: decode, decide, no encode.
		b.Run(fmt.Sprintf("path=review/entries=%d", n), func(b *testing.B) {
			ctx := context.Background()
			b.SetBytes(int64(len(f.Review)))
			b.ReportAllocs()
			for b.Loop() {
				if v := rh.Review(ctx, f.Review); !v.Response.Allowed {
					b.Fatal("denied")
				}
			}
		})
	}
}

// BenchmarkGeneric is the same decision behind controller-runtime's generic
// admission.Webhook, as the guard was served before: the universal
// deserializer decodes the review, then GenericInput decodes both objects.
func BenchmarkGeneric(b *testing.B) {
	for _, n := range entryCounts {
		f := fixtureFor(b, n)
		mux, _ := guardServer(b, f)
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(f.Review)))
			b.ReportAllocs()
			for b.Loop() {
				serve(b, mux, "/generic", f.Review)
			}
		})
	}
}

// BenchmarkCEL is the policy shape's generated policy in Kubernetes' VAP
// engine, compiled once.
func BenchmarkCEL(b *testing.B) {
	for _, n := range entryCounts {
		f := fixtureFor(b, n)
		c, err := NewCEL(f)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			ctx := context.Background()
			var out bytes.Buffer
			b.SetBytes(int64(len(f.Review)))
			b.ReportAllocs()
			for b.Loop() {
				out.Reset()
				if err := c.Review(ctx, f.Review, &out); err != nil {
					b.Fatal(err)
				}
			}
			if !bytes.Contains(out.Bytes(), []byte(`"allowed":true`)) {
				b.Fatalf("CEL did not allow the review: %s", out.Bytes())
			}
		})
	}
}

// BenchmarkRego is the policy in OPA Rego, prepared once.
func BenchmarkRego(b *testing.B) {
	for _, n := range entryCounts {
		f := fixtureFor(b, n)
		r, err := NewRego(b.Context(), f)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			ctx := context.Background()
			var out bytes.Buffer
			b.SetBytes(int64(len(f.Review)))
			b.ReportAllocs()
			for b.Loop() {
				out.Reset()
				if err := r.Review(ctx, f.Review, &out); err != nil {
					b.Fatal(err)
				}
			}
			if !bytes.Contains(out.Bytes(), []byte(`"allowed":true`)) {
				b.Fatalf("Rego did not allow the review: %s", out.Bytes())
			}
		})
	}
}

// BenchmarkCELValidate is what the generated policy costs kube-apiserver
// beyond the write it admits anyway: the typed objects are decoded once,
// before the loop (kube-apiserver has decoded them for the write itself),
// and each iteration is the VAP engine's Validate, CEL's conversion of the
// typed objects and every expression (messages included) of the policy.
//
// Each entry count runs twice: "floor" is the least policy of caBundles
// (newCELFloor: every entry's caBundle absent or the owner's CA, with the
// generated policy's matchConditions), which pays the engine and the
// conversion of the objects for CEL as any policy of webhook
// configurations does; "generated" is the guard's policy. The target is
// the generated policy at or below 1 ms at 50 entries; the floor says how
// much of that any policy would pay.
func BenchmarkCELValidate(b *testing.B) {
	for _, n := range entryCounts {
		f := fixtureFor(b, n)
		generated, err := NewCEL(f)
		if err != nil {
			b.Fatal(err)
		}
		floor, err := newCELFloor(f)
		if err != nil {
			b.Fatal(err)
		}
		var review admissionv1.AdmissionReview
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(f.Review, &review); err != nil {
			b.Fatal(err)
		}
		req := review.Request
		obj, old := &admv1.ValidatingWebhookConfiguration{}, &admv1.ValidatingWebhookConfiguration{}
		if err := json.Unmarshal(req.Object.Raw, obj); err != nil {
			b.Fatal(err)
		}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			b.Fatal(err)
		}
		u := &user.DefaultInfo{Name: req.UserInfo.Username, Groups: req.UserInfo.Groups}
		for _, run := range []struct {
			name string
			c    *CEL
		}{{"floor", floor}, {"generated", generated}} {
			b.Run(fmt.Sprintf("entries=%d/%s", n, run.name), func(b *testing.B) {
				ctx := context.Background()
				b.ReportAllocs()
				var msgs []string
				for b.Loop() {
					msgs = run.c.validator.ValidateObjects(ctx, apiadmission.Operation(req.Operation), req.Name, obj, old, u, nil)
				}
				if len(msgs) > 0 {
					b.Fatalf("CEL denied the review: %v", msgs)
				}
			})
		}
	}
}
