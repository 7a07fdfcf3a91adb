package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
)

// The faults the guard must survive, each on a real kube-apiserver that
// calls the guard through the rendered static webhook.

const secretSource = "Secret " + appNamespace + "/" + caSecret

// The owner's CA Secret is deleted: caBundle changes fail closed at once
// (a "not found" is a definitive answer, not a cache miss) with a message
// naming the Secret; updates that leave caBundle alone still pass; a
// recreated Secret is picked up without a restart.
func TestFaultOwnerCASecretDeleted(t *testing.T) {
	f := newFixture(t, framework.Options{GuardArgs: []string{"--ca-max-stale=1s"}})
	ctx := t.Context()
	f.create(t, framework.Validating, enforcedName, nil)
	if _, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, f.ownerCA.PEM); err != nil {
		t.Fatalf("the owner could not write its CA before the fault: %v", err)
	}

	if err := f.env.AdminKube.CoreV1().Secrets(appNamespace).Delete(ctx, caSecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond) // the cached read expires
	rotated := append(append([]byte{}, f.ownerCA.PEM...), framework.NewCA(t, "next-ca").PEM...)
	_, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, rotated)
	requireDenied(t, err, "ca-unavailable", secretSource, "webhooks[0].clientConfig.caBundle")
	if _, err := f.owner.Annotate(ctx, framework.Validating, enforcedName, "e2e/while-secret-missing", "x"); err != nil {
		t.Errorf("an update that leaves caBundle alone failed while the CA Secret was missing: %v", err)
	}

	f.setOwnerCA(t, f.ownerCA.PEM)
	framework.Eventually(t, 10*time.Second, "the owner writes its CA again once the Secret is back", func() bool {
		_, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, append([]byte("# back\n"), f.ownerCA.PEM...))
		return err == nil
	})
}

// The API server is unreachable for the guard's CA reads (its kubeconfig
// goes through a TCP proxy the test stops): a cached CA keeps answering for
// --ca-max-stale, then caBundle changes fail closed while other updates
// pass; when the API server is reachable again the guard recovers by itself.
func TestFaultAPIServerUnreachableForCAReads(t *testing.T) {
	const maxStale = 8 * time.Second
	f := newFixture(t, framework.Options{GuardAPIProxy: true, GuardArgs: []string{"--ca-max-stale=" + maxStale.String()}})
	ctx := t.Context()
	g := f.env.Guard
	f.create(t, framework.Validating, enforcedName, nil)
	bundle := func(i int) []byte { return append([]byte(fmt.Sprintf("# write %d\n", i)), f.ownerCA.PEM...) }
	if _, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, bundle(0)); err != nil {
		t.Fatalf("the owner could not write its CA before the fault: %v", err)
	}
	lastRead := time.Now()

	f.env.APIProxy.Stop()
	cut := time.Now()
	errorsBefore := g.Metric(t, "webhook_guard_ca_source_errors_total", map[string]string{"mapping": enforcedMapping})
	time.Sleep(1200 * time.Millisecond) // past the TTL: the next write must re-read, and cannot
	if _, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, bundle(1)); err != nil {
		t.Fatalf("within --ca-max-stale the cached CA must answer; the owner's write failed %s after the cut: %v", time.Since(lastRead).Round(time.Millisecond), err)
	}
	if g.Metric(t, "webhook_guard_ca_source_errors_total", map[string]string{"mapping": enforcedMapping}) <= errorsBefore {
		t.Errorf("the failed CA read was not counted in webhook_guard_ca_source_errors_total")
	}
	servedStale := time.Since(cut)

	time.Sleep(time.Until(lastRead.Add(maxStale + 500*time.Millisecond)))
	_, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, bundle(2))
	requireDenied(t, err, "ca-unavailable", secretSource)
	if _, err := f.owner.Annotate(ctx, framework.Validating, enforcedName, "e2e/while-cut-off", "x"); err != nil {
		t.Errorf("an update that leaves caBundle alone failed while the API server was unreachable: %v", err)
	}

	if err := f.env.APIProxy.Start(); err != nil {
		t.Fatal(err)
	}
	restored := time.Now()
	framework.Eventually(t, 15*time.Second, "caBundle writes pass again once the API server is reachable", func() bool {
		_, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, bundle(3))
		return err == nil
	})
	t.Logf("cached CA served %s into the outage; failed closed after %s (--ca-max-stale); recovered %s after the API server came back",
		servedStale.Round(time.Millisecond), maxStale, time.Since(restored).Round(time.Millisecond))
}

// The config file is replaced by an invalid one: the guard keeps deciding
// with the last good configuration, counts and logs the failed reload, and
// takes the next valid file.
func TestFaultConfigReplacedByInvalidFile(t *testing.T) {
	f := newFixture(t, framework.Options{})
	ctx := t.Context()
	g := f.env.Guard
	f.create(t, framework.Validating, enforcedName, f.ownerCA.PEM)
	failed := map[string]string{"result": "error"}
	before := g.Metric(t, "webhook_guard_config_reloads_total", failed)

	g.WriteConfigFile(t, []byte("apiVersion: webhook-guard.io/v1alpha1\nkind: GuardConfig\nowners:\n  - name: broken\n    writer: {}\n"))
	framework.Eventually(t, 15*time.Second, "the guard counts the rejected reload", func() bool {
		return g.Metric(t, "webhook_guard_config_reloads_total", failed) > before
	})
	if v := g.Metric(t, "webhook_guard_config_last_reload_successful", nil); v != 0 {
		t.Errorf("webhook_guard_config_last_reload_successful = %g while a bad file is ignored; want 0", v)
	}
	if !strings.Contains(g.Log.String(), "rejected the new configuration; the last good one stays in force") ||
		!strings.Contains(g.Log.String(), `unknown field \"owners[0].writer\"`) {
		t.Errorf("the guard did not log the rejected configuration with its reason:\n%s", g.Log.Tail(10))
	}
	// The last good configuration is still enforced.
	_, err := f.intruder.Annotate(ctx, framework.Validating, enforcedName, "e2e/intruder", "x")
	requireDenied(t, err, "not-owner", enforcedMapping)
	if _, err := f.owner.Annotate(ctx, framework.Validating, enforcedName, "e2e/owner", "x"); err != nil {
		t.Errorf("the owner's write failed under the last good configuration: %v", err)
	}

	g.RewriteConfig(t, guardConfig())
	if v := g.Metric(t, "webhook_guard_config_last_reload_successful", nil); v != 1 {
		t.Errorf("webhook_guard_config_last_reload_successful = %g after a good file; want 1", v)
	}
}

// One of two replicas dies under load. The static manifest holds one URL,
// so the two replicas sit behind a TCP load balancer on that URL's port (a
// Service or an L4 balancer in front of the pods in a cluster). Four writers
// update guarded configurations through kube-apiserver without pause. A
// SIGKILL (crash) may fail the reviews in flight on the dead replica's
// connections: failurePolicy Fail turns each into a 500, and nothing else
// may fail. A SIGTERM (rolling update) drains and fails nothing.
func TestFaultReplicaKilledUnderLoad(t *testing.T) {
	f := newFixture(t, framework.Options{})
	f.create(t, framework.Validating, enforcedName, f.ownerCA.PEM)
	// The URL kube-apiserver calls is the first guard's port: free it and
	// put the balancer there, in front of two fresh replicas.
	url := f.env.Guard.Addr()
	f.env.Guard.Stop(t)
	a, b := f.env.NewReplica(t), f.env.NewReplica(t)
	a.Start(t)
	b.Start(t)
	lb := framework.NewTCPProxy(t, url, a.Addr(), b.Addr())
	replicas := map[string]*framework.Guard{a.Addr(): a, b.Addr(): b}

	phase := func(name string, fault func() *framework.Guard) (ok, failed int64) {
		ctx, cancel := context.WithCancel(t.Context())
		var okN, failedN atomic.Int64
		var mu sync.Mutex
		var errs []string
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := 0; ctx.Err() == nil; i++ {
					_, err := f.owner.Annotate(ctx, framework.Validating, enforcedName, fmt.Sprintf("e2e/writer-%d", w), fmt.Sprint(i))
					switch {
					case err == nil:
						okN.Add(1)
					case ctx.Err() != nil:
					case apierrors.IsConflict(err):
						// another writer won the race; not an admission failure
					default:
						failedN.Add(1)
						var status apierrors.APIStatus
						if !errors.As(err, &status) || status.Status().Code != http.StatusInternalServerError || !strings.Contains(status.Status().Message, "failed calling webhook") {
							t.Errorf("%s: a write failed other than by failurePolicy Fail: %v", name, err)
						}
						mu.Lock()
						errs = append(errs, err.Error())
						mu.Unlock()
					}
				}
			})
		}
		time.Sleep(2 * time.Second)
		busiest := lb.Busiest()
		open := lb.Open(busiest)
		victim := fault()
		time.Sleep(3 * time.Second)
		cancel()
		wg.Wait()
		t.Logf("%s: %d writes admitted, %d failed (%s stopped, holding %d of kube-apiserver's connections)", name, okN.Load(), failedN.Load(), victim.Addr(), open)
		if victim.Addr() != busiest || open == 0 {
			t.Errorf("%s: the stopped replica held no connection; the fault was not under load", name)
		}
		for _, e := range errs {
			t.Logf("  failed: %s", e)
		}
		return okN.Load(), failedN.Load()
	}

	// A crash: the replica holding kube-apiserver's connection is killed.
	ok, failed := phase("SIGKILL", func() *framework.Guard {
		v := replicas[lb.Busiest()]
		if v == nil {
			v = a
		}
		v.Kill(t)
		return v
	})
	if ok < 20 {
		t.Errorf("only %d writes were admitted; the load did not exercise the fault", ok)
	}
	// At most the reviews in flight on the killed replica: one per writer.
	if failed > 4 {
		t.Errorf("%d writes failed after a SIGKILL; at most the 4 in flight may", failed)
	}

	// A rolling update: the surviving replica gets SIGTERM while the crashed
	// one is back; draining fails nothing.
	for _, g := range replicas {
		if !g.Running() {
			g.Start(t)
		}
	}
	ok, failed = phase("SIGTERM", func() *framework.Guard {
		v := replicas[lb.Busiest()]
		if v == nil {
			v = b
		}
		v.Signal(t, syscall.SIGTERM)
		return v
	})
	if failed > 0 {
		t.Errorf("%d writes failed while a replica drained after SIGTERM; want 0", failed)
	}
	if ok < 20 {
		t.Errorf("only %d writes were admitted in the SIGTERM phase", ok)
	}
}
