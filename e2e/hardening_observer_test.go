package e2e

// The observer under a hostile writer, on the real kube-apiserver. The guard
// runs without its static manifest and without the policy shape, so
// kube-apiserver never asks it: every decision below is the observer's.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

const (
	floodCAName      = "flood-ca"      // audited; a foreign CA per write
	floodInjectName  = "flood-inject"  // audited injectedByCertManager; a bogus inject annotation per write
	floodGenuineName = "flood-genuine" // audited; one write before and one after the flood
)

// TestHardeningObserverKeepsUpWithHostileWriter: a writer floods two audited
// configurations for 20 s, one with a new foreign CA per write, the other
// with a new unreadable inject annotation per write. The observer's queue
// holds at most one entry per configuration throughout, and a genuine
// foreign-CA write made right after the flood is decided within 5 s.
// Before the queue and HeldOnly, the observer decided one event at a time
// with admission's waits (a second per foreign CA, up to five per new inject
// annotation), so the genuine write waited behind the whole flood.
func TestHardeningObserverKeepsUpWithHostileWriter(t *testing.T) {
	t.Parallel()
	cfg := guardConfig(
		mapping(floodCAName, guardapi.ModeAudit, floodCAName, caFromSecret()),
		mapping(floodInjectName, guardapi.ModeAudit, floodInjectName, guardapi.CASource{InjectedByCertManager: &guardapi.InjectedByCertManager{}}),
		mapping(floodGenuineName, guardapi.ModeAudit, floodGenuineName, caFromSecret()),
	)
	f := newFixture(t, framework.Options{Config: cfg, NoStaticManifest: true})
	ctx := t.Context()
	for _, name := range []string{floodCAName, floodInjectName, floodGenuineName} {
		f.create(t, framework.Validating, name, f.ownerCA.PEM)
	}
	guard := f.env.Guard
	genuine := func() float64 {
		return guard.Metric(t, "webhook_guard_observed_changes_total", map[string]string{"mapping": floodGenuineName, "rule": "ca-mismatch"})
	}
	// The observer is watching once a first foreign CA is decided.
	foreign := framework.NewCA(t, "genuine-foreign-ca")
	if _, err := f.owner.SetCABundle(ctx, framework.Validating, floodGenuineName, foreign.PEM); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 20*time.Second, "the observer decides the first genuine write", func() bool { return genuine() == 1 })

	cas := make([][]byte, 256)
	for i := range cas {
		cas[i] = framework.NewCA(t, fmt.Sprintf("flood-%d", i)).PEM
	}
	// E2E_OBSERVER_FLOOD lengthens the flood for a one-off measurement of
	// the guard's heap under it (docs/reliability.md); CI floods 20 s.
	flood := 20 * time.Second
	if v := os.Getenv("E2E_OBSERVER_FLOOD"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("E2E_OBSERVER_FLOOD=%q: %v", v, err)
		}
		flood = d
	}
	floodCtx, cancel := context.WithTimeout(ctx, flood)
	defer cancel()
	var writes, n atomic.Int64
	var failed sync.Map
	write := func(name string, fn func(*metav1.ObjectMeta, [][]byte)) {
		for floodCtx.Err() == nil {
			_, err := f.owner.Mutate(floodCtx, framework.Validating, name, metav1.UpdateOptions{}, fn)
			switch {
			case err == nil:
				writes.Add(1)
			case apierrors.IsConflict(err), floodCtx.Err() != nil, strings.Contains(err.Error(), "would exceed context deadline"):
			default:
				failed.LoadOrStore(name, err.Error())
			}
		}
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			write(floodCAName, func(_ *metav1.ObjectMeta, bundles [][]byte) {
				ca := cas[n.Add(1)%int64(len(cas))]
				for i := range bundles {
					bundles[i] = ca
				}
			})
		})
		wg.Go(func() {
			write(floodInjectName, func(meta *metav1.ObjectMeta, bundles [][]byte) {
				i := n.Add(1)
				if meta.Annotations == nil {
					meta.Annotations = map[string]string{}
				}
				meta.Annotations[casource.AnnotationInjectCAFromSecret] = fmt.Sprintf("bogus-%d/ca-%d", i, i)
				for j := range bundles {
					bundles[j] = cas[i%int64(len(cas))]
				}
			})
		})
	}
	var maxDepth float64
	samples := 0
	floodStart, lastHeap := time.Now(), time.Now()
	for floodCtx.Err() == nil {
		m := guard.Metrics(t)
		maxDepth = max(maxDepth, m.Sum("webhook_guard_observer_queue_depth", nil))
		samples++
		if time.Since(lastHeap) >= 30*time.Second {
			lastHeap = time.Now()
			t.Logf("flood at %s: %d writes, Go heap in use %.1f MiB, resident %.1f MiB, queue depth %g, decided %g",
				time.Since(floodStart).Round(time.Second), writes.Load(), m.Sum("go_memstats_heap_inuse_bytes", nil)/(1<<20),
				m.Sum("process_resident_memory_bytes", nil)/(1<<20), m.Sum("webhook_guard_observer_queue_depth", nil), m.Sum("webhook_guard_observer_decided_total", nil))
		}
		time.Sleep(200 * time.Millisecond)
	}
	wg.Wait()
	failed.Range(func(k, v any) bool {
		t.Errorf("writing %v failed with something other than a conflict: %v", k, v)
		return true
	})
	if writes.Load() < 100 {
		t.Fatalf("only %d writes in %s; the flood did not happen", writes.Load(), flood)
	}

	start := time.Now()
	if _, err := f.owner.SetCABundle(ctx, framework.Validating, floodGenuineName, framework.NewCA(t, "genuine-foreign-ca-2").PEM); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 5*time.Second, "the observer decides the genuine write made right after the flood", func() bool { return genuine() == 2 })
	caughtUp := time.Since(start)

	m := guard.Metrics(t)
	events := m.Sum("webhook_guard_observer_events_total", nil)
	decided := m.Sum("webhook_guard_observer_decided_total", nil)
	unavailable := m.Sum("webhook_guard_observed_changes_total", map[string]string{"mapping": floodInjectName, "rule": "ca-unavailable"})
	t.Logf("flood: %d writes in %s (%.0f/s); observer: %g watch events, %g decided, queue depth max %g over %d samples, genuine write decided %s after it was made; %g bogus-annotation changes decided ca-unavailable; Go heap in use %.1f MiB",
		writes.Load(), flood, float64(writes.Load())/flood.Seconds(), events, decided, maxDepth, samples, caughtUp.Round(time.Millisecond), unavailable,
		m.Sum("go_memstats_heap_inuse_bytes", nil)/(1<<20))
	// Two configurations are flooded; the genuine one is written once.
	if maxDepth > 3 {
		t.Errorf("the observer's queue depth reached %g; want at most one entry per configuration written (3)", maxDepth)
	}
	if unavailable < 1 {
		t.Errorf("no change of %s was decided ca-unavailable; want the bogus annotations judged without resolving them\n%s", floodInjectName, m.Series("webhook_guard_observed_changes_total"))
	}
}

// TestHardeningOneWriteOneRecord: in the static shape an audited write is
// decided by admission and seen again by the observer; N audited writes
// must count N in the ClusterReport, not 2N. The writer writes N distinct
// foreign CAs one after another; the report's ca-mismatch results add up
// to N once both recorders have flushed, and stay at N.
func TestHardeningOneWriteOneRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t, framework.Options{ReportCRDs: true, GuardArgs: []string{"--records-flush-interval", flushInterval.String()}})
	reports := reportClient(t, f)
	ctx := t.Context()
	f.create(t, framework.Validating, auditedName, f.ownerCA.PEM)

	const n = 5
	for i := range n {
		f.owner.Warnings.Take()
		if _, err := f.owner.SetCABundle(ctx, framework.Validating, auditedName, framework.NewCA(t, fmt.Sprintf("foreign-%d", i)).PEM); err != nil {
			t.Fatal(err)
		}
		if len(framework.Containing(f.owner.Warnings.Take(), "would deny")) == 0 {
			t.Fatalf("write %d was not audited by admission (no would-deny warning)", i)
		}
	}
	// counted sums the counts of the report's ca-mismatch results, and
	// those the observer recorded.
	counted := func() (all, observed int) {
		var rep reportsv1alpha1.ClusterReport
		if reports.Get(ctx, types.NamespacedName{Name: records.ReportName(policy.KindValidating, auditedName)}, &rep) != nil {
			return 0, 0
		}
		for _, r := range rep.Results {
			if r.Rule != string(policy.RuleCAMismatch) {
				continue
			}
			c, _ := strconv.Atoi(r.Properties[records.PropCount])
			all += c
			if r.Properties[records.PropOrigin] == records.OriginObserved {
				observed += c
			}
		}
		return all, observed
	}
	// The observer has seen every write once it has decided them all.
	framework.Eventually(t, 20*time.Second, "the observer decides the writes", func() bool {
		return f.env.Guard.Metric(t, "webhook_guard_observed_changes_total", map[string]string{"mapping": auditedMapping, "rule": "ca-mismatch"}) == n
	})
	framework.Eventually(t, 5*flushInterval+5*time.Second, fmt.Sprintf("the report counts %d ca-mismatch writes", n), func() bool {
		all, _ := counted()
		return all >= n
	})
	// Both recorders have flushed everything after a few more intervals.
	time.Sleep(3 * flushInterval)
	all, observed := counted()
	t.Logf("%d audited writes: the report counts %d ca-mismatch results, %d of them from the observer", n, all, observed)
	if all != n {
		t.Errorf("the report counts %d ca-mismatch writes (%d from the observer); want exactly %d: one write, one record", all, observed, n)
	}
	// Admission recorded each write before it was stored, with the user:
	// the observer's sighting of the same write is the one left out.
	if observed != 0 {
		t.Errorf("%d of the writes count as observed; want every write counted where admission recorded it", observed)
	}
}
