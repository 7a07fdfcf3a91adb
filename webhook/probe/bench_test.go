package probe

import (
	"fmt"
	"testing"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
)

// BenchmarkProber_Probe is one round over 200 guarded entries, each its
// own Service with one ready endpoint on 127.0.0.1 serving an ECDSA leaf
// (20 servers, 10 entries each): the cost of an interval without the
// network's latency.
func BenchmarkProber_Probe(b *testing.B) {
	ca := testpki.MustCA(b, "webhook-ca")
	endpoints := fixedEndpoints{}
	var paths []TrustPath
	for s := range 20 {
		leaf, err := ca.Issue("webhook", fmt.Sprintf("hook-%d.app.svc", s))
		if err != nil {
			b.Fatal(err)
		}
		addr := serveTLS(b, leaf)
		for e := range 10 {
			name := fmt.Sprintf("hook-%d", s)
			endpoints["app/"+name] = []string{addr}
			paths = append(paths, TrustPath{Kind: "ValidatingWebhookConfiguration", Configuration: name,
				Webhook: fmt.Sprintf("w%d.example.com", e), Service: &ServiceRef{Namespace: "app", Name: name, Port: int32(443 + e)},
				CABundle: ca.PEM})
		}
	}
	p := &Prober{Endpoints: endpoints}
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range p.Probe(b.Context(), paths) {
			if !r.Verified() {
				b.Fatal(r.Err)
			}
		}
	}
}
