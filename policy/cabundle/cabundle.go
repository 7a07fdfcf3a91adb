package cabundle

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"slices"
	"time"
)

// MaxCertificates bounds the certificates one caBundle may hold. Real
// bundles hold one to a handful (old+new during rotation); the bound keeps a
// hostile 10,000-certificate bundle from costing unbounded time and memory.
const MaxCertificates = 64

// shortFingerprintLen is how many hex digits messages show.
const shortFingerprintLen = 16

// Fingerprint is the SHA-256 of a certificate's DER bytes.
type Fingerprint [sha256.Size]byte

// String is the full lowercase hex digest.
func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// Short is the first 16 hex digits, enough to tell CAs apart in messages.
func (f Fingerprint) Short() string { return f.String()[:shortFingerprintLen] }

// Error says why a PEM bundle was rejected.
type Error struct {
	Reason string
}

func (e *Error) Error() string { return e.Reason }

// Parse returns the fingerprints of the certificates kube-apiserver
// would trust in a caBundle, in order. kube-apiserver loads a caBundle with
// x509.CertPool.AppendCertsFromPEM, which takes CERTIFICATE blocks without
// PEM headers that parse, and silently skips everything else (other block
// types, blocks with headers, bad DER, text). The guard counts exactly the
// same certificates: fingerprinting a block kube-apiserver skips would accept
// a bundle that leaves the webhook with no usable CA. A bundle with no usable
// certificate, or more than MaxCertificates CERTIFICATE blocks, is an
// error.
func Parse(data []byte) ([]Fingerprint, error) {
	fps, _, err := parseBundle(data)
	return fps, err
}

// parseBundle is Parse that also returns the earliest NotAfter of the
// certificates, from the same parse (x509 parsing is most of the cost).
func parseBundle(data []byte) ([]Fingerprint, time.Time, error) {
	var fps []Fingerprint
	var earliest time.Time
	blocks, certBlocks, skipped := 0, 0, ""
	for rest := data; ; {
		block, next := pem.Decode(rest)
		if block == nil {
			break
		}
		rest, blocks = next, blocks+1
		if block.Type != "CERTIFICATE" {
			skipped = cmp.Or(skipped, fmt.Sprintf("PEM block %d is a %q, not a CERTIFICATE", blocks-1, block.Type))
			continue
		}
		// Every CERTIFICATE block costs a parse, usable or not: bound them all.
		if certBlocks++; certBlocks > MaxCertificates {
			return nil, time.Time{}, &Error{Reason: fmt.Sprintf("holds more than %d certificates", MaxCertificates)}
		}
		if len(block.Headers) != 0 {
			skipped = cmp.Or(skipped, fmt.Sprintf("PEM block %d carries PEM headers", blocks-1))
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			skipped = cmp.Or(skipped, fmt.Sprintf("PEM block %d is not a valid certificate: %v", blocks-1, err))
			continue
		}
		if earliest.IsZero() || c.NotAfter.Before(earliest) {
			earliest = c.NotAfter
		}
		fps = append(fps, sha256.Sum256(block.Bytes))
	}
	switch {
	case len(fps) > 0:
		return fps, earliest, nil
	case blocks > 0:
		return nil, time.Time{}, &Error{Reason: "holds no certificate kube-apiserver can use (" + skipped + "; kube-apiserver skips such blocks)"}
	case len(bytes.TrimSpace(data)) == 0:
		return nil, time.Time{}, &Error{Reason: "is empty"}
	}
	return nil, time.Time{}, &Error{Reason: "is not PEM: no \"-----BEGIN CERTIFICATE-----\" block found"}
}

// SecretKey names the key of a Secret a CA set was read from.
type SecretKey struct {
	Namespace string
	Name      string
	Key       string
}

// CASet is an owner's set of trusted CA certificates, by fingerprint.
type CASet struct {
	// Source describes where the set was read, for messages.
	Source string
	fps    []Fingerprint // sorted, deduplicated
	// pem is the bytes the set was parsed from (policy shape compares
	// caBundles with them byte for byte; see PEM).
	pem []byte
	// notAfter is the earliest expiry of the certificates, when the set
	// was parsed from PEM (zero when built from fingerprints).
	notAfter time.Time
	// secret is the Secret key the set was read from, when it came from
	// one (see FromSecret).
	secret *SecretKey
}

// FromSecret returns the set marked as read from the Secret key ref. Policy
// mode has kube-apiserver read the same key as a ValidatingAdmissionPolicy
// param, so that a rotation of the Secret reaches the policy as soon as it
// reaches the writer.
func (s CASet) FromSecret(ref SecretKey) CASet {
	s.secret = &ref
	return s
}

// Secret is the Secret key the set was read from; nil when it was not read
// from a Secret (a ConfigMap, inline PEM, fingerprints).
func (s CASet) Secret() *SecretKey {
	if s.secret == nil {
		return nil
	}
	ref := *s.secret
	return &ref
}

// NewCASet parses a PEM bundle into a CASet.
func NewCASet(source string, pemData []byte) (CASet, error) {
	fps, notAfter, err := parseBundle(pemData)
	if err != nil {
		return CASet{}, err
	}
	s := NewCASetFromFingerprints(source, fps...)
	s.pem = slices.Clone(pemData)
	s.notAfter = notAfter
	return s, nil
}

// NotAfter is the earliest expiry of the set's certificates; zero when
// unknown (a set built from fingerprints).
func (s CASet) NotAfter() time.Time { return s.notAfter }

// NewCASetFromFingerprints builds a set from known fingerprints.
func NewCASetFromFingerprints(source string, fps ...Fingerprint) CASet {
	s := CASet{Source: source, fps: slices.Clone(fps)}
	slices.SortFunc(s.fps, func(a, b Fingerprint) int { return bytes.Compare(a[:], b[:]) })
	s.fps = slices.Compact(s.fps)
	return s
}

// Union returns a set holding the certificates of both. Its PEM is s's
// followed by o's, unless o adds no certificate (a self-signed CA issuer's
// Secret repeats tls.crt in ca.crt).
func (s CASet) Union(o CASet) CASet {
	u := NewCASetFromFingerprints(s.Source, append(slices.Clone(s.fps), o.fps...)...)
	u.pem = slices.Clone(s.pem)
	if u.Len() > s.Len() && len(o.pem) > 0 {
		if len(u.pem) > 0 && u.pem[len(u.pem)-1] != '\n' {
			u.pem = append(u.pem, '\n')
		}
		u.pem = append(u.pem, o.pem...)
	}
	u.notAfter, u.secret = s.notAfter, s.secret
	if u.notAfter.IsZero() || (!o.notAfter.IsZero() && o.notAfter.Before(u.notAfter)) {
		u.notAfter = o.notAfter
	}
	return u
}

// PEM is the bundle the set was read from, byte for byte (nil for a set
// built from fingerprints). Policy shape compares caBundles with these bytes:
// CEL cannot parse PEM.
func (s CASet) PEM() []byte { return slices.Clone(s.pem) }

// Contains reports whether the fingerprint is in the set.
func (s CASet) Contains(f Fingerprint) bool {
	_, found := slices.BinarySearchFunc(s.fps, f, func(a, b Fingerprint) int { return bytes.Compare(a[:], b[:]) })
	return found
}

// Len is the number of distinct certificates.
func (s CASet) Len() int { return len(s.fps) }

// Fingerprints returns the sorted fingerprints.
func (s CASet) Fingerprints() []Fingerprint { return slices.Clone(s.fps) }

// Short returns the short fingerprints, sorted.
func (s CASet) Short() []string { return ShortAll(s.fps) }

// ShortAll returns the short fingerprints of fps, in order.
func ShortAll(fps []Fingerprint) []string {
	out := make([]string, len(fps))
	for i, f := range fps {
		out[i] = f.Short()
	}
	return out
}
