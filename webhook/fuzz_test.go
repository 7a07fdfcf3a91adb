package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// FuzzAdmissionReview posts any bytes as an AdmissionReview body through
// controller-runtime's admission.Webhook (panics not recovered, so a panic
// fails the target) into the real handler and decision. Whatever the input:
// the answer is an AdmissionReview with a response, and a response that
// allows was decided (HTTP-level and decoding errors never allow): its
// status code is 200 and no input error was counted. Seed corpus:
// testdata/fuzz/FuzzAdmissionReview (every sample review, and broken ones).
func FuzzAdmissionReview(f *testing.F) {
	samples, err := filepath.Glob(filepath.Join(samplesDir, "reviews", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range samples {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	h, _ := testHandler(f)
	wh := (&admission.Webhook{Handler: h}).WithRecoverPanic(false)
	f.Fuzz(func(t *testing.T, body []byte) {
		invalidBefore := testutil.ToFloat64(h.Metrics.InvalidRequests)
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		wh.ServeHTTP(rec, req)

		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("the answer is not an AdmissionReview with a response (%v): %s", err, rec.Body.String())
		}
		resp := out.Response
		if !resp.Allowed {
			if resp.Result == nil || resp.Result.Code < 400 || resp.Result.Message == "" {
				t.Fatalf("a denial without a 4xx/5xx status and a message: %+v", resp.Result)
			}
			return
		}
		if resp.Result != nil && resp.Result.Code != 0 && resp.Result.Code != http.StatusOK {
			t.Fatalf("allowed with status %d: %s", resp.Result.Code, resp.Result.Message)
		}
		if testutil.ToFloat64(h.Metrics.InvalidRequests) != invalidBefore {
			t.Fatalf("allowed a request the handler counted as invalid")
		}
		// Allowed means it decoded: the same request decodes here too.
		var in admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &in); err == nil && in.Request != nil {
			if _, err := DecodeInput(in.Request); err != nil {
				t.Fatalf("allowed a request that does not decode: %v", err)
			}
		}
	})
}
