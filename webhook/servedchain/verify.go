package servedchain

import (
	"crypto/x509"
	"errors"
	"fmt"
	"time"
)

// Reason is why a served chain did not verify; its values are the reason
// labels of the prober's series.
type Reason string

// The reasons a check fails, most specific first.
const (
	// ReasonNone: the served chain verified.
	ReasonNone Reason = ""
	// ReasonUnknownAuthority: the caBundle (or the system roots, for an
	// empty one) does not verify the served chain.
	ReasonUnknownAuthority Reason = "unknown-authority"
	// ReasonExpired: a served certificate is expired or not yet valid.
	ReasonExpired Reason = "expired"
	// ReasonNameMismatch: the served certificate is not valid for the
	// server name kube-apiserver uses.
	ReasonNameMismatch Reason = "name-mismatch"
	// ReasonUnreachable: no TLS handshake completed within the deadline.
	ReasonUnreachable Reason = "unreachable"
	// ReasonNoCABundle: the caBundle is set but holds no certificate, so
	// kube-apiserver cannot build its client and every call fails.
	ReasonNoCABundle Reason = "no-ca-bundle"
)

// Result is one check of a served chain.
type Result struct {
	// ServerName is the name the chain was verified for.
	ServerName string
	// SystemRoots is true when the caBundle is empty: kube-apiserver then
	// verifies against the system roots, and so did the check.
	SystemRoots bool
	// Reason is ReasonNone when the chain verified.
	Reason Reason
	// Err says what failed (x509's error, the dial's, or why the caBundle
	// gives no roots); nil when verified.
	Err error
}

// Verified reports whether the chain verified.
func (r Result) Verified() bool { return r.Reason == ReasonNone }

// Against names what the chain was verified against.
func (r Result) Against() string {
	if r.SystemRoots {
		return "the system roots (the caBundle is empty)"
	}
	return "the caBundle"
}

// Detail is Err's text, saying first when the system roots were used; ""
// when verified.
func (r Result) Detail() string {
	switch {
	case r.Err == nil:
		return ""
	case r.SystemRoots && r.Reason != ReasonUnreachable:
		return "against " + r.Against() + ": " + r.Err.Error()
	}
	return r.Err.Error()
}

// Roots are what a caBundle makes kube-apiserver trust.
type Roots struct {
	// pool is nil for the system roots.
	pool   *x509.CertPool
	system bool
}

// RootsOf is the trust kube-apiserver builds from a caBundle: the system
// roots for an empty one (its client then uses the host's roots), an error
// (ReasonNoCABundle) for one that holds no PEM certificate.
func RootsOf(caBundle []byte) (Roots, error) {
	if len(caBundle) == 0 {
		return Roots{system: true}, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caBundle) {
		return Roots{}, fmt.Errorf("the caBundle (%d bytes) holds no PEM certificate", len(caBundle))
	}
	return Roots{pool: pool}, nil
}

// System reports whether these are the system roots (an empty caBundle).
func (r Roots) System() bool { return r.system }

// Verify checks a served chain as kube-apiserver's client does: the first
// certificate is the leaf, the rest intermediates, for serverName, for
// server authentication, at now. An empty chain does not verify.
func (r Roots) Verify(chain Chain, serverName string, now time.Time) Result {
	res := Result{ServerName: serverName, SystemRoots: r.system}
	if chain.Empty() {
		res.Reason, res.Err = ReasonUnreachable, errors.New("the endpoint served no certificate within the bounds")
		return res
	}
	inter := x509.NewCertPool()
	for _, c := range chain.certs[1:] {
		inter.AddCert(c)
	}
	_, err := chain.certs[0].Verify(x509.VerifyOptions{
		Roots:         r.pool,
		Intermediates: inter,
		DNSName:       serverName,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		res.Reason, res.Err = classify(err), err
	}
	return res
}

// Verify checks a served chain against caBundle for serverName at now: a
// caBundle that holds no certificate fails (ReasonNoCABundle).
func Verify(chain Chain, caBundle []byte, serverName string, now time.Time) Result {
	roots, err := RootsOf(caBundle)
	if err != nil {
		return Result{ServerName: serverName, Reason: ReasonNoCABundle, Err: err}
	}
	return roots.Verify(chain, serverName, now)
}

// classify names a verification error's reason.
func classify(err error) Reason {
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	switch {
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return ReasonExpired
	case errors.As(err, &hostname):
		return ReasonNameMismatch
	}
	// x509.UnknownAuthorityError, and every other chain that does not
	// build to the caBundle (a wrong usage, a malformed intermediate).
	return ReasonUnknownAuthority
}
