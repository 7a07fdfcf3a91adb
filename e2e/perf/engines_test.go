package perf

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// Test_engines: the guard, CEL and Rego decide the generated reviews alike,
// so the benchmarks compare the same policy: the owner's rotation is
// allowed; another writer, and a caBundle outside the owner's CAs, are denied.
func Test_engines(t *testing.T) {
	f := fixtureFor(t, 5)
	foreign, err := NewCA("replica-3-ca")
	if err != nil {
		t.Fatal(err)
	}
	h, err := Guard(f, GuardConfigYAML)
	if err != nil {
		t.Fatal(err)
	}
	cel, err := NewCEL(f)
	if err != nil {
		t.Fatal(err)
	}
	rego, err := NewRego(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	// Each engine answers whether it allowed the review, and its message.
	engines := map[string]func(ctx context.Context, body []byte) (bool, string){
		"guard": func(ctx context.Context, body []byte) (bool, string) {
			r := h.Review(ctx, body).Response
			if r.Result == nil {
				return r.Allowed, ""
			}
			return r.Allowed, r.Result.Message
		},
		"cel":  func(ctx context.Context, body []byte) (bool, string) { return answer(t, body, cel.Review) },
		"rego": func(ctx context.Context, body []byte) (bool, string) { return answer(t, body, rego.Review) },
	}
	intruder := []byte(strings.ReplaceAll(string(f.Review), OwnerUser, "system:serviceaccount:kube-system:intruder"))
	foreignFixture, err := NewFixture(f.Old, foreign, 5)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		review []byte
		allow  bool
		// rule is what every engine's denial names: denied for the reason
		// the policy gives, not for an evaluation error.
		rule string
	}{
		"if the owner rotates to its new CA, allow": {review: f.Review, allow: true},
		"if another service account writes, deny":   {review: intruder, rule: "not-owner"},
		"if the owner writes a foreign CA, deny":    {review: foreignFixture.Review, rule: "ca-mismatch"},
	}
	for name, test := range tests {
		for engine, decide := range engines {
			t.Run(name+"/"+engine, func(t *testing.T) {
				got, msg := decide(t.Context(), test.review)
				if got != test.allow {
					t.Errorf("allowed = %t, want %t (%s)", got, test.allow, msg)
				}
				if !strings.Contains(msg, test.rule) {
					t.Errorf("message %q does not name %s", msg, test.rule)
				}
			})
		}
	}
}

// answer runs an engine's Review and reads whether it allowed, and its
// message.
func answer(t *testing.T, body []byte, review func(context.Context, []byte, *bytes.Buffer) error) (bool, string) {
	t.Helper()
	var out bytes.Buffer
	if err := review(t.Context(), body, &out); err != nil {
		t.Fatal(err)
	}
	var r admissionv1.AdmissionReview
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Response == nil {
		t.Fatalf("the answer is no AdmissionReview with a response (%v): %s", err, out.Bytes())
	}
	msg := ""
	if r.Response.Result != nil {
		msg = r.Response.Result.Message
	}
	return r.Response.Allowed, msg
}
