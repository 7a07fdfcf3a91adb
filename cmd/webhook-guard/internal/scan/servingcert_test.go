package scan

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
)

// Test_dialServingCert: the dialed serving certificate is checked by the
// served-chain verifier, with kube-apiserver's rules for the caBundle.
func Test_dialServingCert(t *testing.T) {
	now := time.Now()
	ca := testpki.MustCA(t, "app-ca")
	leaf, err := ca.Issue("app-webhook", "127.0.0.1")
	require.NoError(t, err)
	f := func(level Level, check, field, detail, fix string) Finding {
		return Finding{Level: level, Check: check, Field: field, Detail: detail, Suggestion: fix}
	}
	o := Options{Now: now, ExpiryThreshold: time.Hour, DialTimeout: 5 * time.Second}
	var conns atomic.Int32
	addr := testpki.ServeTLS(t, leaf.ServerConfig(t), &conns)
	url := "https://" + addr + "/validate"
	tests := map[string]struct {
		caBundle []byte
		want     []Finding
	}{
		"if the caBundle verifies the served leaf for the URL's host, report nothing": {caBundle: ca.PEM},
		"if the caBundle is empty, the served leaf is verified against the system roots, and the finding says so": {
			want: []Finding{{Level: LevelFail, Check: CheckServingCert, Field: servingCertField,
				Detail:     "the serving certificate of " + addr + " does not verify against the system roots (the caBundle is empty): x509: certificate signed by unknown authority",
				Suggestion: "make the caBundle hold the CA that signs the serving certificate (kube-apiserver's calls fail TLS until then)"}},
		},
		"if the caBundle holds no certificate, fail without a dial": {
			caBundle: []byte("garbage"),
			want: []Finding{{Level: LevelFail, Check: CheckServingCert, Field: servingCertField,
				Detail:     "the serving certificate of " + addr + " cannot be verified: the caBundle (7 bytes) holds no PEM certificate, so kube-apiserver cannot build its client and every call fails",
				Suggestion: "set the caBundle to the PEM of the CA that signs the serving certificate, or empty it to trust the system roots"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := dialServingCert(t.Context(), admv1.WebhookClientConfig{URL: &url, CABundle: tc.caBundle}, o, f)
			assert.Equal(t, tc.want, got)
		})
	}
	assert.Equal(t, int32(2), conns.Load(), "dialled for the two usable caBundles only")
}
