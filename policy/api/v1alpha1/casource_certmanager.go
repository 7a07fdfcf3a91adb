package v1alpha1

import "k8s.io/apimachinery/pkg/util/validation/field"

// The cert-manager kinds find the CA Secret only at run time, through a
// cert-manager object or the configuration's annotation, so they name no
// reads: the chart's extraSecretReads lists those Secrets.

// certificateKind: a cert-manager Certificate, whose Secret's ca.crt is the
// CA.
var certificateKind = caSourceKind{
	kind:            CASourceCertificate,
	secretAtRunTime: true,
	isSet:           func(s *CASource) bool { return s.Certificate != nil },
	validate: func(s *CASource, p *field.Path) field.ErrorList {
		return validateObjectRef(p, s.Certificate.Namespace, s.Certificate.Name)
	},
	example: func() CASource {
		return CASource{Certificate: &ObjectRef{Namespace: "example-system", Name: "example-serving-cert"}}
	},
}

// issuerKind: a cert-manager Issuer or ClusterIssuer of CA type, whose
// spec.ca.secretName Secret holds the CA.
var issuerKind = caSourceKind{
	kind:            CASourceIssuer,
	secretAtRunTime: true,
	isSet:           func(s *CASource) bool { return s.Issuer != nil },
	validate:        func(s *CASource, p *field.Path) field.ErrorList { return validateIssuerRef(p, s.Issuer) },
	example: func() CASource {
		return CASource{Issuer: &IssuerRef{Kind: "Issuer", Namespace: "example-system", Name: "example-ca-issuer"}}
	},
}

// injectedKind: the CA the configuration's own cert-manager annotation
// names.
var injectedKind = caSourceKind{
	kind:            CASourceInjectedByCertManager,
	secretAtRunTime: true,
	isSet:           func(s *CASource) bool { return s.InjectedByCertManager != nil },
	reads: func(s *CASource) []ObjectRead {
		// A pinned Secret is read by name; a pinned Certificate's Secret
		// is found only at run time, as the certificate kind's.
		if r := s.InjectedByCertManager.Secret; r != nil {
			return []ObjectRead{{Resource: "secrets", Namespace: r.Namespace, Name: r.Name}}
		}
		return nil
	},
	validate: func(s *CASource, p *field.Path) field.ErrorList {
		pin := s.InjectedByCertManager
		switch {
		case pin.Certificate != nil && pin.Secret != nil:
			return field.ErrorList{field.Invalid(p, "certificate and secret", "pin at most one of certificate or secret: cainjector reads one annotation")}
		case pin.Certificate != nil:
			return validateObjectRef(p.Child("certificate"), pin.Certificate.Namespace, pin.Certificate.Name)
		case pin.Secret != nil:
			return validateObjectRef(p.Child("secret"), pin.Secret.Namespace, pin.Secret.Name)
		}
		return nil
	},
	example: func() CASource { return CASource{InjectedByCertManager: &InjectedByCertManager{}} },
}

func validateIssuerRef(p *field.Path, r *IssuerRef) field.ErrorList {
	switch r.Kind {
	case "Issuer":
		return validateObjectRef(p, r.Namespace, r.Name)
	case "ClusterIssuer":
		var errs field.ErrorList
		if r.Namespace != "" {
			errs = append(errs, field.Forbidden(p.Child("namespace"), "a ClusterIssuer is cluster-scoped; its CA Secret is read from certManager.clusterResourceNamespace"))
		}
		return append(errs, validateObjectRef(p, "-", r.Name)...)
	default:
		return field.ErrorList{field.NotSupported(p.Child("kind"), r.Kind, []string{"Issuer", "ClusterIssuer"})}
	}
}
