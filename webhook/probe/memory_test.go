package probe

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"math/big"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
)

// serveDistinctChains serves a leaf for names
// under ca that is distinct at every connection and padded to about
// 60 KiB of DER by an extension of random bytes: the chain a hostile
// server sends to defeat any cache of what it served. It counts the
// connections.
func serveDistinctChains(t testing.TB, ca *testpki.CA, conns *atomic.Int32, names ...string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	get := func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		pad := make([]byte, 60<<10)
		_, _ = rand.Read(pad)
		padding, err := asn1.Marshal(pad)
		if err != nil {
			return nil, err
		}
		serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
		tmpl := &x509.Certificate{
			SerialNumber: serial, Subject: pkix.Name{CommonName: "hostile"}, DNSNames: names,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}, Value: padding}},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
		if err != nil {
			return nil, err
		}
		return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
	}
	return testpki.ServeTLS(t, &tls.Config{GetCertificate: get, MinVersion: tls.VersionTLS12}, conns)
}

// heapAfterGC is the live heap once collected.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Test_Served_memoryPerEntry: what a round keeps for admission follows the
// guard's bounds, not what the servers send. 100 guarded entries call one
// Service whose 3 ready endpoints each send a distinct ~60 KiB chain at
// every connection: each address is dialled once per round, and the chains
// kept cost the round, not each entry. 100 entries each with a URL of its
// own, each sending distinct ~60 KiB chains, keep at most the round's byte
// budget. Measured as the live heap Served holds after a round, per entry.
func Test_Served_memoryPerEntry(t *testing.T) {
	ca := testpki.MustCA(t, "hostile-ca")
	const entries = 100
	t.Run("if many entries call one Service, each endpoint is dialled once and its chain kept once", func(t *testing.T) {
		var conns atomic.Int32
		var addrs []string
		for range 3 {
			addrs = append(addrs, serveDistinctChains(t, ca, &conns, "hook.app.svc"))
		}
		paths := make([]TrustPath, entries)
		for i := range paths {
			paths[i] = TrustPath{Kind: "ValidatingWebhookConfiguration", Configuration: "app", Webhook: fmt.Sprintf("w%d.example.com", i),
				Service: &ServiceRef{Namespace: "app", Name: "hook", Port: 443}, CABundle: ca.PEM}
		}
		p := &Prober{Endpoints: fixedEndpoints{"app/hook": addrs}}
		perEntry := retainedPerEntry(t, p, paths)
		t.Logf("one Service, 3 endpoints: %d connections, %d bytes kept per entry", conns.Load(), perEntry)
		require.Equal(t, int32(3), conns.Load(), "one dial per address per round")
		require.Less(t, perEntry, uint64(4<<10), "bytes kept per entry")
	})
	t.Run("if every entry calls its own address, the round keeps at most its byte budget", func(t *testing.T) {
		var conns atomic.Int32
		paths := make([]TrustPath, entries)
		for i := range paths {
			addr := serveDistinctChains(t, ca, &conns, "127.0.0.1")
			paths[i] = TrustPath{Kind: "ValidatingWebhookConfiguration", Configuration: "app", Webhook: fmt.Sprintf("w%d.example.com", i),
				URL: "https://" + addr, CABundle: ca.PEM}
		}
		p := &Prober{MaxRoundBytes: 1 << 20}
		perEntry := retainedPerEntry(t, p, paths)
		t.Logf("%d URLs: %d bytes kept per entry", entries, perEntry)
		require.Less(t, perEntry*entries, uint64(1<<20)+entries*(4<<10), "bytes kept by the round: the budget and a few KiB per entry")
	})
}

// retainedPerEntry probes paths once, stores the round and returns the
// live heap the Served holds, per path.
func retainedPerEntry(t *testing.T, p *Prober, paths []TrustPath) uint64 {
	t.Helper()
	before := heapAfterGC()
	s := &Served{}
	s.Store(p.Probe(t.Context(), paths))
	// The test's servers may still be finishing their side of the last
	// handshakes (a 60 KiB certificate and its buffers each) when Probe
	// returns: the least of a few samples is what the round itself holds.
	after := heapAfterGC()
	for range 8 {
		time.Sleep(25 * time.Millisecond)
		after = min(after, heapAfterGC())
	}
	runtime.KeepAlive(s)
	if after < before {
		return 0
	}
	return (after - before) / uint64(len(paths))
}
