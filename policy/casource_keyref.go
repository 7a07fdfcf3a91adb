package policy

import "k8s.io/apimachinery/pkg/util/validation/field"

// SecretCA is the secret kind: a key of a Secret.
type SecretCA struct{ Ref *KeyRef }

// ConfigMapCA is the configMap kind: a key of a ConfigMap's data or
// binaryData.
type ConfigMapCA struct{ Ref *KeyRef }

func (SecretCA) Field() string { return "secret" }

func (SecretCA) SecretAtRunTime() bool { return false }
func (k SecretCA) Reads() []ObjectRead {
	return []ObjectRead{{Resource: "secrets", Namespace: k.Ref.Namespace, Name: k.Ref.Name}}
}

func (SecretCA) Example() CASource {
	return CASource{Secret: &KeyRef{Namespace: "example-system", Name: "example-ca-secret", Key: DefaultCAKey}}
}

func (SecretCA) of(s *CASource) (CASourceKind, bool) { return SecretCA{s.Secret}, s.Secret != nil }

func (k SecretCA) validate(p *field.Path) field.ErrorList { return validateKeyRef(p, k.Ref) }

func (k SecretCA) setDefaults() { defaultKey(k.Ref) }

func (ConfigMapCA) Field() string { return "configMap" }

func (ConfigMapCA) SecretAtRunTime() bool { return false }
func (k ConfigMapCA) Reads() []ObjectRead {
	return []ObjectRead{{Resource: "configmaps", Namespace: k.Ref.Namespace, Name: k.Ref.Name}}
}

func (ConfigMapCA) Example() CASource {
	return CASource{ConfigMap: &KeyRef{Namespace: "example-system", Name: "example-ca-bundle", Key: DefaultCAKey}}
}

func (ConfigMapCA) of(s *CASource) (CASourceKind, bool) {
	return ConfigMapCA{s.ConfigMap}, s.ConfigMap != nil
}

func (k ConfigMapCA) validate(p *field.Path) field.ErrorList { return validateKeyRef(p, k.Ref) }

func (k ConfigMapCA) setDefaults() { defaultKey(k.Ref) }

func defaultKey(r *KeyRef) {
	if r.Key == "" {
		r.Key = DefaultCAKey
	}
}
