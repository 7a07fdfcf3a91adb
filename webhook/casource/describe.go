package casource

import (
	"fmt"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
)

// Annotations cert-manager's cainjector reads on webhook configurations.
const (
	AnnotationInjectCAFrom       = cmapi.WantInjectAnnotation
	AnnotationInjectCAFromSecret = cmapi.WantInjectFromSecretAnnotation
)

// Keys of a cert-manager TLS Secret.
const (
	keyCA  = cmmeta.TLSCAKey
	keyTLS = corev1.TLSCertKey
)

func secretDesc(ns, name, key string) string {
	return fmt.Sprintf("Secret %s/%s (key %s)", ns, name, key)
}
