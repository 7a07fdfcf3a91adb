package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Endpoints finds the ready endpoints of a Service's port, as kube-apiserver
// would reach them: "host:port" addresses, the port being the target port
// of the Service's port.
type Endpoints interface {
	Ready(ctx context.Context, namespace, name string, port int32) ([]string, error)
}

// Defaults of Prober's bounds.
const (
	DefaultConcurrency  = 8
	DefaultTimeout      = 5 * time.Second
	DefaultMaxEndpoints = 3
	DefaultMaxCerts     = 8
	DefaultMaxChainSize = 64 << 10
)

// Prober probes trust paths. The zero value of a bound takes its default.
type Prober struct {
	// Endpoints finds a Service's ready endpoints; required for paths that
	// call a Service.
	Endpoints Endpoints
	// Concurrency is how many paths are probed at once.
	Concurrency int
	// Timeout bounds each endpoint's dial and handshake.
	Timeout time.Duration
	// MaxEndpoints is how many of a Service's ready endpoints are probed
	// (the first, sorted); kube-apiserver may call any of them.
	MaxEndpoints int
	// MaxCerts and MaxChainSize bound the served chain kept (certificates,
	// bytes of DER).
	MaxCerts, MaxChainSize int
	// Now is the verification time; time.Now when nil.
	Now func() time.Time
}

// Probe probes every path and returns one result per path, in paths' order.
// Each Service port is looked up once per call. It returns when every probe has finished or ctx is done (the unfinished
// then fail as unreachable).
func (p *Prober) Probe(ctx context.Context, paths []TrustPath) []Result {
	out := make([]Result, len(paths))
	round := *p
	if p.Endpoints != nil {
		round.Endpoints = &roundEndpoints{next: p.Endpoints, seen: map[ServiceRef]*lookup{}}
	}
	sem := make(chan struct{}, orDefault(p.Concurrency, DefaultConcurrency))
	var wg sync.WaitGroup
	for i := range paths {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = round.probe(ctx, paths[i])
		}()
	}
	wg.Wait()
	return out
}

// probe probes one path: each of its endpoints in turn, the first failure
// its result.
func (p *Prober) probe(ctx context.Context, path TrustPath) Result {
	res := Result{Path: path}
	roots, err := rootsOf(path.CABundle)
	if err != nil {
		res.Reason, res.Err = ReasonNoCABundle, err
		return res
	}
	addrs, reason, err := p.addresses(ctx, path)
	if err != nil {
		res.Reason, res.Err = reason, err
		return res
	}
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	name := path.serverName()
	served := make([]servedAt, 0, len(addrs))
	for _, addr := range addrs {
		chain, err := handshake(ctx, addr, name, orDuration(p.Timeout, DefaultTimeout),
			orDefault(p.MaxCerts, DefaultMaxCerts), orDefault(p.MaxChainSize, DefaultMaxChainSize))
		if err != nil {
			res.Reason, res.Endpoint, res.Err = ReasonUnreachable, addr, err
			return res
		}
		served = append(served, servedAt{addr: addr, chain: chain})
	}
	res.served = served
	for _, s := range served {
		if reason, err := verify(s.chain, roots, name, now()); err != nil {
			res.Reason, res.Endpoint, res.Err = reason, s.addr, err
			return res
		}
	}
	return res
}

// errNoEndpoints is the error of a Service without a ready endpoint.
var errNoEndpoints = errors.New("the Service has no ready endpoint for the port")

// addresses is where the path is dialed: the URL's host and port, or up to
// MaxEndpoints ready endpoints of its Service.
func (p *Prober) addresses(ctx context.Context, path TrustPath) ([]string, Reason, error) {
	if path.Service == nil {
		addr, err := urlAddress(path.URL)
		if err != nil {
			return nil, ReasonUnreachable, fmt.Errorf("url %q: %w", path.URL, err)
		}
		return []string{addr}, ReasonNone, nil
	}
	s := path.Service
	if p.Endpoints == nil {
		return nil, ReasonNoEndpoints, errors.New("no endpoint lookup configured")
	}
	addrs, err := p.Endpoints.Ready(ctx, s.Namespace, s.Name, s.Port)
	if err != nil {
		return nil, ReasonNoEndpoints, fmt.Errorf("service %s/%s port %d: %w", s.Namespace, s.Name, s.Port, err)
	}
	if len(addrs) == 0 {
		return nil, ReasonNoEndpoints, fmt.Errorf("service %s/%s port %d: %w", s.Namespace, s.Name, s.Port, errNoEndpoints)
	}
	if n := orDefault(p.MaxEndpoints, DefaultMaxEndpoints); len(addrs) > n {
		addrs = addrs[:n]
	}
	return addrs, ReasonNone, nil
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func orDuration(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}

// joinAddr is host:port for an endpoint address and target port.
func joinAddr(host string, port int32) string { return net.JoinHostPort(host, portString(port)) }
