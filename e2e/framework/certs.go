package framework

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a self-signed ECDSA certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// PEM is the CA certificate in PEM, as it goes into a caBundle.
	PEM []byte
}

// NewCA generates a self-signed ECDSA P-256 CA named cn, the kind of CA each
// of the 8 replicas in the incident generated for itself.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate CA key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"webhook-guard e2e"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("self-sign CA %q: %v", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse CA %q: %v", cn, err)
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Fingerprint is the hex SHA-256 of the CA certificate's DER.
func (ca *CA) Fingerprint() string {
	sum := sha256.Sum256(ca.Cert.Raw)
	return hex.EncodeToString(sum[:])
}

// ServingCert is a leaf certificate and its key, in PEM.
type ServingCert struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// Issue signs an ECDSA serving certificate for the given DNS names and IP
// addresses (defaults: localhost and 127.0.0.1).
func (ca *CA) Issue(t testing.TB, cn string, hosts ...string) *ServingCert {
	t.Helper()
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1"}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate serving key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatalf("sign serving certificate %q: %v", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse serving certificate: %v", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("marshal serving key: %v", err)
	}
	return &ServingCert{
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		t.Fatalf("serial number: %v", err)
	}
	return n.Add(n, big.NewInt(1))
}

// SecretData is the data of a kubernetes.io/tls Secret as cert-manager
// writes it: tls.crt (leaf), tls.key and ca.crt.
func SecretData(ca *CA, leaf *ServingCert) map[string][]byte {
	return map[string][]byte{
		"tls.crt": leaf.CertPEM,
		"tls.key": leaf.KeyPEM,
		"ca.crt":  ca.PEM,
	}
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
	tsDir, err := os.MkdirTemp(dir, ".."+time.Now().UTC().Format("2006_01_02_15_04_05.")+"*")
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
