package perf

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	"github.com/webhook-guard/webhook-guard/policy"
)

// Bounds of the load test: every phase is capped in time and count, and all
// traffic goes to 127.0.0.1.
const (
	closedLoopPhase = 10 * time.Second
	openLoopRate    = 1000 // requests/s
	openLoopPhase   = 30 * time.Second
	// apiRounds × 3 blocks (no webhook, floor, guard) × apiBlock owner
	// UPDATEs through kube-apiserver.
	apiRounds = 5
	apiBlock  = 40
)

// TestLoad runs the built `webhook-guard serve` under a real kube-apiserver
// (e2e/framework) and loads it over TLS on loopback: closed loops at
// concurrency 1, 8 and 64 with keep-alive, then an open loop at 1,000
// requests/s; then it times owner UPDATEs through kube-apiserver with and
// without the static guard. It prints the tables `make loadtest` shows.
func TestLoad(t *testing.T) {
	f := fixtureFor(t, 5)
	cfg, err := policy.Load([]byte(GuardConfigYAML))
	if err != nil {
		t.Fatal(err)
	}
	// As deployed: info-level logs (the framework's default is debug,
	// which logs every allow).
	guardArgs := []string{"--log-level", "info"}
	profile := os.Getenv("LOADTEST_CPUPROFILE")
	pprofAddr := ""
	if profile != "" {
		pprofAddr = freeLoopbackAddr(t)
		guardArgs = append(guardArgs, "--pprof-bind-address", pprofAddr)
	}
	// The Go runtime settings the chart gives the guard container;
	// LOADTEST_GUARD_ENV="GOGC=300 ..." replaces them, to try others.
	guardEnv := chartGoEnv(t)
	if v, ok := os.LookupEnv("LOADTEST_GUARD_ENV"); ok {
		guardEnv = strings.Fields(v)
	}
	env := framework.Start(t, framework.Options{Config: &cfg.Spec, GuardArgs: guardArgs, GuardEnv: guardEnv})
	env.EnsureNamespace(t, OwnerNamespace)
	if _, err := env.AdminKube.CoreV1().Secrets(OwnerNamespace).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: CASecret},
		Data:       OwnerSecret(OwnerNamespace, CASecret, f).Data,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	guardPID := env.Guard.PID()
	floorURL, floorPID := startFloorServer(t, filepath.Join(env.Dir, "certs"))

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(env.GuardCA.PEM)
	// HTTP/2, as kube-apiserver calls webhooks (the guard offers h2 and
	// http/1.1): requests share connections instead of each burst opening
	// new ones and paying a TLS handshake.
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     time.Minute,
	}
	t.Cleanup(transport.CloseIdleConnections)
	client := &http.Client{Transport: transport, Timeout: 10 * time.Second}
	sender := func(url string) func(context.Context) error {
		return func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(f.Review))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"allowed":true`)) {
				return fmt.Errorf("%d %s", resp.StatusCode, body)
			}
			if resp.ProtoMajor != 2 {
				return fmt.Errorf("answered over %s, want HTTP/2", resp.Proto)
			}
			return nil
		}
	}
	servers := []struct {
		name string
		pid  int
		send func(context.Context) error
	}{
		{"floor", floorPID, sender(floorURL)},
		{"guard", guardPID, sender(env.Guard.URL())},
	}
	// LOADTEST_API_ONLY=1 skips the direct loads: only the UPDATEs through
	// kube-apiserver.
	if os.Getenv("LOADTEST_API_ONLY") != "" {
		fmt.Fprintln(os.Stdout, apiServerLatency(t, env, f, floorURL))
		return
	}
	for _, s := range servers {
		if err := s.send(t.Context()); err != nil {
			t.Fatalf("the %s server did not allow the generated review: %v", s.name, err)
		}
	}

	// Each load runs against the floor server, then the guard, back to
	// back, so both see the same machine.
	var rows []loadRow
	for _, c := range []int{1, 8, 64} {
		for _, s := range servers {
			rows = append(rows, measure(t, s.pid, fmt.Sprintf("%s, closed loop, concurrency %d", s.name, c), func() (lat []time.Duration, errs int64) {
				return closedLoop(t.Context(), c, closedLoopPhase, s.send)
			}))
		}
	}
	for _, s := range servers {
		rows = append(rows, measure(t, s.pid, fmt.Sprintf("%s, open loop, %d req/s for %s", s.name, openLoopRate, openLoopPhase), func() ([]time.Duration, int64) {
			if profile != "" && s.name == "guard" {
				done := cpuProfile(t, pprofAddr, openLoopPhase-5*time.Second, profile)
				defer done()
			}
			lat, errs, note := openLoop(t.Context(), openLoopRate, openLoopPhase, s.send)
			openLoopNotes[s.name] = note
			return lat, errs
		}))
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\nwebhook-guard serve over TLS on 127.0.0.1 (env %v), 5-entry UPDATE review (%d bytes), %d cores shared with the client and kube-apiserver\n", guardEnv, len(f.Review), runtime.NumCPU())
	b.WriteString("floor: a server in its own process with the same TLS and HTTP/2 that only decodes the review (json-v2) and allows; guard ×: the guard's p99 over the floor's in the same load\n\n")
	b.WriteString("| load | requests | errors | req/s | p50 | p99 | p99.9 | guard × floor p99 | server CPU/req | peak RSS |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, r := range rows {
		ratio := ""
		if i%2 == 1 && rows[i-1].p99 > 0 {
			ratio = fmt.Sprintf("%.2f×", float64(r.p99)/float64(rows[i-1].p99))
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.0f | %s | %s | %s | %s | %s | %.1f MiB |\n", r.name, r.n, r.errors, r.rps,
			ms(r.p50), ms(r.p99), ms(r.p999), ratio, us(r.cpuPerReq), r.peakRSS)
	}
	for _, name := range []string{"floor", "guard"} {
		fmt.Fprintf(&b, "\n%s open loop: %s", name, openLoopNotes[name])
	}
	b.WriteString("\n")
	b.WriteString(apiServerLatency(t, env, f, floorURL))
	fmt.Fprintln(os.Stdout, b.String())
}

type loadRow struct {
	name                string
	n, errors           int64
	rps                 float64
	p50, p99, p999      time.Duration
	cpuPerReq           time.Duration
	peakRSS             float64 // MiB
	elapsed             time.Duration
	cpuBefore, cpuAfter time.Duration
}

// measure runs one phase and reads the server's CPU time and peak RSS
// around it (the peak is reset before the phase through clear_refs).
func measure(t *testing.T, pid int, name string, run func() ([]time.Duration, int64)) loadRow {
	t.Helper()
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0o600)
	r := loadRow{name: name, cpuBefore: cpuTime(t, pid)}
	start := time.Now()
	lat, errs := run()
	r.elapsed = time.Since(start)
	r.cpuAfter = cpuTime(t, pid)
	r.peakRSS = peakRSS(t, pid)
	slices.Sort(lat)
	r.n, r.errors = int64(len(lat))+errs, errs
	r.rps = float64(len(lat)) / r.elapsed.Seconds()
	r.p50, r.p99, r.p999 = quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 0.999)
	if len(lat) > 0 {
		r.cpuPerReq = (r.cpuAfter - r.cpuBefore) / time.Duration(len(lat))
	}
	t.Logf("%s: %d requests, %d errors, %.0f req/s, p50 %s p99 %s p99.9 %s, server CPU %s/req, peak RSS %.1f MiB",
		name, r.n, r.errors, r.rps, r.p50, r.p99, r.p999, r.cpuPerReq, r.peakRSS)
	if errs > 0 {
		t.Errorf("%s: %d requests failed; the first: %v", name, errs, takeErr())
	}
	return r
}

// chartGoEnv is the GOGC the chart's values.yaml sets on the guard container
// (goRuntime.gogc); GOMEMLIMIT follows the container's memory limit, which a
// process here does not have.
func chartGoEnv(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "charts", "webhook-guard", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		GoRuntime struct {
			GOGC string `json:"gogc"`
		} `json:"goRuntime"`
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatalf("charts/webhook-guard/values.yaml: %v", err)
	}
	if values.GoRuntime.GOGC == "" {
		return nil
	}
	return []string{"GOGC=" + values.GoRuntime.GOGC}
}

// openLoopNotes say, per server, when the open loop's slow requests were
// due (a stall of the machine shows as one burst).
var openLoopNotes = map[string]string{}

// firstErr keeps the first failure of a phase, for the report.
var firstErr struct {
	sync.Mutex
	msg string
}

func noteErr(err error) {
	firstErr.Lock()
	defer firstErr.Unlock()
	if firstErr.msg == "" {
		firstErr.msg = err.Error()
	}
}

func takeErr() string {
	firstErr.Lock()
	defer firstErr.Unlock()
	msg := firstErr.msg
	firstErr.msg = ""
	return msg
}

// closedLoop runs c clients, each sending the next request when the last
// one answered, for d.
func closedLoop(ctx context.Context, c int, d time.Duration, send func(context.Context) error) ([]time.Duration, int64) {
	var errs atomic.Int64
	var mu sync.Mutex
	var all []time.Duration
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			var lat []time.Duration
			for time.Now().Before(deadline) && ctx.Err() == nil {
				start := time.Now()
				if err := send(ctx); err != nil {
					errs.Add(1)
					noteErr(err)
					continue
				}
				lat = append(lat, time.Since(start))
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return all, errs.Load()
}

// openLoop sends rate requests per second for d whatever the answers do,
// each timed from when it was due (so a stall is not hidden by sending less).
func openLoop(ctx context.Context, rate int, d time.Duration, send func(context.Context) error) (ok []time.Duration, errs int64, note string) {
	n := int(d.Seconds() * float64(rate))
	interval := time.Second / time.Duration(rate)
	lat := make([]time.Duration, n)
	failed := make([]bool, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait)
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			if err := send(ctx); err != nil {
				failed[i] = true
				noteErr(err)
				return
			}
			lat[i] = time.Since(due)
		})
	}
	wg.Wait()
	worst, slow := 0, 0
	for i := range n {
		if failed[i] {
			errs++
		} else if lat[i] > 0 {
			ok = append(ok, lat[i])
			if lat[i] > lat[worst] {
				worst = i
			}
			if lat[i] > 10*time.Millisecond {
				slow++
			}
		}
	}
	note = fmt.Sprintf("%d of %d requests over 10 ms; the slowest was due %s into the run and took %s",
		slow, n, time.Duration(worst)*interval, lat[worst].Round(time.Millisecond))
	return ok, errs, note
}

// apiServerLatency times owner UPDATEs (a caBundle rotation of all five
// entries, alternating between the two CAs) through kube-apiserver, in
// rotating blocks: without a webhook (the static manifest file removed:
// kube-apiserver drops it within milliseconds), with the same manifest
// pointed at the floor server (the least any webhook costs through
// kube-apiserver: its webhook call, TLS, HTTP/2, decode and allow), and with
// the guard. It reports the medians and their ratios, and how the guard's
// added time splits between its own handler and kube-apiserver's side.
func apiServerLatency(t *testing.T, env *framework.Env, f *Fixture, floorURL string) string {
	t.Helper()
	ctx := t.Context()
	admin := env.AdminClient(t)
	bundles := make([][]byte, f.Entries)
	for i := range bundles {
		bundles[i] = f.Old.PEM
	}
	admin.MustCreate(t, framework.Spec{Kind: framework.Validating, Name: ConfigName, Bundles: bundles})
	owner := env.Client(t, framework.ServiceAccountUser(OwnerNamespace, OwnerSA))
	api := owner.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	obj, err := api.Get(ctx, ConfigName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(env.Dir, "admission", "static", "webhook-guard.static.k8s.io.yaml")
	guardManifest := env.Rendered[filepath.Join("static", "webhook-guard.static.k8s.io.yaml")]
	if !bytes.Contains(guardManifest, []byte(env.Guard.URL())) {
		t.Fatalf("the rendered static manifest does not call %s:\n%s", env.Guard.URL(), guardManifest)
	}
	floorManifest := bytes.ReplaceAll(guardManifest, []byte(env.Guard.URL()), []byte(floorURL))
	decisions := func() float64 {
		return env.Guard.Metric(t, "webhook_guard_decisions_total", map[string]string{"mapping": "koordinator"})
	}
	webhookCalls := func() float64 {
		return apiServerMetrics(t, env).Sum("apiserver_admission_webhook_admission_duration_seconds_count", map[string]string{"type": "validating"})
	}

	// Where the guard's added time goes: its own handler time
	// (controller-runtime's webhook latency histogram) within kube-apiserver's
	// whole webhook call (its admission webhook duration histogram, which
	// also covers building and encoding the review and decoding the answer).
	var guardHandler, guardCall, floorCall split
	lat := map[string][]time.Duration{}
	flip := false
	block := func(target string) {
		switch target {
		case "none":
			if err := os.Remove(manifest); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		case "floor":
			framework.WriteFileAtomic(t, manifest, floorManifest)
		case "guard":
			framework.WriteFileAtomic(t, manifest, guardManifest)
		}
		time.Sleep(2 * time.Second) // kube-apiserver's file watch
		decided, called := decisions(), webhookCalls()
		switch target {
		case "floor":
			floorCall.start(apiServerMetrics(t, env), "apiserver_admission_webhook_admission_duration_seconds", map[string]string{"type": "validating"})
		case "guard":
			guardHandler.start(env.Guard.Metrics(t), "controller_runtime_webhook_latency_seconds", nil)
			guardCall.start(apiServerMetrics(t, env), "apiserver_admission_webhook_admission_duration_seconds", map[string]string{"type": "validating"})
		}
		for range apiBlock {
			flip = !flip
			ca := f.Old.PEM
			if flip {
				ca = f.New.PEM
			}
			for i := range obj.Webhooks {
				obj.Webhooks[i].ClientConfig.CABundle = ca
			}
			start := time.Now()
			obj, err = api.Update(ctx, obj, metav1.UpdateOptions{})
			elapsed := time.Since(start)
			if err != nil {
				t.Fatalf("owner UPDATE (webhook: %s): %v", target, err)
			}
			lat[target] = append(lat[target], elapsed)
		}
		switch target {
		case "floor":
			floorCall.stop(apiServerMetrics(t, env))
		case "guard":
			guardHandler.stop(env.Guard.Metrics(t))
			guardCall.stop(apiServerMetrics(t, env))
		}
		decided, called = decisions()-decided, webhookCalls()-called
		if want := map[string]bool{"none": false, "floor": true, "guard": true}[target]; want != (called >= apiBlock) || (!want && called > 0) {
			t.Fatalf("kube-apiserver made %g webhook calls for %d UPDATEs with webhook %q", called, apiBlock, target)
		}
		if (target == "guard") != (decided >= apiBlock) || (target != "guard" && decided > 0) {
			t.Fatalf("the guard decided %g of %d UPDATEs with webhook %q", decided, apiBlock, target)
		}
	}
	for range apiRounds {
		for _, target := range []string{"none", "floor", "guard"} {
			block(target)
		}
	}
	med := map[string]time.Duration{}
	p99 := map[string]time.Duration{}
	for target, l := range lat {
		slices.Sort(l)
		med[target], p99[target] = quantile(l, 0.5), quantile(l, 0.99)
	}
	return fmt.Sprintf("\nowner UPDATE through kube-apiserver (%d each, rotating blocks of %d), median (p99):\n"+
		"  without a webhook %s (%s); floor webhook %s (%s), %.2f×; webhook-guard %s (%s), %.2f×\n"+
		"  kube-apiserver's webhook call, mean: floor %s, guard %s, of which the guard's own handler %s\n",
		len(lat["guard"]), apiBlock,
		ms(med["none"]), ms(p99["none"]),
		ms(med["floor"]), ms(p99["floor"]), float64(med["floor"])/float64(med["none"]),
		ms(med["guard"]), ms(p99["guard"]), float64(med["guard"])/float64(med["none"]),
		ms(floorCall.mean()), ms(guardCall.mean()), ms(guardHandler.mean()))
}

// split accumulates a histogram's _sum and _count over several intervals.
type split struct {
	name        string
	labels      map[string]string
	sum0, count float64
	sum, n      float64
}

func (s *split) start(m framework.Metrics, name string, labels map[string]string) {
	s.name, s.labels = name, labels
	s.sum0, s.count = m.Sum(name+"_sum", labels), m.Sum(name+"_count", labels)
}

func (s *split) stop(m framework.Metrics) {
	s.sum += m.Sum(s.name+"_sum", s.labels) - s.sum0
	s.n += m.Sum(s.name+"_count", s.labels) - s.count
}

func (s *split) mean() time.Duration {
	if s.n == 0 {
		return 0
	}
	return time.Duration(s.sum / s.n * float64(time.Second))
}

// apiServerMetrics scrapes kube-apiserver's /metrics as the admin.
func apiServerMetrics(t *testing.T, env *framework.Env) framework.Metrics {
	t.Helper()
	data, err := env.AdminKube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatalf("scrape kube-apiserver metrics: %v", err)
	}
	m, err := framework.ParseMetrics(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("parse kube-apiserver metrics: %v", err)
	}
	return m
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1))]
}

// cpuTime is the process's user+system CPU time from /proc/<pid>/stat.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name, which is in parentheses.
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * (time.Second / 100) // USER_HZ is 100 on Linux
}

// peakRSS is VmHWM from /proc/<pid>/status, in MiB.
func peakRSS(t *testing.T, pid int) float64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }
