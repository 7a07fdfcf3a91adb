package v1alpha1

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateTrustObjectNames checks the names of CustomResourceDefinitions
// and APIServices for the shape kube-apiserver gives them, so that a
// mapping naming "certificates" instead of "certificates.cert-manager.io"
// fails at load rather than matching nothing: a CRD is named
// <plural>.<group>, an APIService <version>.<group>. Each is a DNS
// subdomain too, which claimNames checks.
func validateTrustObjectNames(p *field.Path, m *Match) field.ErrorList {
	var errs field.ErrorList
	for j, n := range m.CustomResourceDefinitions {
		if n != "" && !strings.Contains(n, ".") {
			errs = append(errs, field.Invalid(p.Child("customResourceDefinitions").Index(j), n,
				"a CustomResourceDefinition is named <plural>.<group>, such as certificates.cert-manager.io"))
		}
	}
	for j, n := range m.APIServices {
		if n != "" && !strings.Contains(n, ".") {
			errs = append(errs, field.Invalid(p.Child("apiServices").Index(j), n,
				"an APIService is named <version>.<group>, such as v1beta1.metrics.k8s.io"))
		}
	}
	return errs
}
