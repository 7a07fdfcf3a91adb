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
	budgetedMapping = "budgeted"
	budgetedName    = "budgeted-webhooks"
	budgetPerMinute = 30
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

// TestStormBreakerWriteBudget: eight clients of the owner's own service
// account write caBundle changes as fast as they can. The configuration
// changes at most perMinute times, the rest are refused with a 429 and a
// Retry-After, the refusals are counted, and break-glass still writes.
func TestStormBreakerWriteBudget(t *testing.T) {
	budgeted := mapping(budgetedMapping, guardapi.ModeEnforce, budgetedName, caFromSecret())
	budgeted.WriteBudget = &guardapi.WriteBudget{PerMinute: budgetPerMinute}
	f := newFixture(t, framework.Options{Config: guardConfig(budgeted)})
	ctx := t.Context()

	// Two owner CAs, so that the owner has three distinct valid bundles to
	// alternate between: every write that lands is a caBundle change.
	second := framework.NewCA(t, "app-webhook-ca-2")
	f.setOwnerCA(t, slices.Concat(f.ownerCA.PEM, second.PEM))
	bundles := [][]byte{f.ownerCA.PEM, second.PEM, slices.Concat(f.ownerCA.PEM, second.PEM)}
	before := f.create(t, framework.Validating, budgetedName, f.ownerCA.PEM)
	generation := func() int64 {
		o, err := f.env.AdminKube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, budgetedName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return o.Generation
	}
	startGen := generation()

	const (
		clients = 8
		storm   = 6 * time.Second
	)
	var (
		attempted, allowed, refused, other atomic.Int64
		tooMany, retryAfter                atomic.Int64
		firstOther                         atomic.Value
		mu                                 sync.Mutex
		latencies                          []time.Duration
	)
	stormCtx, cancel := context.WithTimeout(ctx, storm)
	defer cancel()
	var wg sync.WaitGroup
	for i := range clients {
		kube := stormClient(t, f.env.Client(t, ownerUser), &tooMany, &retryAfter)
		wg.Go(func() {
			for n := i; stormCtx.Err() == nil; n++ {
				patch := fmt.Sprintf(`[{"op":"replace","path":"/webhooks/0/clientConfig/caBundle","value":%q}]`, base64.StdEncoding.EncodeToString(bundles[n%len(bundles)]))
				start := time.Now()
				_, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(stormCtx, budgetedName, types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
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

	after := f.admin.MustGet(t, framework.Validating, budgetedName)
	endGen := generation()
	slices.Sort(latencies)
	p99 := time.Duration(0)
	if len(latencies) > 0 {
		p99 = latencies[int(0.99*float64(len(latencies)-1))]
	}
	m := f.env.Guard.Metrics(t)
	t.Logf("%d clients for %s: %d writes attempted, %d allowed (some leave the bundle as another client just wrote it), %d refused with 429 (responses: %d 429s, %d with Retry-After), %d other; "+
		"generation %d -> %d; client patch latency p99 %s; guard decision duration p99 <= %s",
		clients, storm, attempted.Load(), allowed.Load(), refused.Load(), tooMany.Load(), retryAfter.Load(), other.Load(),
		startGen, endGen, p99.Round(time.Millisecond), guardP99(m))

	if msg := firstOther.Load(); msg != nil {
		t.Errorf("%d writes failed with something other than 429, first: %v", other.Load(), msg)
	}
	if changes := endGen - startGen; changes > budgetPerMinute || changes <= 0 {
		t.Errorf("the configuration changed %d times during the storm (resourceVersion %s -> %s); want between 1 and the budget, %d",
			changes, before.ResourceVersion, after.ResourceVersion, budgetPerMinute)
	}
	if refused.Load() == 0 || retryAfter.Load() != tooMany.Load() {
		t.Errorf("%d writes were refused with 429 (%d 429 responses, %d of them with a Retry-After); want the storm refused, every refusal with a Retry-After",
			refused.Load(), tooMany.Load(), retryAfter.Load())
	}
	if n := m.Sum("webhook_guard_write_budget_exceeded_total", map[string]string{"mapping": budgetedMapping, "mode": "enforce"}); n < float64(refused.Load()) {
		t.Errorf("webhook_guard_write_budget_exceeded_total{mapping=budgeted,mode=enforce} = %g; the clients saw %d refusals", n, refused.Load())
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
