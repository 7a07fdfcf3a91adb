package framework

import (
	"crypto/sha256"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
)

// CA is a self-signed ECDSA certificate authority: a testpki.CA whose Issue
// takes a testing.TB, as the e2e tests call it.
type CA struct{ *testpki.CA }

// NewCA generates a self-signed ECDSA P-256 CA named cn, the kind of CA each
// of the 8 replicas in the incident generated for itself.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	ca, err := testpki.NewCA(cn, testpki.WithSubject(pkix.Name{Organization: []string{"webhook-guard e2e"}}))
	if err != nil {
		t.Fatalf("generate CA %q: %v", cn, err)
	}
	return &CA{ca}
}

// Fingerprint is the hex SHA-256 of the CA certificate's DER.
func (ca *CA) Fingerprint() string {
	sum := sha256.Sum256(ca.Cert.Raw)
	return hex.EncodeToString(sum[:])
}

// ServingCert is a leaf certificate and its key, in PEM.
type ServingCert = testpki.Leaf

// Issue signs an ECDSA serving certificate for the given DNS names and IP
// addresses (defaults: localhost and 127.0.0.1). It hides testpki.CA.Issue,
// failing t instead of returning an error.
func (ca *CA) Issue(t testing.TB, cn string, hosts ...string) *ServingCert {
	t.Helper()
	leaf, err := ca.CA.Issue(cn, hosts...)
	if err != nil {
		t.Fatalf("issue serving certificate %q: %v", cn, err)
	}
	return leaf
}

// SecretData is the data of a kubernetes.io/tls Secret as cert-manager
// writes it: tls.crt (leaf), tls.key and ca.crt.
func SecretData(ca *CA, leaf *ServingCert) map[string][]byte {
	return testpki.SecretData(ca.CA, leaf)
}

// WriteSecretDir projects a Secret's data into dir the way the kubelet
// mounts a Secret volume (its AtomicWriter): the files live in a timestamped
// directory, "..data" is a symlink to it, and each key is a symlink through
// "..data". A second call swaps "..data" atomically and removes the old
// directory, which is exactly what a pod sees when cert-manager renews the
// Secret. Readers never observe a mix of old and new files.
func WriteSecretDir(t testing.TB, dir string, data map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("create secret dir: %v", err)
	}
	tsDir, err := os.MkdirTemp(dir, //nolint:usetesting // inside dir, as the kubelet lays out a projected Secret
		".."+time.Now().UTC().Format("2006_01_02_15_04_05.")+"*")
	if err != nil {
		t.Fatalf("create timestamped dir: %v", err)
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(tsDir, k), v, 0o600); err != nil {
			t.Fatalf("write %s: %v", k, err)
		}
	}
	dataLink := filepath.Join(dir, "..data")
	oldTarget, _ := os.Readlink(dataLink)
	tmpLink := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		t.Fatalf("symlink ..data_tmp: %v", err)
	}
	if err := os.Rename(tmpLink, dataLink); err != nil {
		t.Fatalf("swap ..data: %v", err)
	}
	for k := range data {
		link := filepath.Join(dir, k)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", k), link); err != nil {
			t.Fatalf("symlink %s: %v", k, err)
		}
	}
	if oldTarget != "" && oldTarget != filepath.Base(tsDir) {
		if err := os.RemoveAll(filepath.Join(dir, oldTarget)); err != nil {
			t.Fatalf("remove old secret dir: %v", err)
		}
	}
}

// String describes a CA for failure messages.
func (ca *CA) String() string {
	return fmt.Sprintf("%s (sha256 %s)", ca.Cert.Subject.CommonName, ca.Fingerprint()[:16])
}
