package cabundle

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
)

// The fuzz target runs its committed seed corpus (testdata/fuzz/<target>)
// in every `go test`; `make fuzz` explores beyond it for FUZZTIME.

// FuzzParseBundle: any bytes as a caBundle, differentially against what
// kube-apiserver trusts (x509.CertPool.AppendCertsFromPEM, which client-go's
// transport loads a caBundle with). Parse never panics; it accepts a
// bundle exactly when the pool takes a certificate from it (or refuses it
// for holding more than MaxCertificates CERTIFICATE blocks), and its
// fingerprints are exactly the pool's certificates.
func FuzzParseBundle(f *testing.F) {
	ca, err := testpki.NewCA("fuzz-ca")
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
		fps, err := Parse(data)
		pool := x509.NewCertPool()
		trusted := pool.AppendCertsFromPEM(data)
		if err != nil {
			if fps != nil {
				t.Fatalf("Parse returned fingerprints with an error: %v", err)
			}
			if err.Error() == "" {
				t.Fatal("Parse returned an empty error message")
			}
			if trusted && !strings.Contains(err.Error(), "holds more than") {
				t.Fatalf("Parse refused a bundle kube-apiserver trusts: %v", err)
			}
			return
		}
		if !trusted {
			t.Fatalf("Parse accepted %d certificate(s) kube-apiserver would not trust", len(fps))
		}
		if len(fps) == 0 || len(fps) > MaxCertificates {
			t.Fatalf("Parse accepted %d certificates; want 1..%d", len(fps), MaxCertificates)
		}
		// The same certificates: the pool holds each distinct one once.
		distinct := map[Fingerprint]bool{}
		for _, fp := range fps {
			distinct[fp] = true
		}
		if got := len(pool.Subjects()); got != len(distinct) { //nolint:staticcheck // a pool built here, not the system pool
			t.Fatalf("Parse found %d distinct certificates, kube-apiserver's pool %d", len(distinct), got)
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
