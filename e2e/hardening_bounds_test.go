package e2e

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// Names of the hostile-load test's mappings.
const (
	injectedMapping = "injected"
	injectedName    = "injected-webhooks"
	labelledMapping = "labelled"
	guardedLabel    = "e2e.webhook-guard.io/guarded"
)

// hardeningConfig adds an injectedByCertManager mapping (its CA named by the
// configuration's own annotation) and an enforced selector mapping (it
// claims any name labelled guarded=true) to guardConfig.
func hardeningConfig(extra ...guardapi.Owner) *guardapi.GuardConfig {
	injected := mapping(injectedMapping, guardapi.ModeEnforce, injectedName, guardapi.CASource{InjectedByCertManager: &guardapi.InjectedByCertManager{}})
	labelled := guardapi.Owner{Name: labelledMapping, Mode: guardapi.ModeEnforce,
		Match:   guardapi.Match{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{guardedLabel: "true"}}},
		Writers: guardapi.Subjects{ServiceAccounts: []string{appNamespace + "/" + ownerSA}},
		CA:      caFromSecret()}
	return guardConfig(append([]guardapi.Owner{injected, labelled}, extra...)...)
}

// review encodes an AdmissionReview as kube-apiserver sends it (typed
// objects marshalled); obj or old nil leaves that object out.
func review(t testing.TB, uid string, op admissionv1.Operation, user string, dryRun bool, obj, old *admv1.ValidatingWebhookConfiguration) []byte {
	t.Helper()
	req := &admissionv1.AdmissionRequest{
		UID:       types.UID("hardening-" + uid),
		Kind:      metav1.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"},
		Resource:  metav1.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
		Operation: op,
		UserInfo:  authenticationv1.UserInfo{Username: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}},
		DryRun:    new(dryRun),
	}
	raw := func(o *admv1.ValidatingWebhookConfiguration) runtime.RawExtension {
		o.TypeMeta = metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"}
		data, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: data}
	}
	if obj != nil {
		req.Name, req.Object = obj.Name, raw(obj)
	}
	if old != nil {
		req.Name, req.OldObject = old.Name, raw(old)
	}
	out, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// config is a configuration with one webhook entry carrying bundle.
func config(name string, labels, annotations map[string]string, bundle []byte) *admv1.ValidatingWebhookConfiguration {
	return (framework.Spec{Kind: framework.Validating, Name: name, Labels: labels, Annotations: annotations, Bundles: [][]byte{bundle}}).Validating()
}

// rssMiB is the process's resident set from /proc.
func rssMiB(t testing.TB, pid int) float64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return float64(kb) / 1024
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

// seriesKeys names every series of a scrape: metric name and labels.
func seriesKeys(m framework.Metrics) map[string]bool {
	out := make(map[string]bool, len(m))
	for _, s := range m {
		keys := make([]string, 0, len(s.Labels))
		for k, v := range s.Labels {
			keys = append(keys, k+"="+v)
		}
		sort.Strings(keys)
		out[s.Name+"{"+strings.Join(keys, ",")+"}"] = true
	}
	return out
}

// noProber turns the trust-path prober off for the tests that count the
// guard's GETs: each probe round lists the EndpointSlices of every guarded
// Service by design (TestTrustPathProbe covers it), and a round that falls
// inside the measured window would count as an admission read.
const noProber = "--probe-interval=0"

// guardGETs is the guard's GET requests to the API server so far (client-go's
// rest_client_requests_total: gets, lists and watches are all GETs).
func guardGETs(t testing.TB, g *framework.Guard) float64 {
	t.Helper()
	return g.Metric(t, "rest_client_requests_total", map[string]string{"method": "GET"})
}

// TestHardeningHostileLoadIsBounded: 100k hostile requests straight to the
// built binary's HTTPS endpoint (dry-run CREATEs of an injectedByCertManager
// configuration, each naming another Certificate in its inject-ca-from
// annotation, and denied CREATEs of fresh names a selector mapping claims)
// grow its RSS by less than 10 MiB, add no metric series and make it issue
// no GET; a sample through kube-apiserver is denied as not-owner with
// nothing about the objects its annotation names.
func TestHardeningHostileLoadIsBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, framework.Options{Config: hardeningConfig(), GuardArgs: []string{"--records-flush-interval=1h", noProber}})
	g := f.env.Guard
	foreign := framework.NewCA(t, "hostile-ca")
	intruder := "system:serviceaccount:" + intruderNamespace + ":" + intruderSA
	body := func(i int) []byte {
		if i%2 == 0 {
			ann := map[string]string{"cert-manager.io/inject-ca-from": fmt.Sprintf("ns-%d/cert-%d", i, i)}
			return review(t, strconv.Itoa(i), admissionv1.Create, intruder, true, config(injectedName, nil, ann, foreign.PEM), nil)
		}
		return review(t, strconv.Itoa(i), admissionv1.Create, intruder, false, config(fmt.Sprintf("fresh-%d", i), map[string]string{guardedLabel: "true"}, nil, foreign.PEM), nil)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS(f.env.GuardCA), ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	send := func(from, n int) (allowed, failed int64) {
		var a, e atomic.Int64
		next := atomic.Int64{}
		next.Store(int64(from))
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for i := int(next.Add(1)) - 1; i < from+n; i = int(next.Add(1)) - 1 {
					v, err := post(client, g.URL(), body(i))
					switch {
					case err != nil:
						e.Add(1)
					case v.Response.Allowed:
						a.Add(1)
					}
				}
			})
		}
		wg.Wait()
		return a.Load(), e.Load()
	}

	// Warm up: every series the hostile requests touch exists, caches and
	// the first GC cycles are behind.
	if a, e := send(0, 5000); a > 0 || e > 0 {
		t.Fatalf("warm-up: %d hostile requests allowed, %d failed", a, e)
	}
	time.Sleep(time.Second)
	rss0, series0, gets0 := rssMiB(t, g.PID()), seriesKeys(g.Metrics(t)), guardGETs(t, g)
	start := time.Now()
	const hostile = 100_000
	allowed, failed := send(5000, hostile)
	took := time.Since(start)
	time.Sleep(time.Second)
	rss1, m1 := rssMiB(t, g.PID()), g.Metrics(t)
	series1, gets1 := seriesKeys(m1), guardGETs(t, g)
	t.Logf("%d hostile requests in %s (%.0f/s): RSS %.1f MiB -> %.1f MiB (%+.1f MiB), %d -> %d series, %g GETs by the guard",
		hostile, took.Round(time.Millisecond), hostile/took.Seconds(), rss0, rss1, rss1-rss0, len(series0), len(series1), gets1-gets0)
	if allowed > 0 || failed > 0 {
		t.Errorf("%d hostile requests were allowed and %d failed; want every one denied", allowed, failed)
	}
	if rss1-rss0 >= 10 {
		t.Errorf("RSS grew by %.1f MiB over %d hostile requests; want < 10 MiB", rss1-rss0, hostile)
	}
	var added []string
	for k := range series1 {
		if !series0[k] {
			added = append(added, k)
		}
	}
	sort.Strings(added)
	if len(added) > 0 {
		t.Errorf("the hostile requests added %d metric series: %s", len(added), strings.Join(added[:min(len(added), 10)], "; "))
	}
	if gets1 != gets0 {
		t.Errorf("the guard issued %g GETs during the hostile requests; want none", gets1-gets0)
	}

	// A sample through kube-apiserver: denied as not-owner, saying nothing
	// about the Certificate the annotation names.
	for i := range 5 {
		ann := map[string]string{"cert-manager.io/inject-ca-from": fmt.Sprintf("%s/secret-cert-%d", appNamespace, i)}
		_, err := f.intruder.Create(t.Context(), framework.Spec{Kind: framework.Validating, Name: injectedName, Annotations: ann, Bundles: [][]byte{foreign.PEM}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		requireDenied(t, err, "not-owner")
		if err != nil && strings.Contains(err.Error(), "secret-cert") {
			t.Errorf("the denial of a non-owner names the object its annotation points at: %v", err)
		}
		_, err = f.intruder.Create(t.Context(), framework.Spec{Kind: framework.Validating, Name: fmt.Sprintf("fresh-api-%d", i), Labels: map[string]string{guardedLabel: "true"}, Bundles: [][]byte{foreign.PEM}}, metav1.CreateOptions{})
		requireDenied(t, err, "not-owner")
	}
	if gets := guardGETs(t, g); gets != gets1 {
		t.Errorf("the guard issued %g GETs for the sample through kube-apiserver; want none", gets-gets1)
	}
	// The final flush of a thousand fresh names' records is not what this
	// test measures (TestHardeningSIGTERMFlushesRecordsAndEvents is).
	g.Kill(t)
}

// TestHardeningStormWithRotations: eight replicas of the owner (the same
// writer identity, each with its own CA) write ~100 times a second through
// kube-apiserver while the owner's CA rotates ten times, each rotation's
// caBundle written right after the Secret change: every foreign write is
// denied, every rotation admitted, and the guard reads nothing from the API
// server (its CA comes from a watch of the Secret).
func TestHardeningStormWithRotations(t *testing.T) {
	t.Parallel()
	f := newFixture(t, framework.Options{GuardArgs: []string{"--records-flush-interval=1h", noProber}})
	ctx := t.Context()
	g := f.env.Guard
	f.create(t, framework.Validating, enforcedName, f.ownerCA.PEM)
	if _, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, append(append([]byte{}, f.ownerCA.PEM...), '\n')); err != nil {
		t.Fatalf("the owner's first write: %v", err)
	}
	gets0 := guardGETs(t, g)

	const replicas = 8
	stormCtx, stop := context.WithCancel(ctx)
	var written, denied, conflicts, other atomic.Int64
	var firstOther atomic.Value
	var wg sync.WaitGroup
	for i := range replicas {
		ca := framework.NewCA(t, fmt.Sprintf("storm-replica-%d", i))
		c := f.env.Client(t, ownerUser)
		wg.Go(func() {
			tick := time.NewTicker(replicas * 10 * time.Millisecond) // 100 writes/s in all
			defer tick.Stop()
			for {
				select {
				case <-stormCtx.Done():
					return
				case <-tick.C:
				}
				_, err := c.SetCABundle(stormCtx, framework.Validating, enforcedName, ca.PEM)
				switch {
				case err == nil:
					written.Add(1)
				case apierrors.IsForbidden(err):
					denied.Add(1)
				case apierrors.IsConflict(err):
					conflicts.Add(1)
				case stormCtx.Err() != nil:
					return
				default:
					other.Add(1)
					firstOther.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}

	start := time.Now()
	var rotated int
	var gaps []time.Duration
	for round := range 10 {
		time.Sleep(200 * time.Millisecond)
		next := framework.NewCA(t, fmt.Sprintf("rotated-%d", round))
		f.setOwnerCA(t, next.PEM)
		changed := time.Now()
		_, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, next.PEM)
		gaps = append(gaps, time.Since(changed))
		if err != nil {
			t.Errorf("rotation %d: the owner's caBundle write right after the Secret change was not admitted: %v", round, err)
			continue
		}
		rotated++
	}
	time.Sleep(500 * time.Millisecond)
	// The storm goes on past the rotations until 100 of its writes have
	// reached the guard (at most 10 s more): under the whole suite's load
	// on a small machine the rotations could end first (91 once).
	for deadline := time.Now().Add(10 * time.Second); denied.Load() < 100 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	wg.Wait()
	took := time.Since(start)
	gets := guardGETs(t, g) - gets0
	t.Logf("storm: %d foreign writes in %s (%.0f/s): %d denied, %d written, %d conflicts, %d other; rotations admitted %d/10 (Secret change to caBundle write answered: %v); %g GETs by the guard; %s",
		denied.Load()+written.Load(), took.Round(time.Millisecond), float64(denied.Load()+written.Load())/took.Seconds(), denied.Load(), written.Load(), conflicts.Load(), other.Load(),
		rotated, gaps, gets, strings.ReplaceAll(strings.TrimSpace(g.Metrics(t).Series("webhook_guard_ca_live_rereads_total")), "\n", "; "))
	if written.Load() > 0 {
		t.Errorf("%d foreign writes were admitted; want every one denied", written.Load())
	}
	if other.Load() > 0 {
		t.Errorf("%d storm writes failed otherwise, first: %v", other.Load(), firstOther.Load())
	}
	if denied.Load() < 100 {
		t.Errorf("only %d storm writes were denied: the storm never reached the guard", denied.Load())
	}
	if rotated != 10 {
		t.Errorf("%d/10 rotations admitted", rotated)
	}
	if gets != 0 {
		t.Errorf("the guard issued %g GETs during the storm; want none (CA sources are watched)", gets)
	}
}

// TestHardeningSIGTERMFlushesRecordsAndEvents: fifty replicas of the built
// binary each answer audited requests and get SIGTERM right after; every
// one's records reach a ClusterReport and its Event is stored before it
// exits.
func TestHardeningSIGTERMFlushesRecordsAndEvents(t *testing.T) {
	t.Parallel()
	const audited = "audited-labelled"
	auditedLabel := "e2e.webhook-guard.io/audited"
	extra := guardapi.Owner{Name: audited, Mode: guardapi.ModeAudit,
		Match:   guardapi.Match{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{auditedLabel: "true"}}},
		Writers: guardapi.Subjects{ServiceAccounts: []string{appNamespace + "/" + ownerSA}},
		CA:      caFromSecret()}
	f := newFixture(t, framework.Options{Config: guardConfig(extra), ReportCRDs: true, GuardArgs: []string{"--records-flush-interval=1h"}})
	ctx := t.Context()
	intruder := "system:serviceaccount:" + intruderNamespace + ":" + intruderSA
	const runs, perRun, parallel = 50, 3, 5
	name := func(i int) string { return fmt.Sprintf("sigterm-%02d", i) }
	for i := range runs {
		f.admin.MustCreate(t, framework.Spec{Kind: framework.Validating, Name: name(i), Labels: map[string]string{auditedLabel: "true"}, Bundles: [][]byte{f.ownerCA.PEM}})
	}

	start := time.Now()
	var failures atomic.Int64
	for batch := 0; batch < runs; batch += parallel {
		var wg sync.WaitGroup
		for i := batch; i < batch+parallel; i++ {
			wg.Go(func() {
				g := f.env.StartReplica(t)
				client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS(f.env.GuardCA)}}
				defer client.CloseIdleConnections()
				labels := map[string]string{auditedLabel: "true"}
				for j := range perRun {
					old := config(name(i), labels, nil, f.ownerCA.PEM)
					obj := config(name(i), labels, map[string]string{"e2e/run": strconv.Itoa(j)}, f.ownerCA.PEM)
					v, err := post(client, g.URL(), review(t, fmt.Sprintf("%d-%d", i, j), admissionv1.Update, intruder, false, obj, old))
					if err != nil || !v.Response.Allowed {
						failures.Add(1)
						t.Errorf("run %d: audited request %d: %v %+v", i, j, err, v.Response)
					}
				}
				g.Stop(t) // SIGTERM, wait for the exit
			})
		}
		wg.Wait()
	}
	took := time.Since(start)

	events, err := f.env.AdminKube.EventsV1().Events(records.EventNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reports := reportClient(t, f)
	withEvent := map[string]string{}
	for _, e := range events.Items {
		if e.Reason == records.ReasonWouldDeny && e.ReportingController == "webhook-guard" {
			withEvent[e.Regarding.Name] = e.Note
		}
	}
	var missingEvents, missingReports []string
	for i := range runs {
		if note, ok := withEvent[name(i)]; !ok || !strings.Contains(note, fmt.Sprintf("%d in the last", perRun)) {
			missingEvents = append(missingEvents, fmt.Sprintf("%s (%q)", name(i), note))
		}
		if _, total := resultCounts(t, reports, name(i)); total != perRun {
			missingReports = append(missingReports, fmt.Sprintf("%s (%d)", name(i), total))
		}
	}
	t.Logf("%d replicas SIGTERMed after %d audited requests each in %s; %d/%d Events and %d/%d ClusterReports stored",
		runs, perRun, took.Round(time.Millisecond), runs-len(missingEvents), runs, runs-len(missingReports), runs)
	if len(missingEvents) > 0 {
		t.Errorf("no WouldDeny Event with the run's %d records for %s", perRun, strings.Join(missingEvents, ", "))
	}
	if len(missingReports) > 0 {
		t.Errorf("the ClusterReport does not count the run's %d would-denies for %s", perRun, strings.Join(missingReports, ", "))
	}
}

// TestHardeningBundleAndRelabelRules through kube-apiserver: a caBundle
// whose only certificate carries PEM headers (kube-apiserver would trust
// nothing in it) is a ca-mismatch even though it is the owner's CA, the
// owner's CA beside a headered foreign block is admitted, and an unmanaged
// configuration relabelled into a selector mapping is decided by it.
func TestHardeningBundleAndRelabelRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t, framework.Options{Config: hardeningConfig()})
	ctx := t.Context()
	f.create(t, framework.Validating, enforcedName, f.ownerCA.PEM)
	headered := func(p []byte) []byte {
		block, _ := pem.Decode(p)
		block.Headers = map[string]string{"Proc-Type": "4,ENCRYPTED"}
		return pem.EncodeToMemory(block)
	}
	_, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, headered(f.ownerCA.PEM))
	requireDenied(t, err, "ca-mismatch", "holds no certificate kube-apiserver can use", "carries PEM headers")
	foreign := framework.NewCA(t, "headered-foreign")
	if _, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, append(append([]byte{}, f.ownerCA.PEM...), headered(foreign.PEM)...)); err != nil {
		t.Errorf("the owner's CA beside a headered block kube-apiserver skips was denied: %v", err)
	}

	f.create(t, framework.Validating, "unlabelled-webhooks", f.ownerCA.PEM)
	_, err = f.intruder.Mutate(ctx, framework.Validating, "unlabelled-webhooks", metav1.UpdateOptions{}, func(m *metav1.ObjectMeta, _ [][]byte) {
		m.Labels = map[string]string{guardedLabel: "true"}
	})
	requireDenied(t, err, "not-owner", `mapping "labelled"`)
	if _, err := f.owner.Mutate(ctx, framework.Validating, "unlabelled-webhooks", metav1.UpdateOptions{}, func(m *metav1.ObjectMeta, _ [][]byte) {
		m.Labels = map[string]string{guardedLabel: "true"}
	}); err != nil {
		t.Errorf("the selector mapping's writer could not label the configuration into its mapping: %v", err)
	}
}
