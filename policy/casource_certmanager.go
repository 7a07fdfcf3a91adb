package policy

import "k8s.io/apimachinery/pkg/util/validation/field"

// The cert-manager kinds find the CA Secret only at run time, through a
// cert-manager object or the configuration's annotation, so they name no
// reads: the chart's extraSecretReads lists those Secrets.

// CertificateCA is the certificate kind: a cert-manager Certificate, whose
// Secret's ca.crt is the CA.
type CertificateCA struct{ Ref *ObjectRef }

// IssuerCA is the issuer kind: a cert-manager Issuer or ClusterIssuer of CA
// type, whose spec.ca.secretName Secret holds the CA.
type IssuerCA struct{ Ref *IssuerRef }

// InjectedCA is the injectedByCertManager kind: the CA the configuration's
// own cert-manager annotation names.
type InjectedCA struct{}

func (CertificateCA) Field() string         { return "certificate" }
func (CertificateCA) SecretAtRunTime() bool { return true }
func (CertificateCA) Reads() []ObjectRead   { return nil }
func (CertificateCA) setDefaults()          {}
func (CertificateCA) Example() CASource {
	return CASource{Certificate: &ObjectRef{Namespace: "example-system", Name: "example-serving-cert"}}
}

func (CertificateCA) of(s *CASource) (CASourceKind, bool) {
	return CertificateCA{s.Certificate}, s.Certificate != nil
}

func (k CertificateCA) validate(p *field.Path) field.ErrorList {
	return validateObjectRef(p, k.Ref.Namespace, k.Ref.Name)
}

func (IssuerCA) Field() string         { return "issuer" }
func (IssuerCA) SecretAtRunTime() bool { return true }
func (IssuerCA) Reads() []ObjectRead   { return nil }
func (IssuerCA) setDefaults()          {}
func (IssuerCA) Example() CASource {
	return CASource{Issuer: &IssuerRef{Kind: "Issuer", Namespace: "example-system", Name: "example-ca-issuer"}}
}

func (IssuerCA) of(s *CASource) (CASourceKind, bool) { return IssuerCA{s.Issuer}, s.Issuer != nil }

func (k IssuerCA) validate(p *field.Path) field.ErrorList {
	switch k.Ref.Kind {
	case "Issuer":
		return validateObjectRef(p, k.Ref.Namespace, k.Ref.Name)
	case "ClusterIssuer":
		var errs field.ErrorList
		if k.Ref.Namespace != "" {
			errs = append(errs, field.Forbidden(p.Child("namespace"), "a ClusterIssuer is cluster-scoped; its CA Secret is read from certManager.clusterResourceNamespace"))
		}
		return append(errs, validateObjectRef(p, "-", k.Ref.Name)...)
	default:
		return field.ErrorList{field.NotSupported(p.Child("kind"), k.Ref.Kind, []string{"Issuer", "ClusterIssuer"})}
	}
}

func (InjectedCA) Field() string                        { return "injectedByCertManager" }
func (InjectedCA) SecretAtRunTime() bool                { return true }
func (InjectedCA) Reads() []ObjectRead                  { return nil }
func (InjectedCA) setDefaults()                         {}
func (InjectedCA) validate(*field.Path) field.ErrorList { return nil }
func (InjectedCA) Example() CASource {
	return CASource{InjectedByCertManager: &InjectedByCertManager{}}
}

func (InjectedCA) of(s *CASource) (CASourceKind, bool) {
	return InjectedCA{}, s.InjectedByCertManager != nil
}
