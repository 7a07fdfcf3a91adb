package framework

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// TCPProxy is a small TCP load balancer on 127.0.0.1: each accepted
// connection goes to the next backend in turn, and to the one after when a
// backend refuses the connection (as a Service's endpoints drop a dead pod,
// or an L4 balancer's health check would). Stop closes the listener and
// every proxied connection (an outage); Start listens on the same address
// again.
type TCPProxy struct {
	// Addr is host:port the proxy listens on.
	Addr string

	mu       sync.Mutex
	backends []string
	next     int
	ln       net.Listener
	conns    map[net.Conn]string
	// Accepted counts proxied connections per backend.
	accepted map[string]int
}

// NewTCPProxy listens on addr ("127.0.0.1:0" for any port) and forwards to
// backends; it is closed by t.Cleanup.
func NewTCPProxy(t testing.TB, addr string, backends ...string) *TCPProxy {
	t.Helper()
	p := &TCPProxy{Addr: addr, backends: backends, conns: map[net.Conn]string{}, accepted: map[string]int{}}
	if err := p.Start(); err != nil {
		t.Fatalf("start the TCP proxy: %v", err)
	}
	t.Cleanup(p.Stop)
	return p
}

// Start listens (again) on Addr.
func (p *TCPProxy) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return nil
	}
	var ln net.Listener
	var err error
	// The port of a stopped proxy may linger briefly; retry for a second.
	for range 20 {
		if ln, err = net.Listen("tcp", p.Addr); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	p.ln, p.Addr = ln, ln.Addr().String()
	go p.serve(ln)
	return nil
}

// Stop closes the listener and every proxied connection.
func (p *TCPProxy) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Accepted is how many connections went to backend.
func (p *TCPProxy) Accepted(backend string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted[backend]
}

// Open is how many connections to backend are open now.
func (p *TCPProxy) Open(backend string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, b := range p.conns {
		if b == backend {
			n++
		}
	}
	return n / 2 // each proxied connection is two sockets
}

// Busiest is the backend with the most open connections ("" if none).
func (p *TCPProxy) Busiest() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	open := map[string]int{}
	for _, b := range p.conns {
		open[b]++
	}
	best := ""
	for b, n := range open {
		if best == "" || n > open[best] {
			best = b
		}
	}
	return best
}

func (p *TCPProxy) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *TCPProxy) handle(c net.Conn) {
	p.mu.Lock()
	start := p.next
	p.next = (p.next + 1) % len(p.backends)
	backends := append([]string(nil), p.backends...)
	p.mu.Unlock()
	var up net.Conn
	var backend string
	for i := range backends {
		backend = backends[(start+i)%len(backends)]
		var err error
		if up, err = net.DialTimeout("tcp", backend, time.Second); err == nil {
			break
		}
	}
	if up == nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // stopped meanwhile
		p.mu.Unlock()
		_ = c.Close()
		_ = up.Close()
		return
	}
	p.conns[c], p.conns[up] = backend, backend
	p.accepted[backend]++
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		_ = err
		if tc, ok := dst.(*net.TCPConn); ok && !errors.Is(err, net.ErrClosed) {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
	_ = c.Close()
	_ = up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}
