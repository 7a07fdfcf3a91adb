package testpki

import (
	"crypto/tls"
	"net"
	"sync/atomic"
	"testing"
)

// ServerConfig serves the leaf at TLS 1.2 or newer, as a webhook does.
func (l *Leaf) ServerConfig(tb testing.TB) *tls.Config {
	tb.Helper()
	cert, err := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		tb.Fatalf("leaf key pair: %v", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

// ServeTLS serves cfg on 127.0.0.1 until the test ends and returns the
// address: each connection completes a handshake (or fails it, or the
// test ends) and is closed, with nothing read or written after it, which
// is all a client that only reads the served chain needs. conns, when not
// nil, counts the connections accepted.
func ServeTLS(tb testing.TB, cfg *tls.Config, conns *atomic.Int32) string {
	tb.Helper()
	l, err := (&net.ListenConfig{}).Listen(tb.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}
	tb.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if conns != nil {
				conns.Add(1)
			}
			go func() {
				tc := tls.Server(c, cfg)
				_ = tc.HandshakeContext(tb.Context())
				_ = tc.Close()
			}()
		}
	}()
	return l.Addr().String()
}
