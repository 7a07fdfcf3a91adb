package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults applied by SetDefaults.
const (
	DefaultCAInjectorServiceAccount = "cert-manager/cert-manager-cainjector"
	DefaultClusterResourceNamespace = "cert-manager"
	DefaultMaxDistinctBundles       = 3
	DefaultFlappingWindow           = 10 * time.Minute
	DefaultCAKey                    = "ca.crt"
)

// SetDefaults fills in every field the GuardConfig defaults (the Default
// constants above, each kind's own defaults) before Validate.
func SetDefaults(spec *GuardConfig) {
	if spec.DefaultMode == "" {
		spec.DefaultMode = ModeAudit
	}
	if spec.Unmanaged == "" {
		spec.Unmanaged = UnmanagedAllow
	}
	if spec.CertManager.CAInjectorServiceAccount == "" {
		spec.CertManager.CAInjectorServiceAccount = DefaultCAInjectorServiceAccount
	}
	if spec.CertManager.ClusterResourceNamespace == "" {
		spec.CertManager.ClusterResourceNamespace = DefaultClusterResourceNamespace
	}
	if spec.Flapping.MaxDistinctBundles == 0 {
		spec.Flapping.MaxDistinctBundles = DefaultMaxDistinctBundles
	}
	if spec.Flapping.Window.Duration == 0 {
		spec.Flapping.Window = metav1.Duration{Duration: DefaultFlappingWindow}
	}
	for i := range spec.Owners {
		ca := &spec.Owners[i].CA
		for _, k := range ca.setKinds() {
			if k.setDefaults != nil {
				k.setDefaults(ca)
			}
		}
	}
}
