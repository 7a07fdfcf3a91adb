package webhook

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/policy/cabundle"
)

const (
	ownerSA    = "system:serviceaccount:koordinator-system:koord-manager"
	sampleName = "koord-validating-webhook-configuration"
)

// vwc is a ValidatingWebhookConfiguration named sampleName with one entry
// per bundle.
func vwc(bundles ...[]byte) []byte {
	type entry struct {
		Name         string `json:"name"`
		ClientConfig struct {
			CABundle []byte `json:"caBundle,omitempty"`
			URL      string `json:"url"`
		} `json:"clientConfig"`
		SideEffects             string   `json:"sideEffects"`
		AdmissionReviewVersions []string `json:"admissionReviewVersions"`
	}
	obj := struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]string `json:"metadata"`
		Webhooks   []entry           `json:"webhooks"`
	}{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration",
		Metadata: map[string]string{"name": sampleName}}
	for i, b := range bundles {
		e := entry{Name: fmt.Sprintf("w%d.koordinator.sh", i), SideEffects: "None", AdmissionReviewVersions: []string{"v1"}}
		e.ClientConfig.CABundle, e.ClientConfig.URL = b, "https://koord.example:9876/validate"
		obj.Webhooks = append(obj.Webhooks, e)
	}
	out, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return out
}

// review is an UPDATE of sampleName by user from old to obj.
func review(user string, obj, old []byte, edit ...func(*admissionv1.AdmissionRequest)) []byte {
	r := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "0b6d2d4f-1111-4a2b-9c3d-000000000001",
			Kind:      metav1.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"},
			Resource:  metav1.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
			Name:      sampleName,
			Operation: admissionv1.Update,
			UserInfo:  authUser(user),
		},
	}
	r.Request.Object.Raw, r.Request.OldObject.Raw = obj, old
	for _, e := range edit {
		e(r.Request)
	}
	out, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	return out
}

// manyCerts is one PEM bundle of n copies of a small self-signed certificate
// (~0.4 KB each), the shape of a hostile bundle.
func manyCerts(t testing.TB, n int) []byte {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	one := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return bytes.Repeat(one, n)
}

// Test_badInput posts each hostile or broken request to the running server
// over TLS and checks the answer: never allowed by accident, a status code
// and a message that says what is wrong. The transport status is always 200
// (an AdmissionReview answer); the verdict's code is in response.status.code.
func Test_badInput(t *testing.T) {
	h, ownerCA := testHandler(t)
	srv := startServer(t, h)
	foreign := manyCerts(t, 1)
	many := manyCerts(t, 10_000)
	old := vwc(ownerCA)
	entries := func(n int, b []byte) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			out[i] = b
		}
		return out
	}

	cases := map[string]struct {
		body        []byte
		contentType string
		expAllowed  bool
		expCode     int32
		expMessage  []string
	}{
		"if the body is not JSON, reject with 400": {
			body: []byte(`{"apiVersion": "admission.k8s.io/v1", "kind": `), expCode: 400, expMessage: []string{"json parse error"},
		},
		"if the body is empty, reject with 400": {
			body: []byte{}, expCode: 400, expMessage: []string{"the body holds no admission request"},
		},
		"if the body is truncated, reject with 400": {
			body: review(ownerSA, vwc(ownerCA), old)[:700], expCode: 400, expMessage: []string{"json parse error"},
		},
		"if the body is over 7 MiB, reject with 413 without reading the rest": {
			body: append(review(ownerSA, vwc(ownerCA), old), bytes.Repeat([]byte(" "), MaxRequestBytes)...), expCode: 413,
			expMessage: []string{"request entity is too large; limit is 7340032 bytes"},
		},
		"if the content type is not JSON, reject with 400": {
			body: review(ownerSA, vwc(ownerCA), old), contentType: "application/yaml", expCode: 400, expMessage: []string{"expected application/json"},
		},
		"if the review is of another kind, reject with 400": {
			body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"x"}}`), expCode: 400, expMessage: []string{"request.kind /, Kind= is not guarded"},
		},
		"if the review is of an unknown version, reject with 400": {
			body: []byte(`{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"x"}}`), expCode: 400, expMessage: []string{"request.kind /, Kind= is not guarded"},
		},
		"if the request is about another resource, reject with 400": {
			body: review(ownerSA, vwc(ownerCA), old, func(r *admissionv1.AdmissionRequest) {
				r.Kind = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
			}), expCode: 400, expMessage: []string{"request.kind apps/v1, Kind=Deployment is not guarded"},
		},
		"if the request is about an old API version of the kind, reject with 400": {
			body:    review(ownerSA, vwc(ownerCA), old, func(r *admissionv1.AdmissionRequest) { r.Kind.Version = "v1beta1" }),
			expCode: 400, expMessage: []string{"is not guarded"},
		},
		"if the uid is missing, reject with 400": {
			body:    review(ownerSA, vwc(ownerCA), old, func(r *admissionv1.AdmissionRequest) { r.UID = "" }),
			expCode: 400, expMessage: []string{"request.uid is missing"},
		},
		"if the username is missing, reject with 400": {
			body: review("", vwc(ownerCA), old), expCode: 400, expMessage: []string{"request.userInfo.username is missing"},
		},
		"if the object does not decode as its kind, reject with 400": {
			body:    review(ownerSA, []byte(`{"kind":"ValidatingWebhookConfiguration","webhooks":"all of them"}`), old),
			expCode: 400, expMessage: []string{"request.object does not decode as a ValidatingWebhookConfiguration"},
		},
		"if the object is of another kind than the request says, reject with 400": {
			body:    review(ownerSA, bytes.Replace(vwc(ownerCA), []byte(`"ValidatingWebhookConfiguration"`), []byte(`"MutatingWebhookConfiguration"`), 1), old),
			expCode: 400, expMessage: []string{"request.object is a MutatingWebhookConfiguration, but request.kind says ValidatingWebhookConfiguration"},
		},
		"if oldObject is missing on UPDATE, reject with 400": {
			body: review(ownerSA, vwc(ownerCA), nil), expCode: 400, expMessage: []string{"request.oldObject is missing"},
		},
		"if the operation is not guarded, reject with 400": {
			body:    review(ownerSA, vwc(ownerCA), old, func(r *admissionv1.AdmissionRequest) { r.Operation = "CONNECT" }),
			expCode: 400, expMessage: []string{`request.operation "CONNECT" is not guarded`},
		},
		"if the owner writes a caBundle that is not PEM, deny with 403": {
			body: review(ownerSA, vwc([]byte("this is not a certificate")), old), expCode: 403,
			expMessage: []string{"ca-mismatch", "webhooks[0].clientConfig.caBundle", "is not PEM"},
		},
		"if the owner writes a PEM block that is not a certificate, deny with 403": {
			body: review(ownerSA, vwc(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("secret")})), old), expCode: 403,
			expMessage: []string{"ca-mismatch", `PEM block 0 is a "PRIVATE KEY", not a CERTIFICATE`},
		},
		"if the owner writes 1,000 entries with its CA, allow": {
			body: review(ownerSA, vwc(entries(1000, ownerCA)...), old), expAllowed: true, expCode: 200,
		},
		"if the owner writes 1,000 entries with a foreign CA, deny with 403 naming them": {
			body: review(ownerSA, vwc(entries(1000, foreign)...), old), expCode: 403,
			expMessage: []string{"webhooks[0].clientConfig.caBundle", "and 990 more violation(s)"},
		},
		"if a bundle holds 10,000 certificates, deny with 403 without parsing past the cap": {
			body: review(ownerSA, vwc(many), old), expCode: 403,
			expMessage: []string{fmt.Sprintf("holds more than %d certificates", cabundle.MaxCertificates)},
		},
		"if a username has odd characters, deny with 403 quoting it": {
			body: review("evil\"user\n{\"level\":\"fake\"}\u202e\x00äö", vwc(ownerCA), old), expCode: 403,
			expMessage: []string{`by "evil\"user\n{\"level\":\"fake\"}\u202e\x00äö"`, "not-owner"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ct := tc.contentType
			if ct == "" {
				ct = "application/json"
			}
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, bytes.NewReader(tc.body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", ct)
			resp, err := srv.Client.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			elapsed := time.Since(start)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)

			require.Equal(t, http.StatusOK, resp.StatusCode, "transport status; body: %s", body)
			var out admissionv1.AdmissionReview
			require.NoError(t, json.Unmarshal(body, &out), "answer: %s", body)
			require.NotNil(t, out.Response, "answer: %s", body)
			require.Equal(t, tc.expAllowed, out.Response.Allowed, "allowed; answer: %s", body)
			code := int32(http.StatusOK)
			if out.Response.Result != nil && out.Response.Result.Code != 0 {
				code = out.Response.Result.Code
			}
			require.Equal(t, tc.expCode, code, "status code; answer: %s", body)
			for _, m := range tc.expMessage {
				require.Contains(t, out.Response.Result.Message, m)
			}
			t.Logf("%d-byte body: code %d in %s, %.1f MiB allocated, %d-byte message", len(tc.body), code,
				elapsed.Round(time.Millisecond), float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), len(messageOf(out.Response)))
		})
	}
}

func messageOf(r *admissionv1.AdmissionResponse) string {
	if r.Result == nil {
		return ""
	}
	return r.Result.Message
}

func authUser(name string) authenticationv1.UserInfo {
	return authenticationv1.UserInfo{Username: name}
}
