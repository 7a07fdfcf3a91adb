package framework

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

var (
	buildMu   sync.Mutex
	builtBins = map[string]*builtBinary{}
	buildDir  string
)

// builtBinary is one `go build` of a main package, done once per process.
type builtBinary struct {
	once sync.Once
	path string
	err  error
}

// GuardBinary builds cmd/webhook-guard once per test process (into a
// temporary directory removed by Cleanup) and returns its path. Set
// WEBHOOK_GUARD_BINARY to test a prebuilt binary instead.
func GuardBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("WEBHOOK_GUARD_BINARY"); p != "" {
		return p
	}
	return BuildBinary(t, "./cmd/webhook-guard")
}

// BuildBinary builds the main package pkg (a path relative to the repository
// root) once per test process, into a temporary directory removed by
// Cleanup, and returns the binary's path. The real writers the suite runs
// (cert-manager's cainjector, the cert-controller rotator) are built this
// way, each in its own process, so that their process-wide state (feature
// gates, loggers) stays theirs. It builds in pkg's own directory, so that
// the module holding pkg (the root module for the guard, the e2e module for
// the writers) resolves it.
func BuildBinary(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	if buildDir == "" {
		dir, err := os.MkdirTemp("", "webhook-guard-e2e-bin-") //nolint:usetesting // shared by every test of the process; Cleanup removes it
		if err != nil {
			buildMu.Unlock()
			t.Fatal(err)
		}
		buildDir = dir
	}
	b, ok := builtBins[pkg]
	if !ok {
		b = &builtBinary{}
		builtBins[pkg] = b
	}
	dir := buildDir
	buildMu.Unlock()
	b.once.Do(func() {
		b.path = filepath.Join(dir, filepath.Base(pkg))
		cmd := exec.Command("go", "build", "-o", b.path, ".")
		cmd.Dir = filepath.Join(RepoRoot(), pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Cleanup removes what the framework left outside test directories (the
// built binaries). Call it from TestMain after m.Run.
func Cleanup() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

// Guard is a running `webhook-guard serve` process.
type Guard struct {
	env *Env
	// Bin is the webhook-guard binary.
	Bin string
	// ConfigPath is the GuardConfig file; CertDir the serving certificate
	// directory (cert-manager Secret layout); Kubeconfig the guard's identity.
	ConfigPath, CertDir, Kubeconfig string
	// Port serves the webhook on 127.0.0.1.
	Port int
	// MetricsAddr and HealthAddr are host:port.
	MetricsAddr, HealthAddr string
	// Log holds the process's stdout and stderr (JSON lines).
	Log *Buffer
	// ExtraArgs are appended to the `serve` arguments (e.g. --ca-max-stale,
	// --leader-elect).
	ExtraArgs []string
	// ExtraEnv ("NAME=value") is added to the process's environment.
	ExtraEnv []string

	// movablePort lets Start pick another webhook port when the one chosen
	// was taken meanwhile; false when a manifest already points at Port.
	movablePort bool

	proc process
}

// URL is the webhook URL the static manifest points at.
func (g *Guard) URL() string { return fmt.Sprintf("https://127.0.0.1:%d%s", g.Port, WebhookPath) }

// Args are the `serve` arguments.
func (g *Guard) Args() []string {
	return append([]string{"serve",
		"--config", g.ConfigPath,
		"--cert-dir", g.CertDir,
		"--bind-address", "127.0.0.1",
		"--port", strconv.Itoa(g.Port),
		"--metrics-bind-address", g.MetricsAddr,
		"--health-probe-bind-address", g.HealthAddr,
		"--kubeconfig", g.Kubeconfig,
		"--log-format", "json",
		"--log-level", "debug",
	}, g.ExtraArgs...)
}

// StartReplica starts another `serve` process with the same config,
// certificate and identity on its own ports, as a second replica of the
// Deployment (kube-apiserver keeps calling the first; send AdmissionReviews
// to the replica's URL directly).
func (e *Env) StartReplica(t testing.TB) *Guard {
	t.Helper()
	g := &Guard{
		env: e, Bin: e.Guard.Bin, ConfigPath: e.Guard.ConfigPath, CertDir: e.Guard.CertDir, Kubeconfig: e.Guard.Kubeconfig,
		Port: FreePort(t), MetricsAddr: fmt.Sprintf("127.0.0.1:%d", FreePort(t)), HealthAddr: fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		Log: &Buffer{}, ExtraArgs: e.Guard.ExtraArgs, ExtraEnv: e.Guard.ExtraEnv,
		// Nothing points at a replica's webhook port yet, so it may move too.
		movablePort: true,
	}
	g.Start(t)
	return g
}

// Start runs the guard and waits until /readyz answers 200. The process is
// stopped by t.Cleanup; its log is printed if the test failed.
//
// FreePort's ports are only free "a moment ago": parallel tests can take one
// before the guard binds it. When the guard exits with "address already in
// use", Start picks fresh metrics and health ports (and a webhook port, when
// nothing points at it yet) and tries again, at most three times.
func (g *Guard) Start(t testing.TB) {
	t.Helper()
	const attempts = 3
	for attempt := 1; ; attempt++ {
		err := g.start(t)
		if err == nil {
			return
		}
		if !errors.Is(err, errPortTaken) || attempt == attempts {
			t.Fatal(err)
		}
		t.Logf("webhook-guard attempt %d: %v; retrying on fresh ports", attempt, err)
		g.Log.Reset()
		g.MetricsAddr = fmt.Sprintf("127.0.0.1:%d", FreePort(t))
		g.HealthAddr = fmt.Sprintf("127.0.0.1:%d", FreePort(t))
		if g.movablePort {
			g.Port = FreePort(t)
		}
	}
}

// errPortTaken marks a guard that exited because a port it was given had
// been taken since FreePort chose it.
var errPortTaken = errors.New("a port was taken before the guard bound it")

// start runs the guard once. It returns an error when the guard exits or is
// not ready within 30 s, having stopped it.
func (g *Guard) start(t testing.TB) error {
	t.Helper()
	cmd, done, err := g.proc.start(g.Bin, g.Args(), g.ExtraEnv, g.Log)
	if err != nil {
		return fmt.Errorf("start webhook-guard serve: %w", err)
	}

	t.Cleanup(func() {
		// Stopped first: a guard that does not exit in time fails the
		// test in Stop, and its log (shutdown included) says why; so does
		// a slow shutdown's.
		start := time.Now()
		g.Stop(t)
		if t.Failed() || time.Since(start) > slowStop {
			t.Logf("--- webhook-guard log (last 40 lines) ---\n%s", g.Log.Tail(40))
		}
	})

	deadline := time.Now().Add(30 * time.Second)
	client := &http.Client{Timeout: time.Second}
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-done:
			g.Stop(t)
			log := g.Log.Tail(40)
			err := fmt.Errorf("webhook-guard serve exited before it was ready (%v): %s\n--- log ---\n%s", cmd.ProcessState, strings.Join(g.Args(), " "), log)
			if strings.Contains(log, "address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		default:
		}
		resp, err := client.Get("http://" + g.HealthAddr + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	g.Stop(t)
	return fmt.Errorf("webhook-guard did not become ready within 30s (GET /readyz: %s)\n--- log ---\n%s", last, g.Log.Tail(40))
}

// Stop terminates the guard (SIGTERM, then SIGKILL after the grace
// period). It is safe to call more than once.
func (g *Guard) Stop(t testing.TB) {
	t.Helper()
	g.proc.stop(t, "webhook-guard")
}

// terminationGracePeriod is what Kubernetes gives a pod between SIGTERM
// and SIGKILL by default (the chart keeps the default): the time a process
// must exit in. The guard's own budget is below it (in-flight reviews 25 s,
// the records' last flush 10 s), so a test that waited less would fail a
// shutdown a pod completes.
const terminationGracePeriod = 30 * time.Second

// slowStop is a shutdown long enough to be worth a line in the test's log.
const slowStop = 5 * time.Second

// terminate sends cmd SIGTERM and waits for done (closed when it exited),
// killing it after terminationGracePeriod.
func terminate(t testing.TB, what string, cmd *exec.Cmd, done <-chan struct{}) {
	t.Helper()
	start := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		if took := time.Since(start); took > slowStop {
			t.Logf("%s took %s to exit after SIGTERM", what, took.Round(time.Millisecond))
		}
	case <-time.After(terminationGracePeriod):
		_ = cmd.Process.Kill()
		<-done
		t.Errorf("%s did not exit within %s of SIGTERM (a pod's termination grace period); killed it", what, terminationGracePeriod)
	}
}

// PID is the running process's id, 0 when it is not running (the load test
// reads its CPU time and peak RSS from /proc).
func (g *Guard) PID() int { return g.proc.pid() }

// Running reports whether the process is alive.
func (g *Guard) Running() bool { return g.proc.running() }

// Metrics scrapes the guard's Prometheus endpoint.
func (g *Guard) Metrics(t testing.TB) Metrics {
	t.Helper()
	return scrapeMetrics(t, "guard", "http://"+g.MetricsAddr+"/metrics")
}

// Metric is the sum of the samples of name whose labels include labels.
func (g *Guard) Metric(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	return g.Metrics(t).Sum(name, labels)
}

// Record is one "decision recorded" log line.
type Record struct {
	Mapping string `json:"mapping"`
	Rule    string `json:"rule"`
	Outcome string `json:"outcome"`
	Subject string `json:"subject"`
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	// Operation is CREATE, UPDATE or DELETE.
	Operation string `json:"operation"`
	DryRun    bool   `json:"dryRun"`
	Raw       string `json:"-"`
}

// Records are the decisions the guard recorded, from its JSON log.
func (g *Guard) Records() []Record {
	var out []Record
	sc := bufio.NewScanner(strings.NewReader(g.Log.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `"decision recorded"`) {
			continue
		}
		var r Record
		var probe struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &probe) != nil || probe.Msg != "decision recorded" {
			continue
		}
		_ = json.Unmarshal([]byte(line), &r)
		r.Raw = line
		out = append(out, r)
	}
	return out
}

// RecordsFor are the records about one configuration.
func (g *Guard) RecordsFor(name string) []Record {
	var out []Record
	for _, r := range g.Records() {
		if r.Name == name {
			out = append(out, r)
		}
	}
	return out
}

// RewriteConfig replaces the GuardConfig file atomically (temp file +
// rename, as a ConfigMap update reaches a pod) and waits until the guard
// counts a successful reload (webhook_guard_config_reloads_total{result="success"}).
func (g *Guard) RewriteConfig(t testing.TB, c *guardapi.GuardConfig) {
	t.Helper()
	g.RewriteConfigFile(t, MarshalConfig(t, c), "success")
}

// RewriteConfigFile writes raw bytes as the config file (temp file +
// rename) and waits until the guard counts a reload with the given result
// (success or error), so a test can also hand it a broken file.
func (g *Guard) RewriteConfigFile(t testing.TB, data []byte, result string) {
	t.Helper()
	labels := map[string]string{"result": result}
	before := g.Metric(t, "webhook_guard_config_reloads_total", labels)
	WriteFileAtomic(t, g.ConfigPath, data)
	Eventually(t, 15*time.Second, fmt.Sprintf("the guard counts a reload of its rewritten configuration with result %q", result), func() bool {
		return g.Metric(t, "webhook_guard_config_reloads_total", labels) > before
	})
}

// RenewCertificate writes a new serving certificate into the cert directory
// the way a renewed cert-manager Secret reaches a pod, and returns it.
func (g *Guard) RenewCertificate(t testing.TB, ca *CA) *ServingCert {
	t.Helper()
	leaf := ca.Issue(t, "webhook-guard")
	WriteSecretDir(t, g.CertDir, SecretData(ca, leaf))
	return leaf
}

// Eventually polls cond every 100 ms until it is true or timeout passes,
// then fails the test naming what it waited for.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
