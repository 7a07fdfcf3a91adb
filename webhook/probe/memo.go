package probe

import (
	"context"
	"sync"
)

// roundEndpoints answers each Service port once per round: the entries of
// one configuration usually call one Service, and each lookup is an API
// call.
type roundEndpoints struct {
	next Endpoints
	mu   sync.Mutex
	seen map[ServiceRef]*lookup
}

// lookup is one Service port's answer, shared by the probes that ask.
type lookup struct {
	once  sync.Once
	addrs []string
	err   error
}

// Ready implements Endpoints.
func (r *roundEndpoints) Ready(ctx context.Context, namespace, name string, port int32) ([]string, error) {
	key := ServiceRef{Namespace: namespace, Name: name, Port: port}
	r.mu.Lock()
	l, ok := r.seen[key]
	if !ok {
		l = &lookup{}
		r.seen[key] = l
	}
	r.mu.Unlock()
	l.once.Do(func() { l.addrs, l.err = r.next.Ready(ctx, namespace, name, port) })
	return l.addrs, l.err
}
