package policy

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
)

// The fuzz targets run their committed seed corpora (testdata/fuzz/<target>)
// in every `go test`; `make fuzz` explores beyond them for FUZZTIME each.

// FuzzParseBundle: any bytes as a caBundle, differentially against what
// kube-apiserver trusts (x509.CertPool.AppendCertsFromPEM, which client-go's
// transport loads a caBundle with). ParseBundle never panics; it accepts a
// bundle exactly when the pool takes a certificate from it (or refuses it
// for holding more than MaxBundleCertificates CERTIFICATE blocks), and its
// fingerprints are exactly the pool's certificates.
func FuzzParseBundle(f *testing.F) {
	ca, err := generateCA("fuzz-ca")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ca.PEM)
	f.Add(append(append([]byte{}, ca.PEM...), ca.PEM...))
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	f.Add([]byte("not pem"))
	if block, _ := pem.Decode(ca.PEM); block != nil {
		block.Headers = map[string]string{"Proc-Type": "4,ENCRYPTED"}
		f.Add(pem.EncodeToMemory(block))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fps, err := ParseBundle(data)
		pool := x509.NewCertPool()
		trusted := pool.AppendCertsFromPEM(data)
		if err != nil {
			if fps != nil {
				t.Fatalf("ParseBundle returned fingerprints with an error: %v", err)
			}
			if err.Error() == "" {
				t.Fatal("ParseBundle returned an empty error message")
			}
			if trusted && !strings.Contains(err.Error(), "holds more than") {
				t.Fatalf("ParseBundle refused a bundle kube-apiserver trusts: %v", err)
			}
			return
		}
		if !trusted {
			t.Fatalf("ParseBundle accepted %d certificate(s) kube-apiserver would not trust", len(fps))
		}
		if len(fps) == 0 || len(fps) > MaxBundleCertificates {
			t.Fatalf("ParseBundle accepted %d certificates; want 1..%d", len(fps), MaxBundleCertificates)
		}
		// The same certificates: the pool holds each distinct one once.
		distinct := map[Fingerprint]bool{}
		for _, fp := range fps {
			distinct[fp] = true
		}
		if got := len(pool.Subjects()); got != len(distinct) { //nolint:staticcheck // a pool built here, not the system pool
			t.Fatalf("ParseBundle found %d distinct certificates, kube-apiserver's pool %d", len(distinct), got)
		}
		for _, fp := range fps {
			found := false
			for rest := data; !found; {
				var block *pem.Block
				if block, rest = pem.Decode(rest); block == nil {
					break
				}
				found = block.Type == "CERTIFICATE" && len(block.Headers) == 0 && sha256.Sum256(block.Bytes) == fp
			}
			if !found {
				t.Fatalf("fingerprint %s is not the SHA-256 of a CERTIFICATE block without headers", fp.Short())
			}
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
