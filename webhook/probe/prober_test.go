package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
)

// serveTLS serves leaf on 127.0.0.1 until the test ends: each connection
// completes a handshake and is closed.
func serveTLS(t testing.TB, leaf *testpki.Leaf) string {
	t.Helper()
	return testpki.ServeTLS(t, leaf.ServerConfig(t), nil)
}

// serve accepts on 127.0.0.1 and hands each connection to handle.
func serve(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return l.Addr().String()
}

// hang accepts connections and never answers, until the test ends.
func hang(t *testing.T) string {
	t.Helper()
	return serve(t, func(c net.Conn) {
		<-t.Context().Done()
		_ = c.Close()
	})
}

// closedAddr is an address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// fixedEndpoints answers every Service with its addresses.
type fixedEndpoints map[string][]string

func (f fixedEndpoints) Ready(_ context.Context, namespace, name string, _ int32) ([]string, error) {
	return f[namespace+"/"+name], nil
}

func Test_Prober_Probe(t *testing.T) {
	ca := testpki.MustCA(t, "webhook-ca")
	other := testpki.MustCA(t, "other-ca")
	past := time.Now().Add(-48 * time.Hour)
	expiredCA := testpki.MustCA(t, "expired-ca", testpki.WithValidity(past, past.Add(24*time.Hour)))
	issue := func(ca *testpki.CA, hosts ...string) *testpki.Leaf {
		l, err := ca.Issue("webhook", hosts...)
		require.NoError(t, err)
		return l
	}
	good := serveTLS(t, issue(ca))
	svc := serveTLS(t, issue(ca, "guard.guard-system.svc"))
	wrongName := serveTLS(t, issue(ca, "elsewhere.example"))
	expired := serveTLS(t, issue(expiredCA))
	unreachable := closedAddr(t)
	service := &ServiceRef{Namespace: "guard-system", Name: "guard", Port: 443}
	endpoints := fixedEndpoints{"guard-system/guard": {svc}}

	cases := map[string]struct {
		path TrustPath
		want Reason
	}{
		"if the caBundle verifies what the URL's endpoint serves, it is verified": {
			path: TrustPath{URL: "https://" + good + "/validate", CABundle: ca.PEM},
		},
		"if the caBundle verifies what the Service's endpoint serves for <service>.<namespace>.svc, it is verified": {
			path: TrustPath{Service: service, CABundle: ca.PEM},
		},
		"if another CA signed the served leaf, the reason is unknown-authority": {
			path: TrustPath{URL: "https://" + good, CABundle: other.PEM},
			want: ReasonUnknownAuthority,
		},
		"if the caBundle is empty, the system roots do not verify a private CA: unknown-authority": {
			path: TrustPath{URL: "https://" + good},
			want: ReasonUnknownAuthority,
		},
		"if the served leaf has expired, the reason is expired": {
			path: TrustPath{URL: "https://" + expired, CABundle: expiredCA.PEM},
			want: ReasonExpired,
		},
		"if the leaf is not for the URL's host, the reason is name-mismatch": {
			path: TrustPath{URL: "https://" + wrongName, CABundle: ca.PEM},
			want: ReasonNameMismatch,
		},
		"if the leaf is not for <service>.<namespace>.svc, the reason is name-mismatch": {
			path: TrustPath{Service: &ServiceRef{Namespace: "guard-system", Name: "other", Port: 443}, CABundle: ca.PEM},
			want: ReasonNameMismatch,
		},
		"if nothing listens at the URL, the reason is unreachable": {
			path: TrustPath{URL: "https://" + unreachable, CABundle: ca.PEM},
			want: ReasonUnreachable,
		},
		"if the Service has no ready endpoint, the reason is no-endpoints": {
			path: TrustPath{Service: &ServiceRef{Namespace: "guard-system", Name: "none", Port: 443}, CABundle: ca.PEM},
			want: ReasonNoEndpoints,
		},
		"if the caBundle holds no certificate, the reason is no-ca-bundle and nothing is dialed": {
			path: TrustPath{URL: "https://" + unreachable, CABundle: []byte("not a certificate")},
			want: ReasonNoCABundle,
		},
	}
	endpoints["guard-system/other"] = []string{svc}
	p := &Prober{Endpoints: endpoints, Timeout: 5 * time.Second}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := p.Probe(t.Context(), []TrustPath{tc.path})
			require.Len(t, got, 1)
			require.Equal(t, tc.want, got[0].Reason, "error: %v", got[0].Err)
			require.Equal(t, tc.want == ReasonNone, got[0].Err == nil)
		})
	}
}

func Test_Prober_Probe_hungHandshakeEndsAtTheDeadline(t *testing.T) {
	ca := testpki.MustCA(t, "webhook-ca")
	p := &Prober{Timeout: 100 * time.Millisecond}
	got := p.Probe(t.Context(), []TrustPath{{URL: "https://" + hang(t), CABundle: ca.PEM}})
	require.Equal(t, ReasonUnreachable, got[0].Reason)
	require.True(t, errors.Is(got[0].Err, context.DeadlineExceeded), "error: %v", got[0].Err)
}

// meetingEndpoints holds each lookup until limit are in flight (or every
// lookup has started), and records the most in flight at once.
type meetingEndpoints struct {
	limit, total      int32
	started, inFlight atomic.Int32
	mu                sync.Mutex
	max               int32
	addr              string
}

func (m *meetingEndpoints) Ready(ctx context.Context, _, _ string, _ int32) ([]string, error) {
	m.started.Add(1)
	n := m.inFlight.Add(1)
	defer m.inFlight.Add(-1)
	m.mu.Lock()
	m.max = max(m.max, n)
	m.mu.Unlock()
	for m.inFlight.Load() < m.limit && m.started.Load() < m.total && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	return []string{m.addr}, nil
}

func Test_Prober_Probe_concurrencyIsBounded(t *testing.T) {
	ca := testpki.MustCA(t, "webhook-ca")
	leaf, err := ca.Issue("webhook", "guard.ns.svc")
	require.NoError(t, err)
	m := &meetingEndpoints{limit: 2, total: 7, addr: serveTLS(t, leaf)}
	paths := make([]TrustPath, m.total)
	for i := range paths {
		// Distinct ports: each path is its own lookup.
		paths[i] = TrustPath{Service: &ServiceRef{Namespace: "ns", Name: "guard", Port: int32(443 + i)}, CABundle: ca.PEM}
	}
	got := (&Prober{Endpoints: m, Concurrency: 2}).Probe(t.Context(), paths)
	require.Equal(t, int32(2), m.max, "probes in flight at once")
	for _, r := range got {
		require.True(t, r.Verified(), "error: %v", r.Err)
	}
}

// countingEndpoints counts its lookups.
type countingEndpoints struct {
	calls atomic.Int32
	addr  string
}

func (c *countingEndpoints) Ready(context.Context, string, string, int32) ([]string, error) {
	c.calls.Add(1)
	return []string{c.addr}, nil
}

func Test_Prober_Probe_looksUpEachServiceOncePerCall(t *testing.T) {
	ca := testpki.MustCA(t, "webhook-ca")
	leaf, err := ca.Issue("webhook", "guard.ns.svc")
	require.NoError(t, err)
	c := &countingEndpoints{addr: serveTLS(t, leaf)}
	path := TrustPath{Service: &ServiceRef{Namespace: "ns", Name: "guard", Port: 443}, CABundle: ca.PEM}
	p := &Prober{Endpoints: c}
	p.Probe(t.Context(), []TrustPath{path, path, path})
	require.Equal(t, int32(1), c.calls.Load(), "three entries calling one Service port")
	p.Probe(t.Context(), []TrustPath{path})
	require.Equal(t, int32(2), c.calls.Load(), "the next round looks again")
}

// countConns serves leaf as serveTLS does and counts the connections.
func countConns(t *testing.T, leaf *testpki.Leaf, conns *atomic.Int32) string {
	t.Helper()
	return testpki.ServeTLS(t, leaf.ServerConfig(t), conns)
}

func Test_Prober_Probe_dialsEachAddressOncePerRound(t *testing.T) {
	ca, other := testpki.MustCA(t, "webhook-ca"), testpki.MustCA(t, "other-ca")
	leaf, err := ca.Issue("webhook", "guard.ns.svc")
	require.NoError(t, err)
	var conns atomic.Int32
	addr := countConns(t, leaf, &conns)
	svc := func(port int32, bundle []byte) TrustPath {
		return TrustPath{Service: &ServiceRef{Namespace: "ns", Name: "guard", Port: port}, CABundle: bundle}
	}
	// Two ports of one Service reaching one address, five entries, two
	// caBundles: one handshake, each entry verified against its own bundle.
	paths := []TrustPath{svc(443, ca.PEM), svc(443, other.PEM), svc(443, ca.PEM), svc(8443, ca.PEM), svc(8443, other.PEM)}
	got := (&Prober{Endpoints: fixedEndpoints{"ns/guard": {addr}}}).Probe(t.Context(), paths)
	require.Equal(t, int32(1), conns.Load(), "handshakes with the one address")
	for i, want := range []Reason{ReasonNone, ReasonUnknownAuthority, ReasonNone, ReasonNone, ReasonUnknownAuthority} {
		require.Equal(t, want, got[i].Reason, "entry %d: %v", i, got[i].Err)
	}
	// Another server name is another handshake (SNI may choose the leaf).
	url := TrustPath{URL: "https://" + addr, CABundle: ca.PEM}
	(&Prober{Endpoints: fixedEndpoints{"ns/guard": {addr}}}).Probe(t.Context(), []TrustPath{svc(443, ca.PEM), url, url})
	require.Equal(t, int32(3), conns.Load(), "one handshake per (address, server name) per round")
}

func Test_Prober_Probe_errorTextIsBounded(t *testing.T) {
	ca := testpki.MustCA(t, "webhook-ca")
	// x509 lists up to 99 names of the served leaf in its error.
	names := make([]string, 99)
	for i := range names {
		names[i] = fmt.Sprintf("name-%03d-\x1b[31m-%s.example.com", i, strings.Repeat("x", 40))
	}
	leaf, err := ca.Issue("webhook", names...)
	require.NoError(t, err)
	path := TrustPath{Service: &ServiceRef{Namespace: "ns", Name: "guard", Port: 443}, CABundle: ca.PEM}
	got := (&Prober{Endpoints: fixedEndpoints{"ns/guard": {serveTLS(t, leaf)}}}).Probe(t.Context(), []TrustPath{path})
	require.Equal(t, ReasonNameMismatch, got[0].Reason)
	require.LessOrEqual(t, len(got[0].Err.Error()), 256, "the error of a leaf with 99 long names: %d bytes", len(got[0].Err.Error()))
	require.NotContains(t, got[0].Err.Error(), "\x1b", "a control character the server chose")
}
