package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// The storm breaker: an owner's own hot loop passes every ownership rule;
// a writeBudget is what stops it.
const (
	budgetedMapping   = "budgeted"
	budgetedName      = "budgeted-webhooks"
	budgetPerMinute   = 30
	unbudgetedMapping = "unbudgeted"
	unbudgetedName    = "unbudgeted-webhooks"
)

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// stormClient is a clientset of c's identity that counts the 429s it
// receives, and those with a Retry-After, and removes the header, so that
// client-go returns them at once instead of sleeping until the window has
// room: the test measures the refusals, not the waits. Counted here, a 429
// whose call returns after the storm's deadline is counted both ways.
// Client-go's own rate limiter is off: a controller in a hot loop is not
// limited by its client, and the limiter's Wait fails a call early when
// its wait would pass the storm's deadline, an error that is not the
// guard's.
func stormClient(t *testing.T, c *framework.Client, tooMany, retryAfter *atomic.Int64) kubernetes.Interface {
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil && resp.StatusCode == http.StatusTooManyRequests {
				tooMany.Add(1)
				if s, _ := strconv.Atoi(resp.Header.Get("Retry-After")); s > 0 {
					retryAfter.Add(1)
				}
				resp.Header.Del("Retry-After")
			}
			return resp, err
		})
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

// stormResult is what one storm's clients saw.
type stormResult struct {
	attempted, allowed, refused, other int64
	// tooMany and retryAfter count the 429 responses, and those with a
	// Retry-After, as the transport saw them.
	tooMany, retryAfter int64
	firstOther          string
	p99                 time.Duration
	// changes is how often the configuration changed (its generation).
	changes int64
}

const (
	stormClients  = 8
	stormDuration = 6 * time.Second
)

// storm has stormClients clients of the owner's service account write
// caBundle changes to the named configuration as fast as they can for
// stormDuration, alternating bundles so that every write that lands is a
// change.
func (f *fixture) storm(t *testing.T, name string, bundles [][]byte) stormResult {
	t.Helper()
	ctx := t.Context()
	generation := func() int64 {
		o, err := f.env.AdminKube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return o.Generation
	}
	startGen := generation()
	var (
		attempted, allowed, refused, other atomic.Int64
		tooMany, retryAfter                atomic.Int64
		firstOther                         atomic.Value
		mu                                 sync.Mutex
		latencies                          []time.Duration
	)
	stormCtx, cancel := context.WithTimeout(ctx, stormDuration)
	defer cancel()
	var wg sync.WaitGroup
	for i := range stormClients {
		kube := stormClient(t, f.env.Client(t, ownerUser), &tooMany, &retryAfter)
		wg.Go(func() {
			for n := i; stormCtx.Err() == nil; n++ {
				patch := fmt.Sprintf(`[{"op":"replace","path":"/webhooks/0/clientConfig/caBundle","value":%q}]`, base64.StdEncoding.EncodeToString(bundles[n%len(bundles)]))
				start := time.Now()
				_, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(stormCtx, name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
				if stormCtx.Err() != nil {
					return
				}
				mu.Lock()
				latencies = append(latencies, time.Since(start))
				mu.Unlock()
				attempted.Add(1)
				switch {
				case err == nil:
					allowed.Add(1)
				case apierrors.IsTooManyRequests(err):
					refused.Add(1)
				default:
					other.Add(1)
					firstOther.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	wg.Wait()
	r := stormResult{
		attempted: attempted.Load(), allowed: allowed.Load(), refused: refused.Load(), other: other.Load(),
		tooMany: tooMany.Load(), retryAfter: retryAfter.Load(), changes: generation() - startGen,
	}
	if msg, ok := firstOther.Load().(string); ok {
		r.firstOther = msg
	}
	slices.Sort(latencies)
	if len(latencies) > 0 {
		r.p99 = latencies[int(0.99*float64(len(latencies)-1))]
	}
	return r
}

func (r stormResult) String() string {
	return fmt.Sprintf("%d clients for %s: %d writes attempted, %d allowed (some leave the bundle as another client just wrote it), %d refused with 429 (responses: %d 429s, %d with Retry-After), %d other; "+
		"the configuration changed %d times; client patch latency p99 %s",
		stormClients, stormDuration, r.attempted, r.allowed, r.refused, r.tooMany, r.retryAfter, r.other,
		r.changes, r.p99.Round(time.Millisecond))
}

// TestStormBreakerWriteBudget: eight clients of the owner's own service
// account write caBundle changes as fast as they can, first to a
// configuration whose mapping has no budget (the baseline: every write
// passes every ownership rule), then to one whose mapping has a budget.
// That configuration changes at most perMinute times, the rest are
// refused with a 429 and a Retry-After, the refusals are counted, and
// break-glass still writes.
func TestStormBreakerWriteBudget(t *testing.T) {
	budgeted := mapping(budgetedMapping, guardapi.ModeEnforce, budgetedName, caFromSecret())
	budgeted.WriteBudget = &guardapi.WriteBudget{PerMinute: budgetPerMinute}
	unbudgeted := mapping(unbudgetedMapping, guardapi.ModeEnforce, unbudgetedName, caFromSecret())
	f := newFixture(t, framework.Options{Config: guardConfig(budgeted, unbudgeted)})
	ctx := t.Context()

	// Two owner CAs, so that the owner has three distinct valid bundles to
	// alternate between: every write that lands is a caBundle change.
	second := framework.NewCA(t, "app-webhook-ca-2")
	f.setOwnerCA(t, slices.Concat(f.ownerCA.PEM, second.PEM))
	bundles := [][]byte{f.ownerCA.PEM, second.PEM, slices.Concat(f.ownerCA.PEM, second.PEM)}
	f.create(t, framework.Validating, unbudgetedName, f.ownerCA.PEM)
	before := f.create(t, framework.Validating, budgetedName, f.ownerCA.PEM)

	base := f.storm(t, unbudgetedName, bundles)
	t.Logf("without a budget: %s (%.0f per minute at that rate)", base, float64(base.changes)/stormDuration.Minutes())
	if base.refused > 0 || base.firstOther != "" {
		t.Errorf("the owner's storm without a budget was refused (%d 429s; other: %q); every write passes the ownership rules", base.refused, base.firstOther)
	}
	if base.changes <= budgetPerMinute {
		t.Errorf("without a budget the storm changed the configuration %d times; want more than the budget (%d), or the budget proves nothing", base.changes, budgetPerMinute)
	}

	r := f.storm(t, budgetedName, bundles)
	after := f.admin.MustGet(t, framework.Validating, budgetedName)
	m := f.env.Guard.Metrics(t)
	t.Logf("with writeBudget.perMinute %d: %s; guard decision duration p99 <= %s (both storms)", budgetPerMinute, r, guardP99(m))

	if r.firstOther != "" {
		t.Errorf("%d writes failed with something other than 429, first: %v", r.other, r.firstOther)
	}
	if r.changes > budgetPerMinute || r.changes <= 0 {
		t.Errorf("the configuration changed %d times during the storm (resourceVersion %s -> %s); want between 1 and the budget, %d",
			r.changes, before.ResourceVersion, after.ResourceVersion, budgetPerMinute)
	}
	if r.refused == 0 || r.retryAfter != r.tooMany {
		t.Errorf("%d writes were refused with 429 (%d 429 responses, %d of them with a Retry-After); want the storm refused, every refusal with a Retry-After",
			r.refused, r.tooMany, r.retryAfter)
	}
	if n := m.Sum("webhook_guard_write_budget_exceeded_total", map[string]string{"mapping": budgetedMapping, "mode": "enforce"}); n < float64(r.refused) {
		t.Errorf("webhook_guard_write_budget_exceeded_total{mapping=budgeted,mode=enforce} = %g; the clients saw %d refusals", n, r.refused)
	}

	// The budget is spent; break-glass is never limited.
	foreign := framework.NewCA(t, "break-glass-ca")
	if _, err := f.admin.SetCABundle(ctx, framework.Validating, budgetedName, foreign.PEM); err != nil {
		t.Fatalf("a break-glass write after the storm was refused: %v", err)
	}
	requireBundles(t, f.admin.MustGet(t, framework.Validating, budgetedName), foreign.PEM)
}

// guardP99 is the upper bound of the bucket of the guard's decision
// duration histogram that holds its 99th percentile, all decisions
// together.
func guardP99(m framework.Metrics) string {
	byLE := map[float64]float64{}
	var count float64
	for _, s := range m {
		switch s.Name {
		case "webhook_guard_decision_duration_seconds_bucket":
			le, err := strconv.ParseFloat(s.Labels["le"], 64)
			if err == nil {
				byLE[le] += s.Value
			}
		case "webhook_guard_decision_duration_seconds_count":
			count += s.Value
		}
	}
	les := make([]float64, 0, len(byLE))
	for le := range byLE {
		les = append(les, le)
	}
	slices.Sort(les)
	for _, le := range les {
		if byLE[le] >= 0.99*count {
			if math.IsInf(le, 1) {
				return "+Inf"
			}
			return (time.Duration(le * float64(time.Second))).String()
		}
	}
	return "unknown"
}
