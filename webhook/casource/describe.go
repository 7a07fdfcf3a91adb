package casource

import "fmt"

// Annotations cert-manager's cainjector reads on webhook configurations.
const (
	AnnotationInjectCAFrom       = "cert-manager.io/inject-ca-from"
	AnnotationInjectCAFromSecret = "cert-manager.io/inject-ca-from-secret" //nolint:gosec // an annotation name, not a credential
)

// Keys of a cert-manager TLS Secret.
const (
	keyCA  = "ca.crt"
	keyTLS = "tls.crt"
)

func secretDesc(ns, name, key string) string {
	return fmt.Sprintf("Secret %s/%s (key %s)", ns, name, key)
}
