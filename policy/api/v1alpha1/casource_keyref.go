package v1alpha1

import "k8s.io/apimachinery/pkg/util/validation/field"

// secretKind: a key of a Secret.
var secretKind = keyRefKind(CASourceSecret, "secrets", "example-ca-secret",
	func(s *CASource) **KeyRef { return &s.Secret })

// configMapKind: a key of a ConfigMap's data or binaryData.
var configMapKind = keyRefKind(CASourceConfigMap, "configmaps", "example-ca-bundle",
	func(s *CASource) **KeyRef { return &s.ConfigMap })

// keyRefKind is the row of a kind that names one key of an object of
// resource, read by name; ref is the kind's field of a source.
func keyRefKind(kind CASourceKind, resource, exampleName string, ref func(*CASource) **KeyRef) caSourceKind {
	return caSourceKind{
		kind:  kind,
		isSet: func(s *CASource) bool { return *ref(s) != nil },
		reads: func(s *CASource) []ObjectRead {
			r := *ref(s)
			return []ObjectRead{{Resource: resource, Namespace: r.Namespace, Name: r.Name}}
		},
		validate:    func(s *CASource, p *field.Path) field.ErrorList { return validateKeyRef(p, *ref(s)) },
		setDefaults: func(s *CASource) { defaultKey(*ref(s)) },
		example: func() CASource {
			var s CASource
			*ref(&s) = &KeyRef{Namespace: "example-system", Name: exampleName, Key: DefaultCAKey}
			return s
		},
	}
}

func defaultKey(r *KeyRef) {
	if r.Key == "" {
		r.Key = DefaultCAKey
	}
}
