package testpki

import "testing"

// MustCA is NewCA for tests: it fails tb on an error.
func MustCA(tb testing.TB, cn string, opts ...Option) *CA {
	tb.Helper()
	ca, err := NewCA(cn, opts...)
	if err != nil {
		tb.Fatalf("generating CA %q: %v", cn, err)
	}
	return ca
}
