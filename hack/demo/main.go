// Command demo is `make demo`: it starts a real etcd and kube-apiserver (built
// into bin/ by `make tools`) and the built webhook-guard on loopback, wired
// through a static webhook manifest exactly as on a kubeadm control plane, and
// walks through what the guard does, narrating each step. It cleans up after
// itself, also on Ctrl-C.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
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
