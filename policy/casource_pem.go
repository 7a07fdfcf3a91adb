package policy

import "k8s.io/apimachinery/pkg/util/validation/field"

// InlinePEMCA is the pem kind: the CA certificates inline in the
// configuration. The guard reads nothing for it.
type InlinePEMCA struct{ PEM string }

func (InlinePEMCA) Field() string         { return "pem" }
func (InlinePEMCA) SecretAtRunTime() bool { return false }
func (InlinePEMCA) Reads() []ObjectRead   { return nil }
func (InlinePEMCA) setDefaults()          {}

// Example's certificate is a fixed self-signed CA (CN example-ca, valid
// until 2126), so that the example validates without generating one.
func (InlinePEMCA) Example() CASource { return CASource{PEM: examplePEM} }

func (InlinePEMCA) of(s *CASource) (CASourceKind, bool) { return InlinePEMCA{s.PEM}, s.PEM != "" }

func (k InlinePEMCA) validate(p *field.Path) field.ErrorList {
	if _, err := NewCASet("pem", []byte(k.PEM)); err != nil {
		return field.ErrorList{field.Invalid(p, "<pem>", err.Error())}
	}
	return nil
}

const examplePEM = `-----BEGIN CERTIFICATE-----
MIIBkDCCATegAwIBAgIUGpDsS7a/javFCCXY/5yO0rNt61AwCgYIKoZIzj0EAwIw
FTETMBEGA1UEAwwKZXhhbXBsZS1jYTAgFw0yNjEyMDExMTI1MDVaGA8yMTI2MTEw
NzExMjUwNVowFTETMBEGA1UEAwwKZXhhbXBsZS1jYTBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABNvr7wo1CRtuDr1bL1uVxAEeYZKlb4V7Zj4kP5UtInmwORtHThaJ
d6BkkgnjbnqIxvqKZHOadYQmCK8rzgk6pE6jYzBhMB0GA1UdDgQWBBSYtT7knSfG
vyJHcoPzhsOkJjqFsjAfBgNVHSMEGDAWgBSYtT7knSfGvyJHcoPzhsOkJjqFsjAP
BgNVHRMBAf8EBTADAQH/MA4GA1UdDwEB/wQEAwIBBjAKBggqhkjOPQQDAgNHADBE
AiAhL4dLqoEK0hahGODe38/PJ7lTdJe1ZmFplkxnfCaWvAIgerbq79aR3dQUV7eY
oGNb1kjD0lFaZOxQNNYmArY+duM=
-----END CERTIFICATE-----
`
