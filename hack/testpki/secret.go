package testpki

import (
	"os"
	"path/filepath"
)

// SecretData is the data of a kubernetes.io/tls Secret as cert-manager
// writes it for a leaf of ca: tls.crt, tls.key and ca.crt.
func SecretData(ca *CA, leaf *Leaf) map[string][]byte {
	return map[string][]byte{
		"tls.crt": leaf.CertPEM,
		"tls.key": leaf.KeyPEM,
		"ca.crt":  ca.PEM,
	}
}

// WriteSecretFiles writes SecretData(ca, leaf) into dir, creating it, as
// plain files: all a server that reads a certificate directory needs.
// (e2e/framework.WriteSecretDir writes the kubelet's symlinked layout
// instead, for tests of rotation.)
func WriteSecretFiles(dir string, ca *CA, leaf *Leaf) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, data := range SecretData(ca, leaf) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
