package v1alpha1

import "k8s.io/apimachinery/pkg/util/validation/field"

// CASourceKind is one way an owner mapping names its CA: one field of
// CASource, whose key under an owner's ca (in the GuardConfig and the
// chart's values schema) is the kind's value, the name messages and metrics
// use. A kind is plain data: what the API knows of it (SecretAtRunTime,
// Example, its validation and defaults) is its row in caSourceKinds, and
// reading its CA, which needs I/O, is its entry in webhook/casource's
// reader registry, whose test walks CASourceKinds so that a forgotten
// entry fails. Code that switches on a kind lists every constant below
// (the exhaustive linter checks switches and map literals over it).
type CASourceKind string

// The kinds, in the order of CASource's fields.
const (
	CASourceSecret                CASourceKind = "secret"
	CASourceConfigMap             CASourceKind = "configMap"
	CASourceCertificate           CASourceKind = "certificate"
	CASourceIssuer                CASourceKind = "issuer"
	CASourceInjectedByCertManager CASourceKind = "injectedByCertManager"
	CASourcePEM                   CASourceKind = "pem"
)

// caSourceKind is a kind's row: what validation, defaulting, the chart's
// completeness tests and the reads of a source ask of its kind. The
// functions take the whole source and read the kind's own field, which is
// set whenever they are called (isSet said so).
type caSourceKind struct {
	kind CASourceKind
	// secretAtRunTime: the CA is in a Secret found only at run time
	// (through a cert-manager object or the configuration's annotation).
	// The chart cannot grant it by name, so its NOTES remind the user to
	// list it in extraSecretReads.
	secretAtRunTime bool
	// isSet reports whether s sets the kind's field.
	isSet func(s *CASource) bool
	// reads are the Secrets and ConfigMaps the source names (nil: none).
	reads func(s *CASource) []ObjectRead
	// validate checks the kind's own fields under p, the path of its
	// field (nil: nothing to check).
	validate func(s *CASource, p *field.Path) field.ErrorList
	// setDefaults fills in the kind's defaults before validation (nil:
	// none).
	setDefaults func(s *CASource)
	// example is a valid source of the kind.
	example func() CASource
}

// caSourceKinds is every kind, in the order of CASource's fields, which is
// the order messages name them.
var caSourceKinds = []caSourceKind{
	secretKind, configMapKind, certificateKind, issuerKind, injectedKind, pemKind,
}

// ObjectRead is an object the guard reads by name.
type ObjectRead struct {
	// Resource is "secrets" or "configmaps", as RBAC names it.
	Resource  string
	Namespace string
	Name      string
}

// CASourceKinds lists every CA source kind, in the order messages name
// them. Completeness tests iterate it.
func CASourceKinds() []CASourceKind {
	out := make([]CASourceKind, len(caSourceKinds))
	for i, k := range caSourceKinds {
		out[i] = k.kind
	}
	return out
}

// row is k's row; false for a string that is no kind.
func (k CASourceKind) row() (caSourceKind, bool) {
	for _, r := range caSourceKinds {
		if r.kind == k {
			return r, true
		}
	}
	return caSourceKind{}, false
}

// SecretAtRunTime is true when the kind's CA is in a Secret found only at
// run time (through a cert-manager object or the configuration's
// annotation): the chart cannot grant it by name, so its NOTES remind the
// user to list it in extraSecretReads.
func (k CASourceKind) SecretAtRunTime() bool {
	r, _ := k.row()
	return r.secretAtRunTime
}

// Example is a valid source of the kind; the zero CASource for a string
// that is no kind. Completeness tests in other packages (the resolver, the
// chart) build one source per kind from it, so a new kind cannot be left
// out of them.
func (k CASourceKind) Example() CASource {
	if r, ok := k.row(); ok {
		return r.example()
	}
	return CASource{}
}

// Kind is the one kind s sets, or "" when it sets none. A validated source
// sets exactly one; an invalid one that sets several returns the first in
// CASourceKinds order.
func (s *CASource) Kind() CASourceKind {
	// The resolver asks on every CA read: stop at the first kind set rather
	// than collect them all, as validation (setKinds) must.
	for _, r := range caSourceKinds {
		if r.isSet(s) {
			return r.kind
		}
	}
	return ""
}

// Reads are the Secrets and ConfigMaps s names, which the guard reads by
// name and the chart's Roles must let it read. Kinds that find their Secret
// only at run time name none: the chart cannot know it.
func (s *CASource) Reads() []ObjectRead {
	var out []ObjectRead
	for _, r := range s.setKinds() {
		if r.reads != nil {
			out = append(out, r.reads(s)...)
		}
	}
	return out
}

// setKinds are the rows of the kinds s sets, in CASourceKinds order.
func (s *CASource) setKinds() []caSourceKind {
	var out []caSourceKind
	for _, r := range caSourceKinds {
		if r.isSet(s) {
			out = append(out, r)
		}
	}
	return out
}
