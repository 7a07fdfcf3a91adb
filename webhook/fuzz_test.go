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
)

// FuzzAdmissionReview posts any bytes as an AdmissionReview body to the
// webhook server `serve` runs (NewServer's mux, controller-runtime's
// instrumentation, the guard's Handler) with the real decision. Whatever the
// input: the answer is an AdmissionReview with a response; a panic, which
// the handler recovers into a 500, fails the target; and a response that
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
	srv := NewServer(ServerOptions{})
	srv.Register(Path, h)
	mux := srv.WebhookMux()
	f.Fuzz(func(t *testing.T, body []byte) {
		invalidBefore := testutil.ToFloat64(h.Metrics.InvalidRequests)
		rec := httptest.NewRecorder()
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, Path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		mux.ServeHTTP(rec, req)

		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("the answer is not an AdmissionReview with a response (%v): %s", err, rec.Body.String())
		}
		resp := out.Response
		if resp.Result != nil && resp.Result.Code == http.StatusInternalServerError {
			t.Fatalf("the handler panicked: %s", resp.Result.Message)
		}
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
		// Allowed means it decoded into a request the guard decides.
		review, err := decodeReview(body)
		if err != nil {
			t.Fatalf("allowed a review that does not decode: %v", err)
		}
		if !review.Request.isAdmissionPolicyObject() {
			if _, err := review.Request.input(); err != nil {
				t.Fatalf("allowed a request that does not decode: %v", err)
			}
		}
	})
}
