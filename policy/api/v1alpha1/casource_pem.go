package v1alpha1

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// pemKind: the CA certificates inline in the configuration. The guard
// reads nothing for it. Its example's certificate is a fixed self-signed CA
// (CN example-ca, valid until 2126), so that the example validates without
// generating one.
var pemKind = caSourceKind{
	kind:  CASourcePEM,
	isSet: func(s *CASource) bool { return s.PEM != "" },
	validate: func(s *CASource, p *field.Path) field.ErrorList {
		if _, err := cabundle.NewCASet("pem", []byte(s.PEM)); err != nil {
			return field.ErrorList{field.Invalid(p, "<pem>", err.Error())}
		}
		return nil
	},
	example: func() CASource { return CASource{PEM: examplePEM} },
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
