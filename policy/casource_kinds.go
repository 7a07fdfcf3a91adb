package policy

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CASourceKind is one way an owner mapping names its CA: one field of
// CASource. Each kind is one type below, and everything that has to know
// about every kind asks the kind instead of switching on CASource's fields,
// so that a new kind is one type plus its tests. What needs I/O (reading the
// CA) cannot live here and switches on these types in webhook/casource,
// whose test walks CASourceKinds so that a forgotten case fails.
//
// A kind is bound to a CASource's field (CASource.Kind) or, as listed by
// CASourceKinds, unbound: then Reads and validate may not be called (they
// read the field).
type CASourceKind interface {
	// Field is the kind's key under an owner's ca in the GuardConfig (and
	// the chart's values schema), and the name messages and metrics use.
	Field() string
	// Reads are the Secrets and ConfigMaps the source names, which the
	// guard reads by name and the chart's Roles must let it read. Kinds
	// that find their Secret only at run time (through a cert-manager
	// object or annotation) name none: the chart cannot know it.
	Reads() []ObjectRead
	// SecretAtRunTime is true when the CA is in a Secret found only at run
	// time (through a cert-manager object or the configuration's
	// annotation). The chart cannot grant it by name, so its NOTES remind
	// the user to list it in extraSecretReads.
	SecretAtRunTime() bool
	// Example is a valid source of this kind. Completeness tests in other
	// packages (the resolver, the chart) build one source per kind from it,
	// so a new kind cannot be left out of them.
	Example() CASource

	// of returns the kind bound to s's field, or false when s does not set it.
	of(s *CASource) (CASourceKind, bool)
	// validate checks the kind's own fields under p (the path of its field).
	validate(p *field.Path) field.ErrorList
	// setDefaults fills in the kind's defaults before validation.
	setDefaults()
}

// ObjectRead is an object the guard reads by name.
type ObjectRead struct {
	// Resource is "secrets" or "configmaps", as RBAC names it.
	Resource  string
	Namespace string
	Name      string
}

// caSourceKinds lists every kind, in the order messages name them.
var caSourceKinds = []CASourceKind{
	SecretCA{}, ConfigMapCA{}, CertificateCA{}, IssuerCA{}, InjectedCA{}, InlinePEMCA{},
}

// CASourceKinds lists every CA source kind, unbound, in the order messages
// name them. Completeness tests iterate it.
func CASourceKinds() []CASourceKind {
	return append([]CASourceKind(nil), caSourceKinds...)
}

// Kind is the one kind s sets, or nil when it sets none. A validated
// source sets exactly one; an invalid one that sets several returns the
// first in CASourceKinds order.
func (s *CASource) Kind() CASourceKind {
	// The resolver asks on every CA read: stop at the first kind set rather
	// than collect them all, as validation (setKinds) must.
	for _, k := range caSourceKinds {
		if b, ok := k.of(s); ok {
			return b
		}
	}
	return nil
}

// setKinds are the kinds s sets, bound, in CASourceKinds order.
func (s *CASource) setKinds() []CASourceKind {
	var out []CASourceKind
	for _, k := range caSourceKinds {
		if b, ok := k.of(s); ok {
			out = append(out, b)
		}
	}
	return out
}
