package observe

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/policy/flapping"
)

// discard is a recorder that keeps nothing: the benchmark measures the
// observer, not the records' aggregation.
type discard struct{}

func (discard) RecordDecision(context.Context, *policy.Decision)        {}
func (discard) RecordFlapping(context.Context, string, flapping.Report) {}

// BenchmarkObservedChange is the CPU and allocation cost of one watch
// event of a guarded configuration (what a write storm costs the leader per
// write): decoding the event, the field managers, the decision with the
// real policy code and flapping detection. Compare the sub-benchmarks in
// one run: a foreign CA (recorded), the owner's CA (allowed), and a change
// that leaves caBundle alone (the cheapest exit).
func BenchmarkObservedChange(b *testing.B) {
	owner := testpki.MustCA(b, "owner-ca").PEM
	foreign := make([][]byte, 8)
	for i := range foreign {
		foreign[i] = testpki.MustCA(b, fmt.Sprintf("replica-%d-ca", i)).PEM
	}
	cfg := appConfig(b, owner, "defaultMode: audit\n")
	at := time.Now()
	o := &Observer{Config: staticConfig{cfg}, Decider: policyDecider{cfg: cfg, fps: cabundle.NewFingerprintCache(cabundle.DefaultFingerprintCacheSize)}, Recorder: discard{},
		Metrics: NewMetrics(prometheus.NewRegistry()), Log: logr.Discard(), MismatchGrace: -1}
	h := draining{o: o, ctx: b.Context(), h: o.handler(b.Context())}
	for name, bundles := range map[string][][]byte{
		"foreign CAs, recorded":   foreign,
		"owner's CA, allowed":     {owner, append(append([]byte{}, owner...), '\n')},
		"caBundle left unchanged": {owner},
	} {
		b.Run(name, func(b *testing.B) {
			objs := make([]any, 64)
			for i := range objs {
				obj, _ := trim(vwc(fmt.Sprint(i), bundles[i%len(bundles)], fmt.Sprintf("replica-%d", i%len(bundles)), at))
				objs[i] = obj
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				h.OnUpdate(objs[i%len(objs)], objs[(i+1)%len(objs)])
				i++
			}
		})
	}
}
