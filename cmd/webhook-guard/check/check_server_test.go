package check_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
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
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/app"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/offline"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/serve"
	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

// fuzzCorpus is the seed corpus of the webhook's FuzzAdmissionReview.
const fuzzCorpus = "../../../webhook/testdata/fuzz/FuzzAdmissionReview"

// Test_check_sameAsServer: `check` and the webhook server `serve` runs
// (NewServer over TLS, the Handler NewHandler builds) answer every sample
// review and every fuzz-corpus review alike, under every sample config: the
// same verdict, code, message, warnings and audit annotations, and check's
// exit code says the same (0 allowed, 1 denied, 2 malformed).
func Test_check_sameAsServer(t *testing.T) {
	reviews := reviewBodies(t)
	configs, err := filepath.Glob(samples + "guard-*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, configs)
	for _, config := range configs {
		srv := startGuardServer(t, config, samples+"objects.yaml")
		for name, path := range reviews {
			t.Run(filepath.Base(config)+"/"+name, func(t *testing.T) {
				body, err := os.ReadFile(path)
				require.NoError(t, err)
				server := srv.post(t, body)

				var stdout, stderr bytes.Buffer
				code := app.Main([]string{"check", "--config", config, "--objects", samples + "objects.yaml", "--review", path, "-o", "json"}, &stdout, &stderr)
				var checked admissionv1.AdmissionReview
				require.NoError(t, json.Unmarshal(stdout.Bytes(), &checked), "check's output: %s %s", stdout.String(), stderr.String())

				assert.Equal(t, server, checked)
				require.NotNil(t, server.Response)
				switch {
				case server.Response.Allowed:
					assert.Equal(t, cmdutil.ExitAllowed, code, stderr.String())
				case server.Response.Result.Code == http.StatusForbidden:
					assert.Equal(t, cmdutil.ExitDenied, code, stderr.String())
				default:
					assert.Equal(t, cmdutil.ExitInvalid, code)
					assert.Equal(t, "error: review "+path+": "+server.Response.Result.Message+"\n", stderr.String())
				}
			})
		}
	}
}

// reviewBodies names every sample review and fuzz-corpus entry; corpus
// entries are written out as the bodies they hold.
func reviewBodies(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	samplesReviews, err := filepath.Glob(samples + "reviews/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, samplesReviews)
	for _, p := range samplesReviews {
		out["sample/"+filepath.Base(p)] = p
	}
	entries, err := os.ReadDir(fuzzCorpus)
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	dir := t.TempDir()
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(fuzzCorpus, e.Name()))
		require.NoError(t, err)
		body := corpusBytes(t, e.Name(), data)
		p := filepath.Join(dir, e.Name()+".json")
		require.NoError(t, os.WriteFile(p, body, 0o600))
		out["corpus/"+e.Name()] = p
	}
	return out
}

// corpusBytes reads a one-value go-fuzz corpus file: "go test fuzz v1"
// then []byte("...") with a Go-quoted string.
func corpusBytes(t *testing.T, name string, data []byte) []byte {
	t.Helper()
	header, value, ok := strings.Cut(strings.TrimSpace(string(data)), "\n")
	require.True(t, ok && header == "go test fuzz v1", "%s: not a go test fuzz v1 file", name)
	quoted, ok := strings.CutPrefix(value, "[]byte(")
	require.True(t, ok && strings.HasSuffix(quoted, ")"), "%s: not a []byte value", name)
	s, err := strconv.Unquote(strings.TrimSuffix(quoted, ")"))
	require.NoError(t, err, name)
	return []byte(s)
}

// guardServer is the webhook server `serve` builds, serving the guard on
// 127.0.0.1 over TLS with a test serving certificate.
type guardServer struct {
	url    string
	client *http.Client
}

func startGuardServer(t *testing.T, configPath, objectsPath string) *guardServer {
	t.Helper()
	logf.SetLogger(logr.Discard())
	cfg, _, err := webhook.LoadConfigFile(configPath)
	require.NoError(t, err)
	scheme, err := webhook.NewScheme()
	require.NoError(t, err)
	objects, err := offline.LoadObjects(scheme, objectsPath)
	require.NoError(t, err)
	h, err := webhook.NewHandler(webhook.HandlerOptions{
		Config: webhook.StaticConfig{Config: cfg},
		CA:     casource.New(objects, casource.Options{}),
		Log:    logr.Discard(),
	})
	require.NoError(t, err)

	dir := t.TempDir()
	ca, err := testpki.NewCA("check-vs-server")
	require.NoError(t, err)
	leaf, err := ca.Issue("webhook-guard", "127.0.0.1")
	require.NoError(t, err)
	require.NoError(t, testpki.WriteSecretFiles(dir, ca, leaf))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())

	o := &serve.Options{TLSMinVersion: "VersionTLS12"}
	srv := webhook.NewServer(webhook.ServerOptions{Host: "127.0.0.1", Port: port, CertDir: dir, TLSOpts: []func(*tls.Config){o.TLSConfig}})
	srv.Register(webhook.Path, h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
	}}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "the webhook server stops cleanly")
		case <-time.After(webhook.ShutdownTimeout + 5*time.Second):
			t.Error("the webhook server did not stop")
		}
	})
	require.Eventually(t, func() bool { return srv.StartedChecker()(nil) == nil }, 10*time.Second, 20*time.Millisecond, "the webhook server serves TLS")
	return &guardServer{url: "https://127.0.0.1:" + strconv.Itoa(port) + webhook.Path, client: client}
}

// post sends body as kube-apiserver does and decodes the AdmissionReview
// answer.
func (s *guardServer) post(t *testing.T, body []byte) admissionv1.AdmissionReview {
	t.Helper()
	resp, err := s.client.Post(s.url, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", data)
	var review admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(data, &review), "body: %s", data)
	return review
}
