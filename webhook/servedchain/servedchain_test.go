package servedchain

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
)

// serveTLS serves leaf on 127.0.0.1 at TLS versions minVersion to
// maxVersion (0: the newest) until the test ends.
func serveTLS(t *testing.T, leaf *testpki.Leaf, minVersion, maxVersion uint16) string {
	t.Helper()
	cfg := leaf.ServerConfig(t)
	cfg.MinVersion, cfg.MaxVersion = minVersion, maxVersion
	return testpki.ServeTLS(t, cfg, nil)
}

func Test_Endpoint_ServerName(t *testing.T) {
	tests := map[string]struct {
		endpoint Endpoint
		want     string
	}{
		"if the entry calls a Service, the name is <service>.<namespace>.svc": {
			endpoint: Endpoint{Service: &Service{Namespace: "app", Name: "hook", Port: 8443}}, want: "hook.app.svc",
		},
		"if the entry calls a URL, the name is its host, without the port": {
			endpoint: Endpoint{URL: "https://hook.example.com:8443/validate"}, want: "hook.example.com",
		},
		"if the URL's host is an IPv6 address, the name is the address": {
			endpoint: Endpoint{URL: "https://[fd00::1]/validate"}, want: "fd00::1",
		},
		"if the URL does not parse, there is no name": {
			endpoint: Endpoint{URL: "https://a b/%zz"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.endpoint.ServerName())
		})
	}
}

func Test_addresses(t *testing.T) {
	addr, err := Endpoint{URL: "https://hook.example.com/validate"}.URLAddress()
	require.NoError(t, err)
	assert.Equal(t, "hook.example.com:443", addr, "a URL without a port is called at 443")
	assert.Equal(t, "hook.app.svc:443", Service{Namespace: "app", Name: "hook"}.DNSAddress(), "a Service without a port is called at 443")
	assert.Equal(t, "hook.app.svc:8443", Service{Namespace: "app", Name: "hook", Port: 8443}.DNSAddress())
}

func Test_Verify(t *testing.T) {
	now := time.Now()
	ca, other := testpki.MustCA(t, "served-ca"), testpki.MustCA(t, "other-ca")
	past := now.Add(-48 * time.Hour)
	expiredCA := testpki.MustCA(t, "expired-ca", testpki.WithValidity(past, past.Add(24*time.Hour)))
	chainOf := func(ca *testpki.CA, hosts ...string) Chain {
		l, err := ca.Issue("webhook", hosts...)
		require.NoError(t, err)
		return NewChain([]*x509.Certificate{l.Cert})
	}
	tests := map[string]struct {
		chain    Chain
		caBundle []byte
		want     Result
	}{
		"if the caBundle holds the CA that signed the leaf for the name, it verifies": {
			chain: chainOf(ca, "hook.app.svc"), caBundle: ca.PEM,
			want: Result{ServerName: "hook.app.svc"},
		},
		"if another CA signed the leaf, the reason is unknown-authority": {
			chain: chainOf(other, "hook.app.svc"), caBundle: ca.PEM,
			want: Result{ServerName: "hook.app.svc", Reason: ReasonUnknownAuthority},
		},
		"if the leaf is for another name, the reason is name-mismatch": {
			chain: chainOf(ca, "elsewhere.app.svc"), caBundle: ca.PEM,
			want: Result{ServerName: "hook.app.svc", Reason: ReasonNameMismatch},
		},
		"if the leaf has expired, the reason is expired": {
			chain: chainOf(expiredCA, "hook.app.svc"), caBundle: expiredCA.PEM,
			want: Result{ServerName: "hook.app.svc", Reason: ReasonExpired},
		},
		"if the caBundle is empty, the system roots are used, and say so; they do not verify a private CA": {
			chain: chainOf(ca, "hook.app.svc"),
			want:  Result{ServerName: "hook.app.svc", SystemRoots: true, Reason: ReasonUnknownAuthority},
		},
		"if the caBundle holds no certificate, the reason is no-ca-bundle": {
			chain: chainOf(ca, "hook.app.svc"), caBundle: []byte("not PEM"),
			want: Result{ServerName: "hook.app.svc", Reason: ReasonNoCABundle},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Verify(tc.chain, tc.caBundle, "hook.app.svc", now)
			assert.Equal(t, tc.want.Reason == ReasonNone, got.Err == nil, "error: %v", got.Err)
			got.Err = nil
			assert.Equal(t, tc.want, got)
		})
	}
}

func Test_Result_Detail(t *testing.T) {
	leaf, err := testpki.MustCA(t, "private-ca").Issue("webhook", "hook.app.svc")
	require.NoError(t, err)
	chain := NewChain([]*x509.Certificate{leaf.Cert})
	assert.Equal(t, "against the system roots (the caBundle is empty): x509: certificate signed by unknown authority",
		Verify(chain, nil, "hook.app.svc", time.Now()).Detail())
	assert.Empty(t, Result{}.Detail(), "a verified chain has no detail")
}

func Test_Keep(t *testing.T) {
	ca := testpki.MustCA(t, "webhook-ca")
	der := ca.Cert.Raw
	chain := [][]byte{der, der, der, der}
	cases := map[string]struct {
		maxCerts, maxBytes, want int
		cut                      bool
	}{
		"if the chain is within both bounds, it is kept whole":                              {maxCerts: 8, maxBytes: 64 << 10, want: 4},
		"if the chain has more certificates than the bound, the first are kept, marked cut": {maxCerts: 2, maxBytes: 64 << 10, want: 2, cut: true},
		"if the chain is larger than the byte bound, what fits is kept, marked cut":         {maxCerts: 8, maxBytes: 2*len(der) + 1, want: 2, cut: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, cut := Keep(chain, tc.maxCerts, tc.maxBytes)
			require.Len(t, got.Certs(), tc.want)
			require.Equal(t, tc.want*len(der), got.Size())
			require.Equal(t, tc.cut, cut)
			require.NotSame(t, &der[0], &got.Certs()[0].Raw[0], "the DER is copied, not kept in the handshake's buffer")
		})
	}
}

func Test_ParsePEM(t *testing.T) {
	ca := testpki.MustCA(t, "webhook-ca")
	leaf, err := ca.Issue("webhook", "hook.app.svc")
	require.NoError(t, err)
	chain, err := ParsePEM(append(append([]byte{}, leaf.CertPEM...), ca.PEM...))
	require.NoError(t, err)
	require.Len(t, chain.Certs(), 2, "leaf and CA, in the order given")
	_, err = ParsePEM([]byte("tls.crt holds no certificate\n"))
	require.EqualError(t, err, "holds no PEM CERTIFICATE block")
	var long []byte
	for range DefaultMaxCerts + 1 {
		long = append(long, ca.PEM...)
	}
	_, err = ParsePEM(long)
	require.ErrorContains(t, err, "9 certificates, over the prober's bounds")
}

func Test_Dialer_Check(t *testing.T) {
	now := time.Now()
	ca := testpki.MustCA(t, "webhook-ca")
	leaf, err := ca.Issue("webhook", "127.0.0.1")
	require.NoError(t, err)
	modern := serveTLS(t, leaf, tls.VersionTLS12, 0)
	old := serveTLS(t, leaf, tls.VersionTLS10, tls.VersionTLS11)
	d := Dialer{Timeout: 5 * time.Second}
	at := func(addr string) Endpoint { return Endpoint{URL: "https://" + addr + "/validate"} }

	t.Run("if the caBundle verifies what the address serves for the URL's host, it is verified", func(t *testing.T) {
		chain, res := d.Check(t.Context(), at(modern), ca.PEM, modern, now)
		require.True(t, res.Verified(), "error: %v", res.Err)
		assert.Equal(t, "127.0.0.1", res.ServerName)
		assert.Len(t, chain.Certs(), 1)
	})
	t.Run("if the server offers nothing at kube-apiserver's TLS floor (1.2), the reason is unreachable", func(t *testing.T) {
		_, res := d.Check(t.Context(), at(old), ca.PEM, old, now)
		assert.Equal(t, ReasonUnreachable, res.Reason)
		assert.ErrorContains(t, res.Err, "protocol version")
	})
	t.Run("if the caBundle holds no certificate, nothing is dialled: no-ca-bundle", func(t *testing.T) {
		chain, res := d.Check(t.Context(), at("192.0.2.1:1"), []byte("not PEM"), "192.0.2.1:1", now)
		assert.Equal(t, ReasonNoCABundle, res.Reason)
		assert.True(t, chain.Empty())
	})
	t.Run("if the caBundle is empty, the served chain is verified against the system roots, and says so", func(t *testing.T) {
		chain, res := d.Check(t.Context(), at(modern), nil, modern, now)
		assert.Equal(t, ReasonUnknownAuthority, res.Reason)
		assert.True(t, res.SystemRoots)
		assert.False(t, chain.Empty(), "what was served is returned all the same")
	})
}
