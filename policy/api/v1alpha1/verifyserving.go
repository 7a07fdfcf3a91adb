package v1alpha1

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// VerifyServing says whether a caBundle that does not verify what its
// endpoint served is warned about or refused.
type VerifyServing string

const (
	// VerifyServingWarn allows the write with a warning kubectl prints.
	VerifyServingWarn VerifyServing = "warn"
	// VerifyServingDeny refuses it (enforce) or records a would-deny
	// (audit). Safe only for writers that publish a CA before the endpoint
	// serves a leaf under it, as cainjector's merge does.
	VerifyServingDeny VerifyServing = "deny"
)

func validateVerifyServing(p *field.Path, v VerifyServing) field.ErrorList {
	if v != "" && v != VerifyServingWarn && v != VerifyServingDeny {
		return field.ErrorList{field.NotSupported(p, v, []VerifyServing{VerifyServingWarn, VerifyServingDeny})}
	}
	return nil
}
