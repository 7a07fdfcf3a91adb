package cabundle

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
)

func Test_ParseBundle(t *testing.T) {
	f := testFixtures(t)

	var tooMany []byte
	for range MaxCertificates + 1 {
		tooMany = append(tooMany, f.Owner.PEM...)
	}
	var atMax []byte
	var atMaxFPs []Fingerprint
	for range MaxCertificates {
		atMax = append(atMax, f.Owner.PEM...)
		atMaxFPs = append(atMaxFPs, f.Owner.FP)
	}
	garbageDER := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")})

	tests := map[string]struct {
		input  []byte
		expFPs []Fingerprint
		expErr string
	}{
		"if the bundle holds one certificate, return its fingerprint": {
			input:  f.Owner.PEM,
			expFPs: []Fingerprint{f.Owner.FP},
		},
		"if the bundle holds old and new CA during a rotation, return both in order": {
			input:  slices.Concat(f.Owner.PEM, f.OwnerNew.PEM),
			expFPs: []Fingerprint{f.Owner.FP, f.OwnerNew.FP},
		},
		"if there is text around and between the blocks, ignore it": {
			input:  slices.Concat([]byte("# koord CA\n"), f.Owner.PEM, []byte("\nSubject: CN=koord-ca-2\n\n"), f.OwnerNew.PEM, []byte("trailer")),
			expFPs: []Fingerprint{f.Owner.FP, f.OwnerNew.FP},
		},
		"if the bundle holds exactly MaxCertificates, accept it": {
			input:  atMax,
			expFPs: atMaxFPs,
		},
		"if the bundle is empty, say it is empty": {
			input:  nil,
			expErr: "is empty",
		},
		"if the bundle is only whitespace, say it is empty": {
			input:  []byte(" \n\t "),
			expErr: "is empty",
		},
		"if the bundle is not PEM, say no certificate block was found": {
			input:  []byte("not pem"),
			expErr: `is not PEM: no "-----BEGIN CERTIFICATE-----" block found`,
		},
		"if the bundle holds a private key beside a certificate, skip the key as kube-apiserver does": {
			input:  slices.Concat(f.Owner.PEM, f.KeyPEM),
			expFPs: []Fingerprint{f.Owner.FP},
		},
		"if the bundle holds only a private key, say it holds no usable certificate": {
			input:  f.KeyPEM,
			expErr: `holds no certificate kube-apiserver can use (PEM block 0 is a "EC PRIVATE KEY", not a CERTIFICATE; kube-apiserver skips such blocks)`,
		},
		"if a CERTIFICATE block does not hold a certificate, skip it as kube-apiserver does": {
			input:  slices.Concat(f.Owner.PEM, garbageDER),
			expFPs: []Fingerprint{f.Owner.FP},
		},
		"if the only CERTIFICATE block does not parse, say which block and why": {
			input:  garbageDER,
			expErr: "holds no certificate kube-apiserver can use (PEM block 0 is not a valid certificate: x509: malformed certificate; kube-apiserver skips such blocks)",
		},
		"if a CERTIFICATE block carries PEM headers, skip it: kube-apiserver does not trust it": {
			input:  slices.Concat(testpki.WithPEMHeaders(f.Foreign.PEM), f.Owner.PEM),
			expFPs: []Fingerprint{f.Owner.FP},
		},
		"if every CERTIFICATE block carries PEM headers, say it holds no usable certificate": {
			input:  testpki.WithPEMHeaders(f.Owner.PEM),
			expErr: "holds no certificate kube-apiserver can use (PEM block 0 carries PEM headers; kube-apiserver skips such blocks)",
		},
		"if the bundle holds more than MaxCertificates, refuse it": {
			input:  tooMany,
			expErr: "holds more than 64 certificates",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			fps, err := Parse(test.input)
			if test.expErr != "" {
				require.EqualError(t, err, test.expErr)
				var be *Error
				assert.ErrorAs(t, err, &be)
				assert.Nil(t, fps)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, test.expFPs, fps)
		})
	}
}

func Test_Fingerprint(t *testing.T) {
	f := testFixtures(t)
	block, _ := pem.Decode(f.Owner.PEM)
	require.NotNil(t, block)
	sum := sha256.Sum256(block.Bytes)
	full := fmt.Sprintf("%x", sum)

	assert.Equal(t, full, f.Owner.FP.String())
	assert.Len(t, f.Owner.FP.String(), 64)
	assert.Equal(t, full[:16], f.Owner.FP.Short())
	assert.Len(t, f.Owner.FP.Short(), 16)
}

func Test_NewCASet(t *testing.T) {
	f := testFixtures(t)
	tests := map[string]struct {
		input  []byte
		expFPs []Fingerprint
		expErr string
	}{
		"if the PEM holds one CA, return a set of one": {
			input:  f.Owner.PEM,
			expFPs: []Fingerprint{f.Owner.FP},
		},
		"if the PEM holds a CA twice, deduplicate it": {
			input:  slices.Concat(f.Owner.PEM, f.OwnerNew.PEM, f.Owner.PEM),
			expFPs: sortedFPs(f.Owner.FP, f.OwnerNew.FP),
		},
		"if the PEM is garbage, return the bundle error": {
			input:  []byte("garbage"),
			expErr: `is not PEM: no "-----BEGIN CERTIFICATE-----" block found`,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			set, err := NewCASet("secret koordinator-system/webhook-certs", test.input)
			if test.expErr != "" {
				require.EqualError(t, err, test.expErr)
				assert.Equal(t, CASet{}, set)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "secret koordinator-system/webhook-certs", set.Source)
			assert.Equal(t, test.expFPs, set.Fingerprints())
			assert.Equal(t, len(test.expFPs), set.Len())
		})
	}
}

func Test_CASet(t *testing.T) {
	f := testFixtures(t)
	old := NewCASetFromFingerprints("old", f.Owner.FP)
	next := NewCASetFromFingerprints("next", f.OwnerNew.FP, f.Owner.FP)

	union := old.Union(next)
	assert.Equal(t, "old", union.Source)
	assert.Equal(t, sortedFPs(f.Owner.FP, f.OwnerNew.FP), union.Fingerprints())
	assert.Equal(t, 2, union.Len())
	assert.Equal(t, ShortAll(sortedFPs(f.Owner.FP, f.OwnerNew.FP)), union.Short())

	assert.True(t, union.Contains(f.Owner.FP))
	assert.True(t, union.Contains(f.OwnerNew.FP))
	assert.False(t, union.Contains(f.Foreign.FP))
	assert.False(t, CASet{}.Contains(f.Owner.FP))

	// Fingerprints returns a copy: the set stays immutable.
	fps := union.Fingerprints()
	fps[0] = f.Foreign.FP
	assert.False(t, union.Contains(f.Foreign.FP))
	// The union does not change its operands.
	assert.Equal(t, []Fingerprint{f.Owner.FP}, old.Fingerprints())
}

// sortedFPs sorts fingerprints by their bytes, the order a CASet keeps.
func sortedFPs(fps ...Fingerprint) []Fingerprint {
	out := slices.Clone(fps)
	slices.SortFunc(out, func(a, b Fingerprint) int { return bytes.Compare(a[:], b[:]) })
	return out
}

func Test_CASetNotAfter(t *testing.T) {
	f := testFixtures(t)
	set, err := NewCASet("test", slices.Concat(f.Inline.PEM, f.OwnerNew.PEM))
	if err != nil {
		t.Fatal(err)
	}
	want := earliestExpiry(f.Inline.PEM)
	if other := earliestExpiry(f.OwnerNew.PEM); other.Before(want) {
		want = other
	}
	if got := set.NotAfter(); !got.Equal(want) || got.IsZero() {
		t.Errorf("NotAfter = %s; want the earliest expiry %s", got, want)
	}
	if u := NewCASetFromFingerprints("fp", f.Inline.FP).Union(set); !u.NotAfter().Equal(want) {
		t.Errorf("Union NotAfter = %s; want %s", u.NotAfter(), want)
	}
}

// earliestExpiry is the earliest NotAfter of the certificates in a PEM
// bundle; zero when it holds none.
func earliestExpiry(pemData []byte) time.Time {
	var earliest time.Time
	for rest := pemData; ; {
		block, next := pem.Decode(rest)
		if block == nil {
			return earliest
		}
		rest = next
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil && (earliest.IsZero() || c.NotAfter.Before(earliest)) {
			earliest = c.NotAfter
		}
	}
}
