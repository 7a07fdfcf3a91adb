package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
)

// Test_chartGuardServesWithChartRBAC runs `webhook-guard serve` the way the
// chart deploys it — the DaemonSet's own args, the guard.yaml the chart
// renders from the koordinator sample (mounted like a ConfigMap volume), and
// nothing but the chart's RBAC for its service account — behind the static
// webhook manifest, and shows that the least-privilege RBAC is also enough:
// the guard reads the mapping's CA Secret (the owner's caBundle write passes
// without a warning), records a stranger's write, and wins its leader
// election Lease, with no "forbidden" in its log.
func Test_chartGuardServesWithChartRBAC(t *testing.T) {
	chartGuardServes(t, framework.GuardBinary(t))
}

// chartGuardServes is Test_chartGuardServesWithChartRBAC with the binary
// given: TestImageServesWithChartArgs runs it with the image's entrypoint.
// (No t.Helper: failures are reported at the line in here that failed.)
func chartGuardServes(t *testing.T, bin string) {
	rel := chartRelease{name: "wg", namespace: "webhook-guard", values: []string{"config/samples/values-koordinator.yaml"}}
	const sa = "wg-webhook-guard"
	objs := chartTemplate(t, rel)
	guardYAML, args := chartGuardConfigAndArgs(t, objs)

	dir := t.TempDir()
	// The ConfigMap and the serving Secret, projected the way the kubelet
	// mounts volumes (..data symlink swap).
	configDir := filepath.Join(dir, "config")
	framework.WriteSecretDir(t, configDir, map[string][]byte{"guard.yaml": []byte(guardYAML)})
	guardCA := framework.NewCA(t, "wg-webhook-guard-ca")
	certDir := filepath.Join(dir, "tls")
	framework.WriteSecretDir(t, certDir, framework.SecretData(guardCA, guardCA.Issue(t, "localhost")))

	port := framework.FreePort(t)
	healthAddr := fmt.Sprintf("127.0.0.1:%d", framework.FreePort(t))
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", framework.FreePort(t))

	renderDir := filepath.Join(dir, "admission")
	render := exec.CommandContext(t.Context(), bin, "render", "static-manifest",
		"--url", fmt.Sprintf("https://127.0.0.1:%d/validate", port),
		"--ca-file", filepath.Join(certDir, "ca.crt"),
		"--config", filepath.Join(configDir, "guard.yaml"),
		"--output-dir", renderDir)
	if out, err := render.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(render.Args, " "), err, out)
	}

	env, cfg := startChartControlPlane(t, filepath.Join(renderDir, "admission-configuration.yaml"))
	admin := kubernetes.NewForConfigOrDie(cfg)
	createChartObjects(t, cfg, rel, objs)

	// The koordinator-style owner's CA in the Secret the sample names.
	ownerCA := koordinatorCA(t, admin)

	// The guard's identity: only the chart's RBAC binds it.
	kubeconfigPath := userKubeconfig(t, env, dir, framework.ServiceAccountUser(rel.namespace, sa))

	serveArgs := rewriteChartArgs(t, args, map[string]string{
		"--config":                    filepath.Join(configDir, "guard.yaml"),
		"--cert-dir":                  certDir,
		"--port":                      fmt.Sprint(port),
		"--metrics-bind-address":      metricsAddr,
		"--health-probe-bind-address": healthAddr,
	})
	serveArgs = append(serveArgs, "--kubeconfig="+kubeconfigPath)
	guardLog := startChartGuard(t, bin, serveArgs, healthAddr)

	// Writers of webhook configurations get RBAC for them, so that only the
	// guard decides.
	owner := chartUser(t, env, admin, framework.ServiceAccountUser("koordinator-system", "koord-manager"))
	stranger := chartUser(t, env, admin, framework.ServiceAccountUser("default", "intruder"))

	// The admin (system:masters, break-glass: its entry fails open)
	// creates the configuration with an empty caBundle, as an installer would.
	const name = "koord-validating-webhook-configuration"
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), chartTestWebhookConfig(name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The owner writes its own CA: allowed without a warning, which needs the
	// guard to read koordinator-system/webhook-certs (an
	// unreadable CA source would be reported).
	framework.Eventually(t, 30*time.Second, "the owner's caBundle write passes without a warning", func() bool {
		owner.warnings.Take()
		err := setCABundle(t.Context(), owner.kube, name, ownerCA.PEM)
		if err != nil {
			t.Logf("owner caBundle write: %v", err)
			return false
		}
		if w := owner.warnings.Take(); len(w) > 0 {
			t.Logf("owner caBundle write warned: %q", w)
			return false
		}
		return true
	})

	// A stranger's write is allowed (audit mode) and warned about.
	stranger.warnings.Take()
	if err := setCABundle(t.Context(), stranger.kube, name, framework.NewCA(t, "intruder-ca").PEM); err != nil {
		t.Fatalf("stranger's write in audit mode: %v", err)
	}
	if w := framework.Containing(stranger.warnings.Take(), "webhook-guard (audit) would deny"); len(w) == 0 {
		t.Errorf("the stranger's write got no audit warning")
	}

	// Leader election works with the chart's Lease Role.
	framework.Eventually(t, 30*time.Second, "the guard holds its leader election Lease", func() bool {
		_, err := admin.CoordinationV1().Leases(rel.namespace).Get(t.Context(), "webhook-guard", metav1.GetOptions{})
		return err == nil
	})

	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m, err := framework.ParseMetrics(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Sum("webhook_guard_ca_source_errors_total", nil); got != 0 {
		t.Errorf("webhook_guard_ca_source_errors_total = %v under the chart's RBAC, want 0\n%s", got, m.Series("webhook_guard_ca_source_errors_total"))
	}
	if got := m.Sum("webhook_guard_decisions_total", map[string]string{"mapping": "koordinator", "decision": "audit"}); got < 1 {
		t.Errorf("no audit decision counted for mapping koordinator\n%s", m.Series("webhook_guard_decisions_total"))
	}
	if strings.Contains(strings.ToLower(guardLog.String()), "forbidden") {
		t.Errorf("the guard hit a forbidden request under the chart's RBAC:\n%s", guardLog.Tail(40))
	}
}

// chartGuardConfigAndArgs returns guard.yaml from the rendered ConfigMap and
// the guard container's args from the rendered DaemonSet.
func chartGuardConfigAndArgs(t *testing.T, objs []*unstructured.Unstructured) (string, []string) {
	t.Helper()
	var guardYAML string
	var args []string
	for _, o := range objs {
		switch o.GetKind() {
		case "ConfigMap":
			guardYAML, _, _ = unstructured.NestedString(o.Object, "data", "guard.yaml")
		case "DaemonSet":
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				c := c.(map[string]any)
				if c["name"] == "webhook-guard" {
					a, _, _ := unstructured.NestedStringSlice(c, "args")
					args = a
				}
			}
		}
	}
	if guardYAML == "" || len(args) == 0 {
		t.Fatalf("the chart rendered no guard.yaml (%d bytes) or no guard container args (%v)", len(guardYAML), args)
	}
	return guardYAML, args
}

// rewriteChartArgs replaces the values of --flag=value args that point at
// in-pod paths and node ports with the test's; every replaced flag must be
// present, so the test notices when the chart stops passing one.
func rewriteChartArgs(t *testing.T, args []string, replace map[string]string) []string {
	t.Helper()
	out := make([]string, 0, len(args))
	seen := map[string]bool{}
	for _, a := range args {
		flag, _, _ := strings.Cut(a, "=")
		if v, ok := replace[flag]; ok {
			a = flag + "=" + v
			seen[flag] = true
		}
		out = append(out, a)
	}
	for flag := range replace {
		if !seen[flag] {
			t.Fatalf("the chart's guard args %v have no %s", args, flag)
		}
	}
	return out
}

// startChartGuard runs the guard until the test ends and waits for /readyz.
func startChartGuard(t *testing.T, bin string, args []string, healthAddr string) *framework.Buffer {
	t.Helper()
	log := &framework.Buffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", strings.Join(args, " "), err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- webhook-guard log (last 60 lines) ---\n%s", log.Tail(60))
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			t.Fatalf("webhook-guard %s exited before it was ready (%v)\n%s", strings.Join(args, " "), cmd.ProcessState, log.Tail(40))
		default:
		}
		if resp, err := c.Get("http://" + healthAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return log
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("webhook-guard did not become ready within 30s\n%s", log.Tail(40))
	return nil
}

type chartTestUser struct {
	kube     kubernetes.Interface
	warnings *framework.Warnings
}

// chartUser is a client for user with RBAC to write webhook configurations.
func chartUser(t *testing.T, env *envtest.Environment, admin kubernetes.Interface, user envtest.User) chartTestUser {
	t.Helper()
	const role = "e2e-chart-webhook-writer"
	_, err := admin.RbacV1().ClusterRoles().Get(t.Context(), role, metav1.GetOptions{})
	if err != nil {
		_, err = admin.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: role},
			Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{"admissionregistration.k8s.io"},
				Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"},
				Verbs:     []string{"get", "list", "create", "update", "patch", "delete"},
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = admin.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: role + "-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user.Name}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	au, err := env.AddUser(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(au.Config())
	w := &framework.Warnings{}
	cfg.WarningHandler = w
	u := chartTestUser{kube: kubernetes.NewForConfigOrDie(cfg), warnings: w}
	framework.Eventually(t, 10*time.Second, user.Name+" may read webhook configurations", func() bool {
		_, err := u.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(t.Context(), metav1.ListOptions{Limit: 1})
		return err == nil
	})
	return u
}

// chartTestWebhookConfig is a configuration that is never called: it matches
// a resource nobody serves.
func chartTestWebhookConfig(name string) *admv1.ValidatingWebhookConfiguration {
	none := admv1.SideEffectClassNone
	ignore := admv1.Ignore
	url := "https://koord-manager.koordinator-system.svc:443/validate"
	return &admv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admv1.ValidatingWebhook{{
			Name:                    "vpod.koordinator.sh",
			ClientConfig:            admv1.WebhookClientConfig{URL: &url},
			SideEffects:             &none,
			FailurePolicy:           &ignore,
			AdmissionReviewVersions: []string{"v1"},
			Rules: []admv1.RuleWithOperations{{
				Operations: []admv1.OperationType{admv1.Create},
				Rule:       admv1.Rule{APIGroups: []string{"e2e.webhook-guard.io"}, APIVersions: []string{"v1"}, Resources: []string{"widgets"}},
			}},
		}},
	}
}

func setCABundle(ctx context.Context, kube kubernetes.Interface, name string, bundle []byte) error {
	vwc, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].ClientConfig.CABundle = bundle
	}
	_, err = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, vwc, metav1.UpdateOptions{})
	return err
}

// Test_chartStaticManifestSyncFollowsCARotation runs the chart's
// staticManifestSync sidecar (its rendered args, paths rewritten) next to the
// guard and kube-apiserver: kube-apiserver loads the static manifest the
// sidecar writes, and after the guard's CA and serving certificate are
// replaced (as a cert-manager renewal with a new CA key would), the sidecar
// re-renders the manifest, kube-apiserver picks it up, and the guard is
// called again over TLS without a restart of anything.
func Test_chartStaticManifestSyncFollowsCARotation(t *testing.T) {
	rel := chartRelease{name: "wg", namespace: "webhook-guard", values: []string{"config/samples/values-koordinator.yaml"},
		set: []string{"staticManifestSync.enabled=true"}}
	objs := chartTemplate(t, rel)
	guardYAML, args := chartGuardConfigAndArgs(t, objs)
	syncArgs := chartContainerArgs(t, objs, "static-manifest-sync")

	dir := t.TempDir()
	configDir := filepath.Join(dir, "config")
	framework.WriteSecretDir(t, configDir, map[string][]byte{"guard.yaml": []byte(guardYAML)})
	ca1 := framework.NewCA(t, "guard-ca-1")
	certDir := filepath.Join(dir, "tls")
	framework.WriteSecretDir(t, certDir, framework.SecretData(ca1, ca1.Issue(t, "localhost")))
	port := framework.FreePort(t)
	healthAddr := fmt.Sprintf("127.0.0.1:%d", framework.FreePort(t))
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", framework.FreePort(t))
	bin := framework.GuardBinary(t)

	// The hostPath directory kube-apiserver reads.
	hostDir := filepath.Join(dir, "host")
	if err := os.MkdirAll(hostDir, 0o755); err != nil {
		t.Fatal(err)
	}
	syncArgs = rewriteChartArgs(t, syncArgs, map[string]string{
		"--url":                  fmt.Sprintf("https://127.0.0.1:%d/validate", port),
		"--ca-file":              filepath.Join(certDir, "ca.crt"),
		"--config":               filepath.Join(configDir, "guard.yaml"),
		"--output-dir":           hostDir,
		"--static-manifests-dir": filepath.Join(hostDir, "static"),
	})
	syncArgs = append(syncArgs, "--watch-interval=200ms")
	staticFile := filepath.Join(hostDir, "static", "webhook-guard.static.k8s.io.yaml")
	startChartProcess(t, bin, syncArgs, func() bool {
		_, err := os.Stat(staticFile)
		return err == nil
	})
	requireFileHolds(t, staticFile, ca1)

	env, cfg := startChartControlPlane(t, filepath.Join(hostDir, "admission-configuration.yaml"))
	admin := kubernetes.NewForConfigOrDie(cfg)
	kubeconfigPath := userKubeconfig(t, env, dir, envtest.User{Name: "guard-e2e", Groups: []string{"system:masters"}})
	serveArgs := rewriteChartArgs(t, args, map[string]string{
		"--config":                    filepath.Join(configDir, "guard.yaml"),
		"--cert-dir":                  certDir,
		"--port":                      fmt.Sprint(port),
		"--metrics-bind-address":      metricsAddr,
		"--health-probe-bind-address": healthAddr,
	})
	startChartGuard(t, bin, append(serveArgs, "--kubeconfig="+kubeconfigPath), healthAddr)

	stranger := chartUser(t, env, admin, framework.ServiceAccountUser("default", "intruder"))
	const name = "koord-validating-webhook-configuration"
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), chartTestWebhookConfig(name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	guardCalled := func() bool {
		stranger.warnings.Take()
		err := annotate(t.Context(), stranger.kube, name)
		if err != nil {
			t.Logf("stranger's write: %v", err)
			return false
		}
		return len(framework.Containing(stranger.warnings.Take(), "webhook-guard (audit) would deny")) > 0
	}
	framework.Eventually(t, 30*time.Second, "kube-apiserver calls the guard through the synced static manifest", guardCalled)

	// Rotate: a new CA and a serving certificate it signed, swapped into the
	// mounted Secret directory the way the kubelet does.
	ca2 := framework.NewCA(t, "guard-ca-2")
	framework.WriteSecretDir(t, certDir, framework.SecretData(ca2, ca2.Issue(t, "localhost")))
	framework.Eventually(t, 30*time.Second, "the sidecar re-renders the static manifest with the new CA", func() bool {
		b, err := os.ReadFile(staticFile)
		return err == nil && bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString(ca2.PEM)))
	})
	// Only once the guard serves the new certificate does a successful call
	// prove that kube-apiserver trusts the new CA.
	framework.Eventually(t, 30*time.Second, "the guard serves the certificate signed by the new CA", func() bool {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{InsecureSkipVerify: true}) // inspecting the served certificate, not trusting it
		if err != nil {
			return false
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].CheckSignatureFrom(ca2.Cert) == nil
	})
	framework.Eventually(t, 30*time.Second, "kube-apiserver calls the guard again after the CA rotation", guardCalled)
}

// chartContainerArgs returns the args of the named container of the
// rendered DaemonSet.
func chartContainerArgs(t *testing.T, objs []*unstructured.Unstructured, name string) []string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			c := c.(map[string]any)
			if c["name"] == name {
				a, _, _ := unstructured.NestedStringSlice(c, "args")
				return a
			}
		}
	}
	t.Fatalf("the rendered DaemonSet has no container %q", name)
	return nil
}

// startChartProcess runs a long-lived process until the test ends and waits
// for ready().
func startChartProcess(t *testing.T, bin string, args []string, ready func() bool) *framework.Buffer {
	t.Helper()
	log := &framework.Buffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", strings.Join(args, " "), err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- %s log (last 30 lines) ---\n%s", strings.Join(args[:min(2, len(args))], " "), log.Tail(30))
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			t.Fatalf("%s %s exited (%v)\n%s", bin, strings.Join(args, " "), cmd.ProcessState, log.Tail(40))
		default:
		}
		if ready() {
			return log
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s %s not ready within 30s\n%s", bin, strings.Join(args, " "), log.Tail(40))
	return nil
}

func requireFileHolds(t *testing.T, path string, ca *framework.CA) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString(ca.PEM))) {
		t.Fatalf("%s does not hold %s as caBundle:\n%s", path, ca, b)
	}
}

func annotate(ctx context.Context, kube kubernetes.Interface, name string) error {
	vwc, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if vwc.Annotations == nil {
		vwc.Annotations = map[string]string{}
	}
	vwc.Annotations["e2e.webhook-guard.io/touched"] = time.Now().Format(time.RFC3339Nano)
	_, err = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, vwc, metav1.UpdateOptions{})
	return err
}

// userKubeconfig provisions user on the chart control plane and writes a
// kubeconfig acting as it into dir, for running the guard as that identity.
func userKubeconfig(t *testing.T, env *envtest.Environment, dir string, user envtest.User) string {
	t.Helper()
	au, err := env.AddUser(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := au.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "guard.kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// koordinatorCA creates the CA Secret the koordinator sample values name
// (koordinator-system/webhook-certs, key ca.crt) and returns its CA.
func koordinatorCA(t *testing.T, admin kubernetes.Interface) *framework.CA {
	t.Helper()
	ca := framework.NewCA(t, "koordinator-ca")
	ensureNamespace(t, admin, "koordinator-system")
	if _, err := admin.CoreV1().Secrets("koordinator-system").Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook-certs"},
		Data:       map[string][]byte{"ca.crt": ca.PEM},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ca
}
