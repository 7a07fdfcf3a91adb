package testpki

import "crypto/x509"

// IssueClient signs a client certificate named cn (ExtKeyUsage clientAuth,
// which a TLS server requires of the certificates its clients present), as
// kube-apiserver presents one to a webhook that authenticates it.
func (ca *CA) IssueClient(cn string) (*Leaf, error) {
	return ca.issue("client", ca.leafTemplate(cn, x509.ExtKeyUsageClientAuth))
}
