package perf

import (
	"bytes"
	"context"
	"strings"
	"testing"
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
	engines := map[string]func(ctx context.Context, body []byte) bool{
		"guard": func(ctx context.Context, body []byte) bool { return h.Review(ctx, body).Response.Allowed },
		"cel":   func(ctx context.Context, body []byte) bool { return allowed(t, body, cel.Review) },
		"rego":  func(ctx context.Context, body []byte) bool { return allowed(t, body, rego.Review) },
	}
	intruder := []byte(strings.ReplaceAll(string(f.Review), OwnerUser, "system:serviceaccount:kube-system:intruder"))
	foreignFixture, err := NewFixture(f.Old, foreign, 5)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		review []byte
		allow  bool
	}{
		"if the owner rotates to its new CA, allow": {review: f.Review, allow: true},
		"if another service account writes, deny":   {review: intruder},
		"if the owner writes a foreign CA, deny":    {review: foreignFixture.Review},
	}
	for name, test := range tests {
		for engine, decide := range engines {
			t.Run(name+"/"+engine, func(t *testing.T) {
				if got := decide(t.Context(), test.review); got != test.allow {
					t.Errorf("allowed = %t, want %t", got, test.allow)
				}
			})
		}
	}
}

// allowed runs an engine's Review and reads its answer.
func allowed(t *testing.T, body []byte, review func(context.Context, []byte, *bytes.Buffer) error) bool {
	t.Helper()
	var out bytes.Buffer
	if err := review(t.Context(), body, &out); err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(out.Bytes(), []byte(`"allowed":true`))
}
