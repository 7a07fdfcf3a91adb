package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

const samples = "../config/samples"

// sampleHandler is the guard as `serve` wires it, over the sample config and
// the sample objects (the CA Secrets) in a fake client.
func sampleHandler(t *testing.T, configFile string) *Handler {
	t.Helper()
	cfg, _, err := LoadConfigFile(filepath.Join(samples, configFile))
	require.NoError(t, err)
	scheme, err := NewScheme()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(samples, "objects.yaml"))
	require.NoError(t, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	codecs := serializer.NewCodecFactory(scheme)
	var objs []client.Object
	for {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 {
			continue
		}
		obj, _, err := codecs.UniversalDeserializer().Decode(raw.Raw, nil, nil)
		require.NoError(t, err)
		objs = append(objs, obj.(client.Object))
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	return newHandler(t, HandlerOptions{
		Config:   StaticConfig{Config: cfg},
		CA:       casource.New(reader, casource.Options{}),
		Recorder: LogRecorder{},
	})
}

func post(t *testing.T, h http.Handler, contentType string, body []byte) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, Path, bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out), "response %s", rec.Body.String())
	return rec.Code, out
}

// Test_Handler_ServeHTTP_malformed: what controller-runtime answered with a 400
// (or 413) still is, and is never allowed.
func Test_Handler_ServeHTTP_malformed(t *testing.T) {
	owner, err := os.ReadFile(filepath.Join(samples, "reviews", "owner.json"))
	require.NoError(t, err)
	tests := map[string]struct {
		contentType string
		body        []byte
		code        float64
		message     string
	}{
		"if the body is empty, answer 400": {
			contentType: "application/json", code: 400, message: "request body is empty",
		},
		"if the content type is not JSON, answer 400": {
			contentType: "text/plain", body: owner, code: 400, message: "contentType=text/plain, expected application/json",
		},
		"if the body is not JSON, answer 400": {
			contentType: "application/json", body: []byte("{not json"), code: 400, message: "json parse error",
		},
		"if the body is larger than the limit, answer 413": {
			contentType: "application/json", body: bytes.Repeat([]byte(" "), MaxReviewBytes+1), code: 413, message: "request entity is too large",
		},
		"if the review has no request, answer 400": {
			contentType: "application/json", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), code: 400, message: "the body holds no admission request",
		},
		"if the review is another kind, answer 400": {
			contentType: "application/json", body: []byte(`{"apiVersion":"v1","kind":"Pod","request":{"uid":"x"}}`), code: 400, message: "request.kind /, Kind= is not guarded",
		},
		"if an object has the wrong type, answer 400": {
			contentType: "application/json", body: bytes.Replace(owner, []byte(`"webhooks": [`), []byte(`"webhooks": 7, "x": [`), 1), code: 400, message: "request.object does not decode as a ValidatingWebhookConfiguration",
		},
		"if a member name is duplicated, answer 400 (stricter than kube-apiserver, which never sends one)": {
			contentType: "application/json", body: bytes.Replace(owner, []byte(`"uid"`), []byte(`"uid": "x", "uid"`), 1), code: 400, message: "duplicate",
		},
		"if request.uid is missing, answer 400 saying so": {
			contentType: "application/json", body: bytes.Replace(owner, []byte(`"uid"`), []byte(`"x-uid"`), 1), code: 400, message: "request.uid is missing",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			h := sampleHandler(t, "guard-koordinator.yaml")
			code, out := post(t, h, test.contentType, test.body)
			assert.Equal(t, http.StatusOK, code, "the HTTP status; the admission code is in the response")
			resp := out["response"].(map[string]any)
			assert.Equal(t, false, resp["allowed"])
			status := resp["status"].(map[string]any)
			assert.Equal(t, test.code, status["code"])
			assert.Contains(t, status["message"], test.message)
		})
	}
}

// Test_Handler_ServeHTTP_caseSensitive: field names are matched exactly, as
// kube-apiserver's own decoder (sigs.k8s.io/json) matches them. encoding/json
// would read "Request", "UID" or "CABundle" as request, uid and caBundle; a
// guard that did could be steered by fields Kubernetes ignores.
func Test_Handler_ServeHTTP_caseSensitive(t *testing.T) {
	foreign, err := os.ReadFile(filepath.Join(samples, "reviews", "foreign-ca.json"))
	require.NoError(t, err)
	var decoded admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(foreign, &decoded))
	h := sampleHandler(t, "guard-koordinator.yaml")

	code, out := post(t, h, "application/json", foreign)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, false, out["response"].(map[string]any)["allowed"], "the sample is a ca-mismatch denial")

	tests := map[string]struct {
		from, to string
		message  string
	}{
		`if "request" is spelled "Request", it is not read`: {
			from: `"request":`, to: `"Request":`, message: "the body holds no admission request",
		},
		`if "uid" is spelled "UID", it is not read`: {
			from: `"uid":`, to: `"UID":`, message: "request.uid is missing",
		},
		`if "userInfo" is spelled "UserInfo", it is not read`: {
			from: `"userInfo":`, to: `"UserInfo":`, message: "request.userInfo.username is missing",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			require.Contains(t, string(foreign), test.from)
			body := []byte(strings.ReplaceAll(string(foreign), test.from, test.to))
			_, out := post(t, h, "application/json", body)
			resp := out["response"].(map[string]any)
			assert.Equal(t, false, resp["allowed"])
			assert.Contains(t, resp["status"].(map[string]any)["message"], test.message)
		})
	}

	t.Run(`if "caBundle" is spelled "CABundle", the foreign CA is not read (Kubernetes would not store it either)`, func(t *testing.T) {
		body := []byte(strings.ReplaceAll(string(foreign), `"caBundle":`, `"CABundle":`))
		_, out := post(t, h, "application/json", body)
		msg, _ := out["response"].(map[string]any)["status"].(map[string]any)["message"].(string)
		assert.NotContains(t, msg, "not in the owner's CA set", "the miscased caBundle was read")
		assert.NotEmpty(t, decoded.Request.Object.Raw, "the sample must carry an object for this test to mean anything")
		assert.Contains(t, string(decoded.Request.Object.Raw), `"caBundle":`, "the sample must carry a caBundle for this test to mean anything")
	})
}

// Test_Handler_ServeHTTP_panic: a panic in the decision is a 500, not a crash.
func Test_Handler_ServeHTTP_panic(t *testing.T) {
	owner, err := os.ReadFile(filepath.Join(samples, "reviews", "foreign-ca.json"))
	require.NoError(t, err)
	h := sampleHandler(t, "guard-koordinator.yaml")
	h.CA = panickingResolver{}
	_, out := post(t, h, "application/json", owner)
	resp := out["response"].(map[string]any)
	assert.Equal(t, false, resp["allowed"])
	assert.NotEmpty(t, resp["uid"])
	assert.Equal(t, float64(500), resp["status"].(map[string]any)["code"])
	assert.Contains(t, resp["status"].(map[string]any)["message"], "panic: boom [recovered]")
}

type panickingResolver struct{}

func (panickingResolver) Resolve(context.Context, casource.Request, bool) casource.Result {
	panic("boom")
}
