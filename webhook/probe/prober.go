package probe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/webhook-guard/webhook-guard/webhook/servedchain"
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
	DefaultTimeout      = servedchain.DefaultTimeout
	DefaultMaxEndpoints = 8
	DefaultMaxCerts     = servedchain.DefaultMaxCerts
	DefaultMaxChainSize = servedchain.DefaultMaxChainSize
	// DefaultMaxRoundBytes bounds the DER a round keeps for admission.
	DefaultMaxRoundBytes = 4 << 20
)

// Prober probes trust paths. The zero value of a bound takes its default.
type Prober struct {
	// Endpoints finds a Service's ready endpoints; required for paths that
	// call a Service.
	Endpoints Endpoints
	// Concurrency is how many lookups, and how many dials, run at once.
	Concurrency int
	// Timeout bounds each endpoint's dial and handshake.
	Timeout time.Duration
	// MaxEndpoints is how many of a Service's ready endpoints are probed
	// (the first, sorted); kube-apiserver may call any of them. A path
	// with more is probed all the same, but admission does not take its
	// round for what every endpoint serves (Served keeps nothing of it).
	MaxEndpoints int
	// MaxCerts and MaxChainSize bound the served chain kept (certificates,
	// bytes of DER); a chain cut short is verified but not kept.
	MaxCerts, MaxChainSize int
	// MaxRoundBytes bounds the DER of the chains a round keeps for
	// admission (Served), whatever the servers send: each address is
	// dialled once per round and its chain kept once, shared by the paths
	// that call it; past the budget a chain is verified and dropped, and
	// the paths that call it are unknown to admission until a later round.
	MaxRoundBytes int
	// Now is the verification time; time.Now when nil.
	Now func() time.Time
}

// Probe probes every path and returns one result per path, in paths' order.
// Each Service port is looked up once per call, and each (address, server
// name) dialled once per call, however many paths call it. It returns when
// every probe has finished or ctx is done (the unfinished then fail as
// unreachable).
func (p *Prober) Probe(ctx context.Context, paths []TrustPath) []Result {
	r := &round{Prober: p, budget: int64(orDefault(p.MaxRoundBytes, DefaultMaxRoundBytes))}
	if p.Endpoints != nil {
		r.endpoints = &roundEndpoints{next: p.Endpoints, seen: map[ServiceRef]*lookup{}}
	}
	plans := make([]plan, len(paths))
	r.each(len(paths), func(i int) { plans[i] = r.plan(ctx, paths[i]) })
	dials := dialsOf(plans)
	r.each(len(dials), func(i int) { r.dial(ctx, &dials[i], plans) })
	out := make([]Result, len(paths))
	for i := range paths {
		out[i] = plans[i].result(paths[i])
	}
	return out
}

// round is one call of Probe: its lookups, and what its chains may keep.
type round struct {
	*Prober
	endpoints Endpoints
	budget    int64
	used      atomic.Int64
}

// each runs f(0..n-1), Concurrency at once.
func (r *round) each(n int, f func(i int)) {
	sem := make(chan struct{}, orDefault(r.Concurrency, DefaultConcurrency))
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			f(i)
		}()
	}
	wg.Wait()
}

// plan is one path's probe: what it trusts, where it is dialled, and what
// each address answered.
type plan struct {
	roots servedchain.Roots
	name  string
	addrs []string
	// complete: addrs are every ready endpoint (not cut at MaxEndpoints).
	complete bool
	// reason and err: the path failed before any dial.
	reason Reason
	err    error
	at     []outcome
}

// outcome is what one address answered for one path.
type outcome struct {
	reason Reason
	err    error
	// chain is what the address served when the round keeps it (nil: not
	// answered, cut short or over the round's budget); shared by the
	// paths that call the address.
	chain *servedchain.Chain
}

// plan resolves where path is dialled.
func (r *round) plan(ctx context.Context, path TrustPath) plan {
	pl := plan{name: path.serverName()}
	var err error
	if pl.roots, err = servedchain.RootsOf(path.CABundle); err != nil {
		pl.reason, pl.err = ReasonNoCABundle, err
		return pl
	}
	if pl.addrs, pl.complete, pl.reason, err = r.addresses(ctx, path); err != nil {
		pl.err = bounded(err)
		return pl
	}
	pl.at = make([]outcome, len(pl.addrs))
	return pl
}

// dialKey is one handshake of a round.
type dialKey struct{ addr, serverName string }

// dial is one handshake and the (path, address) slots it answers.
type dial struct {
	key   dialKey
	users []slot
}

// slot is plans[path].at[endpoint].
type slot struct{ path, endpoint int }

// dialsOf groups the plans' addresses by (address, server name), in the
// order they first appear.
func dialsOf(plans []plan) []dial {
	var out []dial
	index := map[dialKey]int{}
	for pi := range plans {
		for ei, addr := range plans[pi].addrs {
			k := dialKey{addr: addr, serverName: plans[pi].name}
			i, ok := index[k]
			if !ok {
				i = len(out)
				index[k] = i
				out = append(out, dial{key: k})
			}
			out[i].users = append(out[i].users, slot{path: pi, endpoint: ei})
		}
	}
	return out
}

// dial handshakes once and verifies what was served for every path that
// calls the address, each against its own caBundle. The chain is kept for
// admission when it was served whole and fits the round's budget.
func (r *round) dial(ctx context.Context, d *dial, plans []plan) {
	dialer := servedchain.Dialer{Timeout: r.Timeout, MaxCerts: r.MaxCerts, MaxBytes: r.MaxChainSize}
	chain, cut, err := dialer.Dial(ctx, d.key.addr, d.key.serverName)
	if err != nil {
		for _, u := range d.users {
			plans[u.path].at[u.endpoint] = outcome{reason: ReasonUnreachable, err: bounded(err)}
		}
		return
	}
	var kept *servedchain.Chain
	if !cut && r.take(chain.Size()) {
		kept = &chain
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	for _, u := range d.users {
		res := plans[u.path].roots.Verify(chain, d.key.serverName, now())
		plans[u.path].at[u.endpoint] = outcome{reason: res.Reason, err: boundedDetail(res), chain: kept}
	}
}

// take spends n bytes of the round's budget; false when they do not fit.
func (r *round) take(n int) bool {
	if r.used.Add(int64(n)) <= r.budget {
		return true
	}
	r.used.Add(-int64(n))
	return false
}

// result is the path's verdict: the first address that did not answer,
// else the first whose chain did not verify. The chains are handed to
// Served only when every ready endpoint answered and each was kept.
func (pl *plan) result(path TrustPath) Result {
	res := Result{Path: path}
	if pl.reason != ReasonNone {
		res.Reason, res.Err = pl.reason, pl.err
		return res
	}
	for i, o := range pl.at {
		if o.reason == ReasonUnreachable {
			res.Reason, res.Endpoint, res.Err = o.reason, pl.addrs[i], o.err
			return res
		}
	}
	keep := pl.complete
	served := make([]servedAt, 0, len(pl.at))
	for i, o := range pl.at {
		keep = keep && o.chain != nil
		served = append(served, servedAt{addr: pl.addrs[i], chain: o.chain})
	}
	if keep {
		res.served = served
	}
	for i, o := range pl.at {
		if o.reason != ReasonNone {
			res.Reason, res.Endpoint, res.Err = o.reason, pl.addrs[i], o.err
			break
		}
	}
	return res
}

// errNoEndpoints is the error of a Service without a ready endpoint.
var errNoEndpoints = errors.New("the Service has no ready endpoint for the port")

// addresses is where the path is dialed: the URL's host and port, or up to
// MaxEndpoints ready endpoints of its Service; complete is false when
// there were more.
func (r *round) addresses(ctx context.Context, path TrustPath) (addrs []string, complete bool, _ Reason, _ error) {
	if path.Service == nil {
		addr, err := path.Endpoint().URLAddress()
		if err != nil {
			return nil, false, ReasonUnreachable, fmt.Errorf("url %q: %w", path.URL, err)
		}
		return []string{addr}, true, ReasonNone, nil
	}
	s := path.Service
	if r.endpoints == nil {
		return nil, false, ReasonNoEndpoints, errors.New("no endpoint lookup configured")
	}
	addrs, err := r.endpoints.Ready(ctx, s.Namespace, s.Name, s.Port)
	if err != nil {
		return nil, false, ReasonNoEndpoints, fmt.Errorf("service %s/%s port %d: %w", s.Namespace, s.Name, s.Port, err)
	}
	if len(addrs) == 0 {
		return nil, false, ReasonNoEndpoints, fmt.Errorf("service %s/%s port %d: %w", s.Namespace, s.Name, s.Port, errNoEndpoints)
	}
	if n := orDefault(r.MaxEndpoints, DefaultMaxEndpoints); len(addrs) > n {
		return addrs[:n], false, ReasonNone, nil
	}
	return addrs, true, ReasonNone, nil
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}
