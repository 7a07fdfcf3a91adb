package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// The webhook server's limits. kube-apiserver gives a webhook at most 30 s
// (timeoutSeconds <= 30), so no legitimate exchange needs longer.
const (
	// ReadHeaderTimeout bounds a client that opens a connection and trickles
	// its headers (slowloris).
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout bounds reading one whole request, body included.
	ReadTimeout = 30 * time.Second
	// WriteTimeout bounds one request from the end of its headers to the end
	// of its response.
	WriteTimeout = 35 * time.Second
	// IdleTimeout closes keep-alive connections nobody uses
	// (http.DefaultTransport's keep-alive is 90 s as well).
	IdleTimeout = 90 * time.Second
	// MaxHeaderBytes bounds request headers; an AdmissionReview POST carries
	// a handful.
	MaxHeaderBytes = 64 << 10
	// MaxRequestBytes is the body limit: controller-runtime's admission
	// handler reads at most 7 MiB and answers larger bodies with a 413
	// AdmissionResponse. It is kept, not lowered: kube-apiserver accepts
	// request bodies up to 3 MiB and stores objects up to 1.5 MiB (etcd's
	// default), so an UPDATE review (object + oldObject + envelope) may
	// legitimately approach 5 MiB.
	MaxRequestBytes = 7 << 20
	// ShutdownTimeout is how long SIGTERM waits for in-flight reviews; it
	// stays below the manager's graceful shutdown timeout and Kubernetes'
	// default 30 s termination grace period.
	ShutdownTimeout = 25 * time.Second
)

// ServerOptions configure the webhook server.
type ServerOptions struct {
	// Host and Port are the listen address.
	Host string
	Port int
	// CertDir holds tls.crt and tls.key; they are watched and reloaded.
	CertDir string
	// TLSOpts apply the TLS policy (serve's Options.TLSConfig in
	// cmd/webhook-guard/serve).
	TLSOpts []func(*tls.Config)
	// ClientCAFile, when set, holds the CA(s) a caller's client certificate
	// must chain to: every request without such a certificate is refused
	// (401). It is re-read when it changes.
	ClientCAFile string
}

// Server is controller-runtime's webhook server with the limits above:
// controller-runtime's own (internal/httpserver) sets only a 32 s header
// timeout and a 90 s idle timeout, no read or write timeout, and derives every
// request's context from the manager's, so SIGTERM cancels in-flight reviews
// (a pending CA read then fails closed) instead of letting them finish. This
// one drains: on shutdown it stops accepting, lets in-flight reviews finish
// (up to ShutdownTimeout) and only then returns.
type Server struct {
	// registry keeps controller-runtime's Register (paths instrumented with
	// its controller_runtime_webhook_* metrics) and mux; its Start is never called.
	registry *ctrlwebhook.DefaultServer
	mux      *http.ServeMux
	opts     ServerOptions

	mu      sync.Mutex
	started bool
}

var _ ctrlwebhook.Server = &Server{}

// NewServer returns a server; Register webhooks, then let the manager Start it.
func NewServer(o ServerOptions) *Server {
	mux := http.NewServeMux()
	return &Server{opts: o, mux: mux, registry: &ctrlwebhook.DefaultServer{Options: ctrlwebhook.Options{WebhookMux: mux}}}
}

// NeedLeaderElection is false: every replica serves.
func (*Server) NeedLeaderElection() bool { return false }

// WebhookMux is the mux webhooks are registered on.
func (s *Server) WebhookMux() *http.ServeMux { return s.mux }

// Register serves hook at path, instrumented with controller-runtime's
// webhook metrics. It panics on a duplicate path.
func (s *Server) Register(path string, hook http.Handler) { s.registry.Register(path, hook) }

// Start serves until ctx ends, then drains.
func (s *Server) Start(ctx context.Context) error {
	log := logf.Log.WithName("webhook-server")
	cfg := &tls.Config{NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}
	for _, op := range s.opts.TLSOpts {
		op(cfg)
	}
	watcher, err := certwatcher.New(filepath.Join(s.opts.CertDir, "tls.crt"), filepath.Join(s.opts.CertDir, "tls.key"))
	if err != nil {
		return err
	}
	cfg.GetCertificate = watcher.GetCertificate
	go func() {
		if err := watcher.Start(ctx); err != nil {
			log.Error(err, "certificate watcher error")
		}
	}()

	var handler http.Handler = s.mux
	if s.opts.ClientCAFile != "" {
		cas, err := newClientCAs(s.opts.ClientCAFile)
		if err != nil {
			return err
		}
		cfg.GetConfigForClient = cas.configForClient(cfg)
		handler = requireClientCert(handler)
	}

	ln, err := tls.Listen("tcp", net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port)), cfg)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           http.MaxBytesHandler(handler, MaxRequestBytes+1), // the admission handler answers the 413
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		// Requests must outlive the manager's context so that SIGTERM
		// drains them rather than cancelling them.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	drained := make(chan error, 1)
	go func() {
		<-ctx.Done()
		log.Info("draining in-flight admission reviews", "timeout", ShutdownTimeout)
		// ctx is done: the drain gets its own deadline.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
		defer cancel()
		drained <- srv.Shutdown(sctx)
	}()

	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	log.Info("serving webhooks", "host", s.opts.Host, "port", s.opts.Port, "clientCAFile", s.opts.ClientCAFile)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	if err := <-drained; err != nil {
		return fmt.Errorf("draining in-flight reviews: %w", err)
	}
	log.Info("webhook server stopped; in-flight reviews drained")
	return nil
}

// StartedChecker is healthy once the server answers TLS.
func (s *Server) StartedChecker() healthz.Checker {
	addr := net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port))
	return func(req *http.Request) error {
		s.mu.Lock()
		started := s.started
		s.mu.Unlock()
		if !started {
			return errors.New("webhook server has not been started yet")
		}
		// A caller with no probe request (a test) is bounded by the dialer's
		// timeout alone.
		ctx := context.Background() //nolint:contextcheck // see above
		if req != nil {
			ctx = req.Context()
		}
		// Only reachability is checked; the certificate is the client's concern.
		d := &tls.Dialer{
			NetDialer: &net.Dialer{Timeout: 10 * time.Second},
			Config:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a local reachability probe
		}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("webhook server is not reachable: %w", err)
		}
		return conn.Close()
	}
}
