package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
)

// demo is the walkthrough's state: what one step starts or creates, a
// later step uses. Each step is a method, run in order by run.
type demo struct {
	root, bin, guardBin, work string
	c                         cleanups

	certDir, cfgPath, renderDir string
	port, metricsPort           int

	admin              *rest.Config
	adminClient        *kubernetes.Clientset
	owner, intruder    *user
	guardKubeconfig    string
	guardLog           *syncBuffer
	ownerCA, foreignCA *testpki.CA
}

func run(ctx context.Context) error {
	d, err := newDemo()
	if err != nil {
		return err
	}
	defer d.c.run()
	steps := []func(context.Context) error{
		d.servingCertificate, d.renderStatic, d.startControlPlane, d.startGuard,
		d.createOwned, d.ownerRotates, d.intruderDenied, d.auditMode, d.recorded, d.breakGlass,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	sayf("\n\033[1mDone.\033[0m Next: docs/install.md puts it on a cluster; `make test` runs every suite.")
	return ctx.Err()
}

// newDemo finds the binaries and makes the work directory, removed by the
// cleanups.
func newDemo() (*demo, error) {
	root, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	d := &demo{root: root, bin: filepath.Join(root, "bin")}
	// The e2e test of the demo runs it with the guard it built itself.
	d.guardBin = os.Getenv("WEBHOOK_GUARD_BINARY")
	if d.guardBin == "" {
		d.guardBin = filepath.Join(d.bin, "webhook-guard")
	}
	for _, b := range []string{filepath.Join(d.bin, "kube-apiserver"), filepath.Join(d.bin, "etcd"), d.guardBin} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("%s is missing: run `make demo` (it runs `make tools build` first)", b)
		}
	}
	d.work, err = os.MkdirTemp("", "webhook-guard-demo-")
	if err != nil {
		return nil, err
	}
	d.c.add(func() {
		os.RemoveAll(d.work)
		sayf("\ncleaned up: stopped the guard, kube-apiserver and etcd, removed %s", d.work)
	})
	return d, nil
}

func (d *demo) servingCertificate(ctx context.Context) error {
	step(1, "The guard's serving certificate, as cert-manager would issue it")
	guardCA, err := testpki.NewCA("webhook-guard-ca")
	if err != nil {
		return err
	}
	leaf, err := guardCA.Issue("webhook-guard", "localhost", "127.0.0.1")
	if err != nil {
		return err
	}
	d.certDir = filepath.Join(d.work, "tls")
	if err := testpki.WriteSecretFiles(d.certDir, guardCA, leaf); err != nil {
		return err
	}
	sayf("wrote %s/{tls.crt,tls.key,ca.crt}: the layout of a cert-manager Secret the chart mounts", d.certDir)

	d.port, err = freePort(ctx)
	if err != nil {
		return err
	}
	d.cfgPath = filepath.Join(d.work, "guard.yaml")
	if err := os.WriteFile(d.cfgPath, []byte(guardConfig), 0o644); err != nil {
		return err
	}
	sayf("owner mappings (%s):\n%s", d.cfgPath, indent(guardConfig))
	return nil
}

func (d *demo) renderStatic(ctx context.Context) error {
	step(2, "Render the static webhook: the only way kube-apiserver calls a guard for webhook configurations")
	d.renderDir = filepath.Join(d.work, "admission")
	url := fmt.Sprintf("https://127.0.0.1:%d/validate", d.port)
	out, err := exec.CommandContext(ctx, d.guardBin, "render", "static-manifest",
		"--url", url, "--ca-file", filepath.Join(d.certDir, "ca.crt"), "--config", d.cfgPath, "--output-dir", d.renderDir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("render: %w\n%s", err, out)
	}
	sayf("kube-apiserver --admission-control-config-file=%s/admission-configuration.yaml", d.renderDir)
	sayf("static manifest %s/static/webhook-guard.static.k8s.io.yaml (CA elided):", d.renderDir)
	static, _ := os.ReadFile(filepath.Join(d.renderDir, "static", "webhook-guard.static.k8s.io.yaml"))
	sayf("%s", indent(elideCA(string(static))))
	return nil
}

func (d *demo) startControlPlane(ctx context.Context) error {
	step(3, "Start etcd and kube-apiserver v1.37 (built from Go modules) with that admission configuration")
	apiLog := &syncBuffer{}
	reportCRDs, err := openReportsCRDs(ctx, d.root)
	if err != nil {
		return err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: d.bin, CRDInstallOptions: envtest.CRDInstallOptions{Paths: reportCRDs}}
	api := env.ControlPlane.GetAPIServer()
	api.Out, api.Err = apiLog, apiLog
	api.Configure().Set("admission-control-config-file", filepath.Join(d.renderDir, "admission-configuration.yaml"))
	start := time.Now()
	d.admin, err = env.Start()
	if err != nil {
		return fmt.Errorf("start kube-apiserver: %w\n--- kube-apiserver log ---\n%s", err, tail(apiLog.String(), 30))
	}
	d.c.add(func() { _ = env.Stop() })
	sayf("kube-apiserver is up at %s (%.1fs)", d.admin.Host, time.Since(start).Seconds())

	d.adminClient = kubernetes.NewForConfigOrDie(d.admin)
	if d.owner, err = userClient(ctx, env, d.admin, "koordinator-system", "koord-manager"); err != nil {
		return err
	}
	if d.intruder, err = userClient(ctx, env, d.admin, "kube-system", "legacy-cert-controller"); err != nil {
		return err
	}
	d.guardKubeconfig, err = guardIdentity(ctx, env, d.admin, d.adminClient, d.work)
	return err
}

func (d *demo) startGuard(ctx context.Context) error {
	step(4, "Start webhook-guard serve on 127.0.0.1 (what the static-shape DaemonSet runs on each control-plane node)")
	d.metricsPort, _ = freePort(ctx)
	healthPort, _ := freePort(ctx)
	d.guardLog = &syncBuffer{}
	guard := exec.Command(d.guardBin, "serve", //nolint:noctx // the cleanup stops it with SIGTERM, as the kubelet does
		"--config", d.cfgPath, "--cert-dir", d.certDir,
		"--bind-address", "127.0.0.1", "--port", fmt.Sprint(d.port), "--kubeconfig", d.guardKubeconfig,
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", d.metricsPort), "--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", healthPort),
		"--records-flush-interval", "2s") // the default is 30s; the demo should not wait that long
	guard.Stdout, guard.Stderr = d.guardLog, d.guardLog
	if err := guard.Start(); err != nil {
		return err
	}
	d.c.add(func() { _ = guard.Process.Signal(syscall.SIGTERM); _ = guard.Wait() })
	if err := waitReady(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort)); err != nil {
		return fmt.Errorf("guard not ready: %w\n--- guard log ---\n%s", err, tail(d.guardLog.String(), 30))
	}
	sayf("ready: config and certificate loaded")
	return nil
}

func (d *demo) createOwned(ctx context.Context) error {
	step(5, "The owner's CA lives in a Secret; the owner creates its webhook configurations")
	var err error
	if d.ownerCA, err = testpki.NewCA("koordinator-webhook-ca"); err != nil {
		return err
	}
	if d.foreignCA, err = testpki.NewCA("replica-7-self-signed-ca"); err != nil {
		return err
	}
	if err := setup(ctx, d.adminClient, d.ownerCA.PEM); err != nil {
		return err
	}
	for _, name := range []string{"koord-validating-webhook-configuration", "legacy-validating-webhook-configuration"} {
		if _, err := d.owner.clientset.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc(name, d.ownerCA.PEM), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
	}
	sayf("Secret koordinator-system/webhook-certs holds ca.crt; koord-manager created koord-validating-webhook-configuration\nand legacy-validating-webhook-configuration")
	return nil
}

func (d *demo) ownerRotates(ctx context.Context) error {
	step(6, "The owner rotates its own CA into the caBundle: allowed")
	if _, err := setCABundle(ctx, d.owner, "koord-validating-webhook-configuration", d.ownerCA.PEM); err != nil {
		return fmt.Errorf("the owner's write was rejected: %w", err)
	}
	sayf("koord-manager (the declared writer) wrote the CA from its Secret: the API server accepted it")
	return nil
}

func (d *demo) intruderDenied(ctx context.Context) error {
	step(7, "Another controller writes its own CA (the 8-replica incident): denied")
	_, err := setCABundle(ctx, d.intruder, "koord-validating-webhook-configuration", d.foreignCA.PEM)
	if err == nil {
		return errors.New("the intruder's write was accepted; the guard is not enforcing")
	}
	sayf("kube-apiserver answered the intruder with:\n%s", indent(wrap(err.Error(), 110)))
	_, err = setCABundle(ctx, d.owner, "koord-validating-webhook-configuration", d.foreignCA.PEM)
	if err == nil {
		return errors.New("the owner's foreign CA was accepted")
	}
	sayf("and even the owner may not write a CA that is not in its Secret:\n%s", indent(wrap(err.Error(), 110)))
	return nil
}

func (d *demo) auditMode(ctx context.Context) error {
	step(8, "Audit mode: the legacy mapping only records what it would deny")
	warnings, err := setCABundle(ctx, d.intruder, "legacy-validating-webhook-configuration", d.foreignCA.PEM)
	if err != nil {
		return fmt.Errorf("the audit-mode write was rejected: %w", err)
	}
	sayf("the write went through, and kubectl would print:")
	for _, w := range warnings {
		sayf("  Warning: %s", w)
	}
	return nil
}

// recorded shows audit mode's three records: metrics, log lines and the
// ClusterReports `review` reads.
func (d *demo) recorded(ctx context.Context) error {
	step(9, "What audit mode recorded")
	metrics, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", d.metricsPort))
	if err != nil {
		return err
	}
	for line := range strings.SplitSeq(metrics, "\n") {
		if strings.HasPrefix(line, "webhook_guard_decisions_total") || strings.HasPrefix(line, "webhook_guard_records_total") {
			sayf("  %s", line)
		}
	}
	sayf("the guard's record lines (its log, kept by your log pipeline):")
	sc := bufio.NewScanner(strings.NewReader(d.guardLog.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"decision recorded"`) {
			sayf("  %s", truncate(sc.Text(), 300))
		}
	}
	sayf("the durable records: one OpenReports ClusterReport per configuration, flushed every 2s here;\n`webhook-guard review` reads them and says what to change (exit 1: something would be denied):")
	time.Sleep(3 * time.Second)
	adminKubeconfig := filepath.Join(d.work, "admin.kubeconfig")
	if err := writeKubeconfig(d.admin, adminKubeconfig); err != nil {
		return err
	}
	reviewOut, reviewErr := exec.CommandContext(ctx, d.guardBin, "review", "--kubeconfig", adminKubeconfig).CombinedOutput()
	var exitErr *exec.ExitError
	somethingDenied := errors.As(reviewErr, &exitErr) && exitErr.ExitCode() == 1 // review's documented exit code
	if reviewErr != nil && !somethingDenied {
		return fmt.Errorf("webhook-guard review: %w\n%s", reviewErr, reviewOut)
	}
	sayf("%s", indent(string(reviewOut)))
	return nil
}

func (d *demo) breakGlass(ctx context.Context) error {
	step(10, "Break-glass: a cluster administrator (system:masters) may always write, and is recorded")
	adminWarnings := &warningRecorder{}
	adminCfg := rest.CopyConfig(d.admin)
	adminCfg.WarningHandler = adminWarnings
	breakGlass := &user{clientset: kubernetes.NewForConfigOrDie(adminCfg), cfg: adminCfg, warnings: adminWarnings}
	warnings, err := setCABundle(ctx, breakGlass, "koord-validating-webhook-configuration", d.foreignCA.PEM)
	if err != nil {
		return fmt.Errorf("break-glass write rejected: %w", err)
	}
	sayf("allowed, with:")
	for _, w := range warnings {
		sayf("  Warning: %s", w)
	}
	sayf("break-glass writes go to a second static webhook entry with failurePolicy Ignore: recorded while the\nguard is up, never blocked while it is down, so an administrator is never locked out by a guard outage")
	_, err = setCABundle(ctx, breakGlass, "koord-validating-webhook-configuration", d.ownerCA.PEM)
	return err
}
