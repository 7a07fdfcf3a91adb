package v1alpha1

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateTrustObjectNames checks the names of the kinds kube-apiserver
// names with a dot (KindInfo.NameHint) for that shape, so that a mapping
// naming "certificates" instead of "certificates.cert-manager.io" fails at
// load rather than matching nothing: a CRD is named <plural>.<group>, an
// APIService <version>.<group>. Each is a DNS subdomain too, which
// claimNames checks.
func validateTrustObjectNames(p *field.Path, m *Match) field.ErrorList {
	var errs field.ErrorList
	for _, named := range m.Named() {
		if named.NameHint == "" {
			continue
		}
		for j, n := range named.Names {
			if n != "" && !strings.Contains(n, ".") {
				errs = append(errs, field.Invalid(p.Child(named.Field).Index(j), n, named.NameHint))
			}
		}
	}
	return errs
}

// matchFields words the Match fields a mapping may set, for the error of
// a mapping that sets none: every kind's field, then labelSelector.
func matchFields() string {
	fields := make([]string, 0, len(Kinds))
	for _, k := range Kinds {
		fields = append(fields, k.Field)
	}
	return strings.Join(fields, ", ") + " or labelSelector"
}
