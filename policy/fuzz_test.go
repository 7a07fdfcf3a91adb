package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/pem"
	"testing"
)

// The fuzz targets run their committed seed corpora (testdata/fuzz/<target>)
// in every `go test`; `make fuzz` explores beyond them for FUZZTIME each.

// FuzzParseBundle: any bytes as a caBundle. ParseBundle never panics, and
// what it accepts is what a caBundle may hold: 1..MaxBundleCertificates
// CERTIFICATE blocks, each fingerprinted by the SHA-256 of its DER.
func FuzzParseBundle(f *testing.F) {
	ca, err := generateCA("fuzz-ca")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ca.PEM)
	f.Add(append(append([]byte{}, ca.PEM...), ca.PEM...))
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	f.Add([]byte("not pem"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fps, err := ParseBundle(data)
		if err != nil {
			if fps != nil {
				t.Fatalf("ParseBundle returned fingerprints with an error: %v", err)
			}
			if err.Error() == "" {
				t.Fatal("ParseBundle returned an empty error message")
			}
			return
		}
		if len(fps) == 0 || len(fps) > MaxBundleCertificates {
			t.Fatalf("ParseBundle accepted %d certificates; want 1..%d", len(fps), MaxBundleCertificates)
		}
		// Every fingerprint is the hash of one CERTIFICATE block, in order.
		rest := data
		for i := 0; i < len(fps); {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				t.Fatalf("fingerprint %d has no PEM block", i)
			}
			if block.Type != "CERTIFICATE" {
				t.Fatalf("accepted a %q block", block.Type)
			}
			if sum := sha256.Sum256(block.Bytes); !bytes.Equal(sum[:], fps[i][:]) {
				t.Fatalf("fingerprint %d is not the SHA-256 of its block", i)
			}
			i++
		}
	})
}

// FuzzLoad: any bytes as a GuardConfig file. Load never panics; a config it
// accepts matches and decides without panicking, and decides a write by an
// unknown subject the same way twice (the decision is pure).
func FuzzLoad(f *testing.F) {
	f.Add([]byte("apiVersion: webhook-guard.io/v1alpha1\nkind: GuardConfig\n"))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Load(data)
		if err != nil {
			if cfg != nil {
				t.Fatalf("Load returned a config with an error: %v", err)
			}
			return
		}
		for _, kind := range []ConfigKind{KindValidating, KindMutating} {
			for _, o := range cfg.Spec.Owners {
				names := o.Match.Validating
				if kind == KindMutating {
					names = o.Match.Mutating
				}
				for _, n := range names {
					if m := cfg.Match(kind, n, nil); m.Owner == nil || m.Owner.Name != o.Name {
						t.Fatalf("%s %q is listed by owners[%s] but matches %+v", kind, n, o.Name, m.Owner)
					}
					in := &Input{Operation: OperationUpdate, Kind: kind, Name: n, User: User{Username: "fuzz:nobody"},
						Webhooks: []Webhook{{Name: "a.b.c"}}, OldWebhooks: []Webhook{{Name: "a.b.c"}}}
					d1, d2 := cfg.Decide(in), cfg.Decide(in)
					if d1.Allowed() != d2.Allowed() || d1.Rule != d2.Rule {
						t.Fatalf("two decisions of one input differ: %v/%s vs %v/%s", d1.Allowed(), d1.Rule, d2.Allowed(), d2.Rule)
					}
				}
			}
		}
	})
}
