package testpki

import (
	"crypto/x509/pkix"
	"fmt"
	"time"
)

// KeyType is the kind of key a CA and its leaves get.
type KeyType int

const (
	// ECDSAP256 is the default: it generates in well under a millisecond,
	// which keeps tests that make many CAs fast.
	ECDSAP256 KeyType = iota
	// RSA2048 is what many controllers generate for their own webhook CA.
	// Its CA PEM is ~1.1 KB, so benchmarks over caBundles measure
	// realistic sizes. Each key takes tens of milliseconds.
	RSA2048
)

// String names the key type for test and error messages.
func (k KeyType) String() string {
	switch k {
	case ECDSAP256:
		return "ECDSA P-256"
	case RSA2048:
		return "RSA-2048"
	default:
		return fmt.Sprintf("KeyType(%d)", int(k))
	}
}

// DefaultValidity is how long a CA is valid from now when no WithValidity
// is given. A CA also starts an hour in the past, so that a clock a little
// behind the one that signed still accepts it.
const DefaultValidity = 24 * time.Hour

// Option changes how NewCA makes a CA.
type Option func(*options)

type options struct {
	keyType             KeyType
	subject             pkix.Name
	notBefore, notAfter time.Time
}

// WithKeyType sets the key type of the CA and of every leaf it issues.
func WithKeyType(k KeyType) Option {
	return func(o *options) { o.keyType = k }
}

// WithValidity sets the CA's validity window, and so its leaves'. Tests of
// expiry checks need a chosen NotAfter, and committed samples need dates
// that do not run out.
func WithValidity(notBefore, notAfter time.Time) Option {
	return func(o *options) { o.notBefore, o.notAfter = notBefore, notAfter }
}

// WithSubject sets the CA's subject; its CommonName is always NewCA's cn.
// Callers name an organization to say whose CA it is, or fill a whole
// subject to give a CA the size of one found in a real cluster.
func WithSubject(name pkix.Name) Option {
	return func(o *options) { o.subject = name }
}
