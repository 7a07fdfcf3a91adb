// Command demo is `make demo`: it starts a real etcd and kube-apiserver (built
// into bin/ by `make tools`) and the built webhook-guard on loopback, wired
// through a static webhook manifest exactly as on a kubeadm control plane, and
// walks through what the guard does, narrating each step. It cleans up after
// itself, also on Ctrl-C.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/webhook-guard/webhook-guard/internal/testpki"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo failed: %v\n", err)
		os.Exit(1)
	}
}

// cleanups run in reverse order on every exit path.
type cleanups struct{ fns []func() }

func (c *cleanups) add(f func()) { c.fns = append(c.fns, f) }
func (c *cleanups) run() {
	for _, f := range slices.Backward(c.fns) {
		f()
	}
}

func sayf(format string, args ...any) { fmt.Fprintf(os.Stdout, format+"\n", args...) }

func step(n int, title string) { sayf("\n\033[1m== %d. %s\033[0m", n, title) }

func run(ctx context.Context) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	bin := filepath.Join(root, "bin")
	// The e2e test of the demo runs it with the guard it built itself.
	guardBin := os.Getenv("WEBHOOK_GUARD_BINARY")
	if guardBin == "" {
		guardBin = filepath.Join(bin, "webhook-guard")
	}
	for _, b := range []string{filepath.Join(bin, "kube-apiserver"), filepath.Join(bin, "etcd"), guardBin} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s is missing: run `make demo` (it runs `make tools build` first)", b)
		}
	}
	var c cleanups
	defer c.run()
	work, err := os.MkdirTemp("", "webhook-guard-demo-")
	if err != nil {
		return err
	}
	c.add(func() {
		os.RemoveAll(work)
		sayf("\ncleaned up: stopped the guard, kube-apiserver and etcd, removed %s", work)
	})

	step(1, "The guard's serving certificate, as cert-manager would issue it")
	guardCA, err := testpki.NewCA("webhook-guard-ca")
	if err != nil {
		return err
	}
	leaf, err := guardCA.Issue("webhook-guard", "localhost", "127.0.0.1")
	if err != nil {
		return err
	}
	certDir := filepath.Join(work, "tls")
	if err := testpki.WriteSecretFiles(certDir, guardCA, leaf); err != nil {
		return err
	}
	sayf("wrote %s/{tls.crt,tls.key,ca.crt}: the layout of a cert-manager Secret the chart mounts", certDir)

	port, err := freePort(ctx)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(work, "guard.yaml")
	if err := os.WriteFile(cfgPath, []byte(guardConfig), 0o644); err != nil {
		return err
	}
	sayf("owner mappings (%s):\n%s", cfgPath, indent(guardConfig))

	step(2, "Render the static webhook: the only way kube-apiserver calls a guard for webhook configurations")
	renderDir := filepath.Join(work, "admission")
	url := fmt.Sprintf("https://127.0.0.1:%d/validate", port)
	out, err := exec.CommandContext(ctx, guardBin, "render", "static-manifest",
		"--url", url, "--ca-file", filepath.Join(certDir, "ca.crt"), "--config", cfgPath, "--output-dir", renderDir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("render: %w\n%s", err, out)
	}
	sayf("kube-apiserver --admission-control-config-file=%s/admission-configuration.yaml", renderDir)
	sayf("static manifest %s/static/webhook-guard.static.k8s.io.yaml (CA elided):", renderDir)
	static, _ := os.ReadFile(filepath.Join(renderDir, "static", "webhook-guard.static.k8s.io.yaml"))
	sayf("%s", indent(elideCA(string(static))))

	step(3, "Start etcd and kube-apiserver v1.37 (built from Go modules) with that admission configuration")
	apiLog := &syncBuffer{}
	reportCRDs, err := openReportsCRDs(ctx, root)
	if err != nil {
		return err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: bin, CRDInstallOptions: envtest.CRDInstallOptions{Paths: reportCRDs}}
	api := env.ControlPlane.GetAPIServer()
	api.Out, api.Err = apiLog, apiLog
	api.Configure().Set("admission-control-config-file", filepath.Join(renderDir, "admission-configuration.yaml"))
	start := time.Now()
	admin, err := env.Start()
	if err != nil {
		return fmt.Errorf("start kube-apiserver: %w\n--- kube-apiserver log ---\n%s", err, tail(apiLog.String(), 30))
	}
	c.add(func() { _ = env.Stop() })
	sayf("kube-apiserver is up at %s (%.1fs)", admin.Host, time.Since(start).Seconds())

	adminClient := kubernetes.NewForConfigOrDie(admin)
	owner, err := userClient(ctx, env, admin, "koordinator-system", "koord-manager")
	if err != nil {
		return err
	}
	intruder, err := userClient(ctx, env, admin, "kube-system", "legacy-cert-controller")
	if err != nil {
		return err
	}
	guardKubeconfig, err := guardIdentity(ctx, env, admin, adminClient, work)
	if err != nil {
		return err
	}

	step(4, "Start webhook-guard serve on 127.0.0.1 (what the static-shape DaemonSet runs on each control-plane node)")
	metricsPort, _ := freePort(ctx)
	healthPort, _ := freePort(ctx)
	guardLog := &syncBuffer{}
	guard := exec.Command(guardBin, "serve", //nolint:noctx // the cleanup stops it with SIGTERM, as the kubelet does
		"--config", cfgPath, "--cert-dir", certDir,
		"--bind-address", "127.0.0.1", "--port", fmt.Sprint(port), "--kubeconfig", guardKubeconfig,
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", metricsPort), "--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", healthPort),
		"--records-flush-interval", "2s") // the default is 30s; the demo should not wait that long
	guard.Stdout, guard.Stderr = guardLog, guardLog
	if err := guard.Start(); err != nil {
		return err
	}
	c.add(func() { _ = guard.Process.Signal(syscall.SIGTERM); _ = guard.Wait() })
	if err := waitReady(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort)); err != nil {
		return fmt.Errorf("guard not ready: %w\n--- guard log ---\n%s", err, tail(guardLog.String(), 30))
	}
	sayf("ready: config and certificate loaded")

	step(5, "The owner's CA lives in a Secret; the owner creates its webhook configurations")
	ownerCA, err := testpki.NewCA("koordinator-webhook-ca")
	if err != nil {
		return err
	}
	foreignCA, err := testpki.NewCA("replica-7-self-signed-ca")
	if err != nil {
		return err
	}
	if err := setup(ctx, adminClient, ownerCA.PEM); err != nil {
		return err
	}
	for _, name := range []string{"koord-validating-webhook-configuration", "legacy-validating-webhook-configuration"} {
		if _, err := owner.clientset.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc(name, ownerCA.PEM), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
	}
	sayf("Secret koordinator-system/webhook-certs holds ca.crt; koord-manager created koord-validating-webhook-configuration\nand legacy-validating-webhook-configuration")

	step(6, "The owner rotates its own CA into the caBundle: allowed")
	if _, err := setCABundle(ctx, owner, "koord-validating-webhook-configuration", ownerCA.PEM); err != nil {
		return fmt.Errorf("the owner's write was rejected: %w", err)
	}
	sayf("koord-manager (the declared writer) wrote the CA from its Secret: the API server accepted it")

	step(7, "Another controller writes its own CA (the 8-replica incident): denied")
	_, err = setCABundle(ctx, intruder, "koord-validating-webhook-configuration", foreignCA.PEM)
	if err == nil {
		return errors.New("the intruder's write was accepted; the guard is not enforcing")
	}
	sayf("kube-apiserver answered the intruder with:\n%s", indent(wrap(err.Error(), 110)))
	_, err = setCABundle(ctx, owner, "koord-validating-webhook-configuration", foreignCA.PEM)
	if err == nil {
		return errors.New("the owner's foreign CA was accepted")
	}
	sayf("and even the owner may not write a CA that is not in its Secret:\n%s", indent(wrap(err.Error(), 110)))

	step(8, "Audit mode: the legacy mapping only records what it would deny")
	warnings, err := setCABundle(ctx, intruder, "legacy-validating-webhook-configuration", foreignCA.PEM)
	if err != nil {
		return fmt.Errorf("the audit-mode write was rejected: %w", err)
	}
	sayf("the write went through, and kubectl would print:")
	for _, w := range warnings {
		sayf("  Warning: %s", w)
	}

	step(9, "What audit mode recorded")
	metrics, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
	if err != nil {
		return err
	}
	for line := range strings.SplitSeq(metrics, "\n") {
		if strings.HasPrefix(line, "webhook_guard_decisions_total") || strings.HasPrefix(line, "webhook_guard_records_total") {
			sayf("  %s", line)
		}
	}
	sayf("the guard's record lines (its log, kept by your log pipeline):")
	sc := bufio.NewScanner(strings.NewReader(guardLog.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"decision recorded"`) {
			sayf("  %s", truncate(sc.Text(), 300))
		}
	}

	sayf("the durable records: one OpenReports ClusterReport per configuration, flushed every 2s here;\n`webhook-guard review` reads them and says what to change (exit 1: something would be denied):")
	time.Sleep(3 * time.Second)
	adminKubeconfig := filepath.Join(work, "admin.kubeconfig")
	if err := writeKubeconfig(admin, adminKubeconfig); err != nil {
		return err
	}
	reviewOut, reviewErr := exec.CommandContext(ctx, guardBin, "review", "--kubeconfig", adminKubeconfig).CombinedOutput()
	var exitErr *exec.ExitError
	somethingDenied := errors.As(reviewErr, &exitErr) && exitErr.ExitCode() == 1 // review's documented exit code
	if reviewErr != nil && !somethingDenied {
		return fmt.Errorf("webhook-guard review: %w\n%s", reviewErr, reviewOut)
	}
	sayf("%s", indent(string(reviewOut)))

	step(10, "Break-glass: a cluster administrator (system:masters) may always write, and is recorded")
	adminWarnings := &warningRecorder{}
	adminCfg := rest.CopyConfig(admin)
	adminCfg.WarningHandler = adminWarnings
	breakGlass := &user{clientset: kubernetes.NewForConfigOrDie(adminCfg), cfg: adminCfg, warnings: adminWarnings}
	warnings, err = setCABundle(ctx, breakGlass, "koord-validating-webhook-configuration", foreignCA.PEM)
	if err != nil {
		return fmt.Errorf("break-glass write rejected: %w", err)
	}
	sayf("allowed, with:")
	for _, w := range warnings {
		sayf("  Warning: %s", w)
	}
	sayf("break-glass writes go to a second static webhook entry with failurePolicy Ignore: recorded while the\nguard is up, never blocked while it is down, so an administrator is never locked out by a guard outage")
	if _, err := setCABundle(ctx, breakGlass, "koord-validating-webhook-configuration", ownerCA.PEM); err != nil {
		return err
	}

	sayf("\n\033[1mDone.\033[0m Next: docs/install.md puts it on a cluster; `make test` runs every suite.")
	return ctx.Err()
}

const guardConfig = `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
defaultMode: audit
breakGlass:
  groups: [system:masters]
owners:
  - name: koordinator
    mode: enforce
    match:
      validating: [koord-validating-webhook-configuration]
    writers:
      serviceAccounts: [koordinator-system/koord-manager]
    ca:
      secret: {namespace: koordinator-system, name: webhook-certs}
  - name: legacy
    match:
      validating: [legacy-validating-webhook-configuration]
    writers:
      serviceAccounts: [koordinator-system/koord-manager]
    ca:
      secret: {namespace: koordinator-system, name: webhook-certs}
`

type user struct {
	clientset *kubernetes.Clientset
	cfg       *rest.Config
	warnings  *warningRecorder
}

type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}

// userClient acts as system:serviceaccount:ns:name (client-certificate
// authentication, as envtest provisions users) with rights to write webhook
// configurations, so that only the guard stands in its way.
func userClient(ctx context.Context, env *envtest.Environment, admin *rest.Config, ns, name string) (*user, error) {
	username := "system:serviceaccount:" + ns + ":" + name
	au, err := env.AddUser(envtest.User{Name: username, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}}, admin)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(au.Config())
	w := &warningRecorder{}
	cfg.WarningHandler = w
	cs := kubernetes.NewForConfigOrDie(cfg)
	adminClient := kubernetes.NewForConfigOrDie(admin)
	role := "demo-webhook-config-writer"
	if _, err := adminClient.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{}); err != nil {
		_, err = adminClient.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: role},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"admissionregistration.k8s.io"},
				Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"},
				Verbs:     []string{"get", "list", "create", "update", "patch", "delete"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
	}
	_, err = adminClient.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-" + ns + "-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: username}},
	}, metav1.CreateOptions{})
	return &user{clientset: cs, cfg: cfg, warnings: w}, err
}

// guardIdentity gives the guard its own service-account identity with the
// least privilege the chart grants: get, list and watch the CA Secret by name
// (the guard watches each CA source), read the webhook configurations, write
// records and Events.
func guardIdentity(ctx context.Context, env *envtest.Environment, admin *rest.Config, cs *kubernetes.Clientset, work string) (string, error) {
	username := "system:serviceaccount:webhook-guard:webhook-guard"
	au, err := env.AddUser(envtest.User{Name: username, Groups: []string{"system:serviceaccounts"}}, admin)
	if err != nil {
		return "", err
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "koordinator-system"}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if _, err := cs.RbacV1().Roles("koordinator-system").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook-guard-ca-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"webhook-certs"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if _, err := cs.RbacV1().RoleBindings("koordinator-system").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook-guard-ca-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "webhook-guard-ca-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: username}},
	}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook-guard-records"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"openreports.io"}, Resources: []string{"clusterreports"}, Verbs: []string{"get", "list", "create", "update", "patch"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
			// As the chart grants: the guarded objects read-only (the
			// observer's watch, the records' owner references).
			{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}, Verbs: []string{"get", "list", "watch"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook-guard-records"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "webhook-guard-records"},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: username}},
	}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	kc, err := au.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(work, "guard.kubeconfig")
	return path, os.WriteFile(path, kc, 0o600)
}

func setup(ctx context.Context, cs *kubernetes.Clientset, ca []byte) error {
	_, err := cs.CoreV1().Secrets("koordinator-system").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook-certs"},
		Data:       map[string][]byte{"ca.crt": ca},
	}, metav1.CreateOptions{})
	return err
}

func vwc(name string, ca []byte) *admv1.ValidatingWebhookConfiguration {
	url := "https://koord-webhook.example.internal:9876/validate"
	none := admv1.SideEffectClassNone
	return &admv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admv1.ValidatingWebhook{{
			Name: "vpod.koordinator.sh", AdmissionReviewVersions: []string{"v1"}, SideEffects: &none,
			ClientConfig: admv1.WebhookClientConfig{URL: &url, CABundle: ca},
			// Matches nothing real, so the demo's own writes are never sent to it.
			Rules: []admv1.RuleWithOperations{{Operations: []admv1.OperationType{admv1.Create},
				Rule: admv1.Rule{APIGroups: []string{"demo.example.com"}, APIVersions: []string{"v1"}, Resources: []string{"nothing"}}}},
		}},
	}
}

func setCABundle(ctx context.Context, u *user, name string, ca []byte) ([]string, error) {
	api := u.clientset.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	obj, err := api.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	obj.Webhooks[0].ClientConfig.CABundle = ca
	if u.warnings != nil {
		u.warnings.take()
	}
	_, err = api.Update(ctx, obj, metav1.UpdateOptions{})
	if u.warnings == nil {
		return nil, err
	}
	return u.warnings.take(), err
}

func freePort(ctx context.Context) (int, error) {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitReady(ctx context.Context, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := httpGet(ctx, url); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after 30s", url)
}

func httpGet(ctx context.Context, url string) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(body), err
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func elideCA(s string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if i := strings.Index(l, "caBundle: "); i >= 0 {
			l = l[:i] + "caBundle: <base64 of the guard's CA>"
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

func wrap(s string, width int) string {
	var b strings.Builder
	line := 0
	for w := range strings.FieldsSeq(s) {
		if line > 0 && line+1+len(w) > width {
			b.WriteString("\n")
			line = 0
		} else if line > 0 {
			b.WriteString(" ")
			line++
		}
		b.WriteString(w)
		line += len(w)
	}
	return b.String()
}

// openReportsCRDs are the ClusterReport/Report CRDs shipped in the
// github.com/openreports/reports-api module the guard is built with.
func openReportsCRDs(ctx context.Context, root string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/openreports/reports-api")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("locate the OpenReports module: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd")
	return []string{filepath.Join(dir, "openreports.io_clusterreports.yaml"), filepath.Join(dir, "openreports.io_reports.yaml")}, nil
}

// writeKubeconfig writes a kubeconfig for cfg (client-certificate auth, as
// envtest provisions its admin).
func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["demo"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["demo"] = &clientcmdapi.Context{Cluster: "demo", AuthInfo: "admin"}
	kc.CurrentContext = "demo"
	return clientcmd.WriteToFile(*kc, path)
}
