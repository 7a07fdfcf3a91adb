package casource

import (
	"fmt"

	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/webhook-guard/webhook-guard/policy"
)

// Annotations cert-manager's cainjector reads on webhook configurations
// (the decision's, so both name the same ones).
const (
	AnnotationInjectCAFrom       = policy.AnnotationInjectCAFrom
	AnnotationInjectCAFromSecret = policy.AnnotationInjectCAFromSecret
)

// Keys of a cert-manager TLS Secret.
const (
	keyCA  = cmmeta.TLSCAKey
	keyTLS = corev1.TLSCertKey
)

func secretDesc(ns, name, key string) string {
	return fmt.Sprintf("Secret %s/%s (key %s)", ns, name, key)
}
