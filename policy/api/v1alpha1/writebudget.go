package v1alpha1

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxWriteBudgetPerMinute bounds WriteBudget.PerMinute: the guard keeps
// the time of every write it allowed within the last minute per
// configuration, and a budget above a hundred writes a second limits no
// storm worth the name.
const MaxWriteBudgetPerMinute = 6000

func validateWriteBudget(p *field.Path, b *WriteBudget) field.ErrorList {
	if b == nil {
		return nil
	}
	p = p.Child("perMinute")
	switch {
	case b.PerMinute < 1:
		return field.ErrorList{field.Invalid(p, b.PerMinute, "must be >= 1; omit writeBudget for no limit")}
	case b.PerMinute > MaxWriteBudgetPerMinute:
		return field.ErrorList{field.Invalid(p, b.PerMinute, "must be <= 6000 (100 writes a second); omit writeBudget for no limit")}
	}
	return nil
}
