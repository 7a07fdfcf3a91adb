package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/webhook-guard/webhook-guard/policy"
)

// tlsServer is the Handler served as `serve` serves it: the server NewServer
// builds (the one `serve` hands the manager, with its limits and drain) reading
// tls.crt and tls.key from a cert-manager style directory, with `serve`'s TLS
// policy (serveTLS), and the Handler registered at Path.
type tlsServer struct {
	dir    string
	ca     *testCA
	addr   string
	client *http.Client
	serial *big.Int
}

func startTLSServer(t *testing.T, h *Handler) *tlsServer {
	t.Helper()
	// controller-runtime logs through a global delegating logger; without
	// one it warns with a stack trace after 30 s.
	logf.SetLogger(logr.Discard())

	s := &tlsServer{dir: t.TempDir(), ca: newTestCA(t, "webhook-guard-serving-ca")}
	certPEM, keyPEM, serial := s.ca.issue(t)
	s.serial = serial
	s.writeKeyPair(t, certPEM, keyPEM)

	port := freePort(t)
	s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	srv := NewServer(ServerOptions{
		Host:    "127.0.0.1",
		Port:    port,
		CertDir: s.dir,
		TLSOpts: []func(*tls.Config){serveTLS},
	})
	srv.Register(Path, h)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "the webhook server stops cleanly")
		case <-time.After(10 * time.Second):
			t.Error("the webhook server did not stop")
		}
	})

	pool := x509.NewCertPool()
	pool.AddCert(s.ca.Cert)
	s.client = &http.Client{
		Timeout: 5 * time.Second,
		// kube-apiserver speaks HTTP/2 to webhooks.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true},
	}
	t.Cleanup(s.client.CloseIdleConnections)

	require.Eventually(t, func() bool {
		_, err := s.handshake(t, &tls.Config{})
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "the webhook server serves TLS")
	return s
}

// writeKeyPair replaces tls.crt and tls.key atomically, each through a
// temporary file renamed into place.
func (s *tlsServer) writeKeyPair(t *testing.T, certPEM, keyPEM []byte) {
	t.Helper()
	for name, data := range map[string][]byte{"tls.key": keyPEM, "tls.crt": certPEM} {
		tmp := filepath.Join(s.dir, "."+name+".tmp")
		require.NoError(t, os.WriteFile(tmp, data, 0o600))
		require.NoError(t, os.Rename(tmp, filepath.Join(s.dir, name)))
	}
}

// handshake makes a new TLS connection trusting the serving CA (cfg may
// narrow versions) and returns its state.
func (s *tlsServer) handshake(t *testing.T, cfg *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	cfg = cfg.Clone()
	cfg.RootCAs = x509.NewCertPool()
	cfg.RootCAs.AddCert(s.ca.Cert)
	cfg.ServerName = "127.0.0.1"
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 2 * time.Second}, Config: cfg}
	conn, err := d.DialContext(t.Context(), "tcp", s.addr)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState(), nil
}

// post sends body as an AdmissionReview and decodes the answer.
func (s *tlsServer) post(t *testing.T, body []byte) *admissionv1.AdmissionReview {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://"+s.addr+Path, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", data)
	assert.Equal(t, "HTTP/2.0", resp.Proto, "the client and server speak HTTP/2 as kube-apiserver does")
	var review admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(data, &review), "body: %s", data)
	return &review
}

func reviewJSON(t *testing.T, req *admissionv1.AdmissionRequest) []byte {
	t.Helper()
	data, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	require.NoError(t, err)
	return data
}

func Test_Handler_roundTripOverTLS(t *testing.T) {
	f := testFixtures(t)
	cfg := mustLoad(t, guardConfigDoc(f))
	rec := &fakeRecorder{}
	h := newHandler(t, HandlerOptions{
		Config:   StaticConfig{Config: cfg},
		CA:       &fakeResolver{Cached: caResult(t, koordSource, false, f.Owner.PEM)},
		Recorder: rec,
	})
	s := startTLSServer(t, h)

	koord := object{Name: "koord", Bundles: [][]byte{f.Owner.PEM}}
	koordEmpty := object{Name: "koord", Bundles: [][]byte{nil}}
	koordRelabelled := object{Name: "koord", Labels: map[string]string{"x": "y"}, Bundles: [][]byte{f.Owner.PEM}}
	audited := object{Name: "audited", Bundles: [][]byte{f.Owner.PEM}}
	auditedRelabelled := object{Name: "audited", Labels: map[string]string{"x": "y"}, Bundles: [][]byte{f.Owner.PEM}}
	withUID := func(req *admissionv1.AdmissionRequest, uid string) *admissionv1.AdmissionRequest {
		req.UID = types.UID(uid)
		return req
	}
	typeMeta := metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}

	tests := map[string]struct {
		body func(t *testing.T) []byte
		exp  admissionv1.AdmissionReview
	}{
		"if the owner writes its own CA, the review comes back allowed with the request's uid": {
			body: func(t *testing.T) []byte {
				return reviewJSON(t, withUID(request(t, admissionv1.Update, policy.KindValidating, koordManager, &koord, &koordEmpty), "uid-owner"))
			},
			exp: admissionv1.AdmissionReview{TypeMeta: typeMeta, Response: &admissionv1.AdmissionResponse{
				UID: "uid-owner", Allowed: true, Result: &metav1.Status{Code: 200},
			}},
		},
		"if an intruder updates an enforced configuration, the review comes back denied with 403, message and audit annotations": {
			body: func(t *testing.T) []byte {
				return reviewJSON(t, withUID(request(t, admissionv1.Update, policy.KindMutating, intruder, &koordRelabelled, &koord), "uid-intruder"))
			},
			exp: admissionv1.AdmissionReview{TypeMeta: typeMeta, Response: &admissionv1.AdmissionResponse{
				UID:     "uid-intruder",
				Allowed: false,
				Result: &metav1.Status{
					Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden, Code: 403,
					Message: fmt.Sprintf(`webhook-guard denied UPDATE of MutatingWebhookConfiguration "koord" by %q (mapping "koordinator", enforce); %s`, intruder, intruderNotOwnerKoord),
				},
				AuditAnnotations: map[string]string{"decision": "deny", "rule": "not-owner", "mapping": "koordinator", "violations": intruderNotOwnerKoord},
			}},
		},
		"if an intruder updates an audited configuration, the review comes back allowed with a warning and audit annotations": {
			body: func(t *testing.T) []byte {
				return reviewJSON(t, withUID(request(t, admissionv1.Update, policy.KindValidating, intruder, &auditedRelabelled, &audited), "uid-audit"))
			},
			exp: admissionv1.AdmissionReview{TypeMeta: typeMeta, Response: &admissionv1.AdmissionResponse{
				UID:              "uid-audit",
				Allowed:          true,
				Result:           &metav1.Status{Code: 200},
				Warnings:         []string{"webhook-guard (audit) would deny: " + intruderNotOwnerAudited},
				AuditAnnotations: map[string]string{"decision": "audit", "rule": "not-owner", "mapping": "audited", "violations": intruderNotOwnerAudited},
			}},
		},
		"if the review lacks the username, the review comes back rejected with 400 and the request's uid": {
			body: func(t *testing.T) []byte {
				return reviewJSON(t, withUID(request(t, admissionv1.Update, policy.KindValidating, "", &koord, &koord), "uid-malformed"))
			},
			exp: admissionv1.AdmissionReview{TypeMeta: typeMeta, Response: &admissionv1.AdmissionResponse{
				UID: "uid-malformed", Allowed: false, Result: &metav1.Status{Code: 400, Message: "request.userInfo.username is missing"},
			}},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			got := s.post(t, test.body(t))
			assert.Equal(t, test.exp, *got)
		})
	}

	t.Run("if the body is not an AdmissionReview, the answer is rejected with 400 and counted", func(t *testing.T) {
		invalid := toFloat64(t, h.Metrics.InvalidRequests)
		got := s.post(t, []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":`))
		require.NotNil(t, got.Response)
		assert.True(t, strings.HasPrefix(got.Response.Result.Message, "json parse error: "), got.Response.Result.Message)
		got.Response.Result.Message = ""
		assert.Equal(t, admissionv1.AdmissionReview{TypeMeta: typeMeta, Response: &admissionv1.AdmissionResponse{
			Allowed: false,
			Result:  &metav1.Status{Code: 400},
		}}, *got)
		assert.Equal(t, invalid+1, toFloat64(t, h.Metrics.InvalidRequests))
	})
	assert.ElementsMatch(t, []string{"koordinator/not-owner/deny", "audited/not-owner/audit"}, rec.recorded())

	t.Run("if a client offers at most TLS 1.1, the handshake is refused", func(t *testing.T) {
		_, err := s.handshake(t, &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
		require.Error(t, err)
		assert.Equal(t, "remote error: tls: protocol version not supported", err.Error())
	})

	t.Run("if a client offers TLS 1.2, it is served over TLS 1.2 with h2 or http/1.1", func(t *testing.T) {
		state, err := s.handshake(t, &tls.Config{MaxVersion: tls.VersionTLS12, NextProtos: []string{"h2"}})
		require.NoError(t, err)
		assert.Equal(t, uint16(tls.VersionTLS12), state.Version)
		assert.Equal(t, "h2", state.NegotiatedProtocol)
		state, err = s.handshake(t, &tls.Config{NextProtos: []string{"http/1.1"}})
		require.NoError(t, err)
		assert.Equal(t, uint16(tls.VersionTLS13), state.Version)
		assert.Equal(t, "http/1.1", state.NegotiatedProtocol)
	})

	t.Run("if tls.crt and tls.key are replaced, new handshakes present the new certificate without a restart", func(t *testing.T) {
		state, err := s.handshake(t, &tls.Config{})
		require.NoError(t, err)
		require.Equal(t, s.serial, state.PeerCertificates[0].SerialNumber, "the first certificate is served")

		certPEM, keyPEM, newSerial := s.ca.issue(t)
		s.writeKeyPair(t, certPEM, keyPEM)

		body := reviewJSON(t, withUID(request(t, admissionv1.Update, policy.KindValidating, koordManager, &koord, &koordEmpty), "uid-during-rotation"))
		deadline := time.Now().Add(10 * time.Second)
		for {
			// Requests keep succeeding throughout.
			got := s.post(t, body)
			require.True(t, got.Response.Allowed)
			require.Equal(t, types.UID("uid-during-rotation"), got.Response.UID)

			state, err := s.handshake(t, &tls.Config{})
			require.NoError(t, err)
			if state.PeerCertificates[0].SerialNumber.Cmp(newSerial) == 0 {
				break
			}
			require.Equal(t, s.serial, state.PeerCertificates[0].SerialNumber, "only the old or the new certificate is ever served")
			if time.Now().After(deadline) {
				t.Fatal("the new certificate was not served within 10s")
			}
			time.Sleep(50 * time.Millisecond)
		}

		// A fresh client (a new connection) works with the new certificate.
		s.client.CloseIdleConnections()
		got := s.post(t, body)
		assert.True(t, got.Response.Allowed)
	})
}
