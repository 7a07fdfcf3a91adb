// Package framework runs webhook-guard end to end: a real kube-apiserver and
// etcd (built into <repo>/bin by `make tools`) under controller-runtime's
// envtest, started with the AdmissionConfiguration and static webhook manifest
// that `webhook-guard render static-manifest` writes, and the built
// `webhook-guard serve` binary running as its own service account with a
// certificate in cert-manager's Secret format.
package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// The guard's own identity, as the chart would deploy it.
const (
	GuardNamespace      = "webhook-guard"
	GuardServiceAccount = "webhook-guard"
	GuardSecretName     = "webhook-guard-tls"
	// WebhookPath is where `serve` answers AdmissionReviews.
	WebhookPath = "/validate"
)

// Options configure one environment.
type Options struct {
	// Config is the GuardConfig `serve` runs with; `render` reads it too (its
	// breakGlass subjects become matchConditions).
	Config *guardapi.GuardConfig
	// FailurePolicy of the rendered static webhook: Fail (default) or Ignore.
	FailurePolicy string
	// TimeoutSeconds of the rendered static webhook (default 5).
	TimeoutSeconds int
	// CertManagerCRDs installs cert-manager's Certificate, Issuer,
	// ClusterIssuer and CertificateRequest CRDs.
	CertManagerCRDs bool
	// ReportCRDs installs the OpenReports CRDs (ClusterReport, Report) the
	// guard keeps its records in.
	ReportCRDs bool
	// GuardArgs are appended to the guard's `serve` arguments.
	GuardArgs []string
	// GuardEnv ("NAME=value") is added to the guard's environment, as a
	// container's env (e.g. the Go runtime settings the chart sets).
	GuardEnv []string

	// AuditLog makes kube-apiserver write an audit log (Metadata level for
	// webhook configurations) that Env.AuditEvents reads, to see the
	// guard's auditAnnotations where cluster operators see them.
	AuditLog bool
	// AuditRequestsOf are users whose webhook configuration writes the
	// audit log records with their request object (Request level), for a
	// test that must know what a denied write carried. Needs AuditLog.
	AuditRequestsOf []string
	// NoStaticManifest starts kube-apiserver without the AdmissionConfiguration
	// and static webhook (policy shape: what a managed cluster offers).
	NoStaticManifest bool
	// RenderArgs are extra `render static-manifest` arguments.
	RenderArgs []string
	// GuardRules are extra rules of the guard's ClusterRole.
	GuardRules []rbacv1.PolicyRule

	// GuardAPIProxy puts a TCPProxy (Env.APIProxy) between the guard and
	// kube-apiserver, so a test can cut the guard off the API server.
	GuardAPIProxy bool

	// afterRender lets the framework's own tests break the rendered files.
	afterRender func(t testing.TB, renderDir string)
}

// setDefaults fills what a test leaves unset: the static webhook's
// failure policy and timeout.
func (o *Options) setDefaults() {
	if o.FailurePolicy == "" {
		o.FailurePolicy = "Fail"
	}
	if o.TimeoutSeconds == 0 {
		o.TimeoutSeconds = 5
	}
}

// Env is one control plane with one guard.
type Env struct {
	t testing.TB
	// Root is the repository root; Dir the environment's scratch directory.
	Root, Dir string
	// Admin is a system:masters identity (break-glass in the usual config).
	Admin     *rest.Config
	AdminKube kubernetes.Interface
	// APIServerLog holds kube-apiserver's stdout and stderr.
	APIServerLog *Buffer
	// GuardCA signs the guard's serving certificate; its PEM is the static
	// webhook's caBundle.
	GuardCA *CA
	// Rendered are the files `render static-manifest` wrote, by path
	// relative to the render output directory.
	Rendered map[string][]byte
	Guard    *Guard
	// APIProxy carries the guard's API traffic when Options.GuardAPIProxy is set.
	APIProxy *TCPProxy

	testEnv      *envtest.Environment
	auditLogPath string

	rbacOnce   sync.Once
	addUserMu  sync.Mutex
	guardRules []rbacv1.PolicyRule
}

// RepoRoot is the repository root, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0) //nolint:dogsled // only the file is needed
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// RequireControlPlane fails the test unless bin/kube-apiserver and bin/etcd
// exist. It never skips: a missing control plane is a broken setup.
func RequireControlPlane(t testing.TB) string {
	t.Helper()
	return requireBinaries(t, filepath.Join(RepoRoot(), "bin"))
}

func requireBinaries(t testing.TB, bin string) string {
	t.Helper()
	var missing []string
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if fi, err := os.Stat(filepath.Join(bin, name)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, filepath.Join(bin, name))
		}
	}
	if len(missing) > 0 {
		t.Fatalf("the e2e suite needs a real control plane but %s missing; run `make tools` "+
			"(hack/build-control-plane.sh builds kube-apiserver and etcd from the Go module proxy into bin/)",
			strings.Join(missing, " and ")+map[bool]string{true: " is", false: " are"}[len(missing) == 1])
	}
	return bin
}

// Start brings up etcd, kube-apiserver (with the rendered static webhook) and
// the guard. Everything is torn down by t.Cleanup.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	binDir := RequireControlPlane(t)
	if opts.Config == nil {
		t.Fatal("framework.Start: Options.Config is required")
	}
	opts.setDefaults()
	e := &Env{t: t, Root: RepoRoot(), Dir: t.TempDir(), APIServerLog: &Buffer{}, guardRules: opts.GuardRules}
	guardBin := GuardBinary(t)

	// The guard's serving certificate, as cert-manager would issue it.
	e.GuardCA = NewCA(t, "webhook-guard-ca")
	leaf := e.GuardCA.Issue(t, "webhook-guard")
	certDir := filepath.Join(e.Dir, "certs")
	WriteSecretDir(t, certDir, SecretData(e.GuardCA, leaf))

	configPath := filepath.Join(e.Dir, "config", "guard.yaml")
	if err := os.MkdirAll(filepath.Dir(configPath), 0o755); err != nil {
		t.Fatal(err)
	}
	WriteFileAtomic(t, configPath, MarshalConfig(t, opts.Config))

	g := &Guard{
		env:         e,
		Bin:         guardBin,
		ConfigPath:  configPath,
		CertDir:     certDir,
		Port:        FreePort(t),
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		HealthAddr:  fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		Log:         &Buffer{},
		ExtraArgs:   opts.GuardArgs,
		ExtraEnv:    opts.GuardEnv,
	}
	e.Guard = g

	// The static webhook manifest and AdmissionConfiguration, from the
	// product's own render command.
	var admissionConfig string
	if !opts.NoStaticManifest {
		renderDir := filepath.Join(e.Dir, "admission")
		e.render(t, guardBin, renderDir, g.URL(), filepath.Join(certDir, "ca.crt"), configPath, opts)
		admissionConfig = filepath.Join(renderDir, "admission-configuration.yaml")
		if opts.afterRender != nil {
			opts.afterRender(t, renderDir)
		}
	}

	e.startControlPlane(t, binDir, admissionConfig, opts)

	e.installGuardIdentity(t, leaf)
	if opts.GuardAPIProxy {
		e.proxyGuardAPI(t)
	}
	g.Start(t)
	return e
}

// startControlPlane starts etcd and kube-apiserver, with admissionConfig
// when set, and stops them in t.Cleanup; e.Admin is its admin.
func (e *Env) startControlPlane(t testing.TB, binDir, admissionConfig string, opts Options) {
	t.Helper()
	e.testEnv = &envtest.Environment{
		BinaryAssetsDirectory:    binDir,
		ControlPlaneStartTimeout: 60 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
		ErrorIfCRDPathMissing:    true,
	}
	e.testEnv.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(binDir, "etcd")}
	api := e.testEnv.ControlPlane.GetAPIServer()
	api.Path = filepath.Join(binDir, "kube-apiserver")
	api.Out, api.Err = e.APIServerLog, e.APIServerLog
	if admissionConfig != "" {
		api.Configure().Set("admission-control-config-file", admissionConfig)
	}
	if opts.AuditLog {
		e.configureAuditLog(t, api, opts.AuditRequestsOf)
	}
	if opts.CertManagerCRDs {
		e.testEnv.CRDInstallOptions.Paths = CertManagerCRDPaths(t)
	}
	if opts.ReportCRDs {
		e.testEnv.CRDInstallOptions.Paths = append(e.testEnv.CRDInstallOptions.Paths, ReportCRDPaths(t)...)
	}
	cfg, err := e.testEnv.Start()
	if err != nil {
		_ = e.testEnv.Stop()
		reason := e.APIServerLog.TailMatching(1, func(l string) bool { return strings.Contains(l, `"command failed"`) || strings.HasPrefix(l, "F") })
		if reason == "" {
			reason = "(no fatal line in its log)"
		}
		t.Fatalf("start kube-apiserver and etcd: %v\nkube-apiserver's reason: %s\n--- kube-apiserver log (last 40 lines) ---\n%s\n--- files rendered by `webhook-guard render static-manifest` ---\n%s",
			err, reason, e.APIServerLog.Tail(40), e.renderedSummary())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- kube-apiserver warnings and errors (last 15) ---\n%s", e.APIServerLog.TailMatching(15, func(l string) bool {
				return strings.HasPrefix(l, "W") || strings.HasPrefix(l, "E")
			}))
		}
		if err := e.testEnv.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	e.Admin = cfg
	e.AdminKube = kubernetes.NewForConfigOrDie(cfg)
}

func (e *Env) render(t testing.TB, bin, outDir, url, caFile, configPath string, opts Options) {
	t.Helper()
	args := []string{"render", "static-manifest",
		"--url", url,
		"--ca-file", caFile,
		"--config", configPath,
		"--failure-policy", opts.FailurePolicy,
		"--timeout-seconds", fmt.Sprint(opts.TimeoutSeconds),
		"--output-dir", outDir,
	}
	args = append(args, opts.RenderArgs...)
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("webhook-guard %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	e.Rendered = map[string][]byte{}
	err = filepath.WalkDir(outDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(outDir, p)
		e.Rendered[rel] = b
		return err
	})
	if err != nil {
		t.Fatalf("read rendered files: %v", err)
	}
	for _, want := range []string{"admission-configuration.yaml", filepath.Join("static", "webhook-guard.static.k8s.io.yaml")} {
		if _, ok := e.Rendered[want]; !ok {
			t.Fatalf("webhook-guard render static-manifest --output-dir did not write %s; it wrote:\n%s", want, e.renderedSummary())
		}
	}
}

func (e *Env) renderedSummary() string {
	var b strings.Builder
	for name, data := range e.Rendered {
		fmt.Fprintf(&b, "# %s\n%s\n", name, data)
	}
	return b.String()
}

// StaticManifest is the rendered static ValidatingWebhookConfiguration.
func (e *Env) StaticManifest() string {
	return string(e.Rendered[filepath.Join("static", "webhook-guard.static.k8s.io.yaml")])
}

// installGuardIdentity creates what the chart and cert-manager would: the
// guard's namespace, its least-privilege ClusterRole, the Secret cert-manager
// would issue, and a kubeconfig for system:serviceaccount:webhook-guard:webhook-guard.
func (e *Env) installGuardIdentity(t testing.TB, leaf *ServingCert) {
	t.Helper()
	ctx := context.Background()
	e.EnsureNamespace(t, GuardNamespace)
	_, err := e.AdminKube.CoreV1().Secrets(GuardNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: GuardSecretName,
			Annotations: map[string]string{
				"cert-manager.io/certificate-name": "webhook-guard",
				"cert-manager.io/issuer-name":      "webhook-guard-ca",
				"cert-manager.io/issuer-kind":      "Issuer",
				"cert-manager.io/common-name":      "webhook-guard",
				"cert-manager.io/alt-names":        "localhost",
				"cert-manager.io/ip-sans":          "127.0.0.1",
			},
		},
		Type: corev1.SecretTypeTLS,
		Data: SecretData(e.GuardCA, leaf),
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the guard's serving Secret: %v", err)
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook-guard"},
		Rules: []rbacv1.PolicyRule{
			// CA sources are watched one by one (list/watch by metadata.name)
			// and read directly by the policy shape's syncer.
			{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"cert-manager.io"}, Resources: []string{"certificates", "issuers", "clusterissuers"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"apiregistration.k8s.io"}, Resources: []string{"apiservices"}, Verbs: []string{"get", "list", "watch"}},
			// The observer's ready-endpoints series, as the chart grants.
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
			{APIGroups: []string{"openreports.io"}, Resources: []string{"clusterreports"}, Verbs: []string{"get", "list", "create", "update", "patch"}},
		},
	}
	role.Rules = append(role.Rules, e.guardRules...)
	if _, err := e.AdminKube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the guard's ClusterRole: %v", err)
	}
	user := ServiceAccountUser(GuardNamespace, GuardServiceAccount)
	e.bind(t, "webhook-guard", "webhook-guard", user.Name)
	au, err := e.addUser(user, nil)
	if err != nil {
		t.Fatalf("provision the guard's identity: %v", err)
	}
	kc, err := au.KubeConfig()
	if err != nil {
		t.Fatalf("kubeconfig for the guard: %v", err)
	}
	e.Guard.Kubeconfig = filepath.Join(e.Dir, "guard.kubeconfig")
	if err := os.WriteFile(e.Guard.Kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
}

// EnsureNamespace creates a namespace if it does not exist.
func (e *Env) EnsureNamespace(t testing.TB, name string) {
	t.Helper()
	_, err := e.AdminKube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

func (e *Env) bind(t testing.TB, bindingName, roleName, user string) {
	t.Helper()
	_, err := e.AdminKube.RbacV1().ClusterRoleBindings().Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: bindingName},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: roleName},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("bind %s to %s: %v", user, roleName, err)
	}
}

// MarshalConfig renders a GuardConfig as the YAML file `serve` reads.
func MarshalConfig(t testing.TB, c *guardapi.GuardConfig) []byte {
	t.Helper()
	cc := *c
	cc.APIVersion, cc.Kind = guardapi.APIVersion, guardapi.Kind
	b, err := yaml.Marshal(&cc)
	if err != nil {
		t.Fatalf("marshal GuardConfig: %v", err)
	}
	if _, err := policy.Load(b); err != nil {
		t.Fatalf("the test's GuardConfig is invalid: %v\n%s", err, b)
	}
	return b
}

// WriteFileAtomic writes data to a temporary file in path's directory and
// renames it over path, the way a ConfigMap update reaches a pod.
func WriteFileAtomic(t testing.TB, path string, data []byte) {
	t.Helper()
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		t.Fatal(err)
	}
}

// Kubeconfig writes a kubeconfig acting as user (for running the
// webhook-guard CLI against the environment) and returns its path.
func (e *Env) Kubeconfig(t testing.TB, user envtest.User) string {
	t.Helper()
	au, err := e.addUser(user, nil)
	if err != nil {
		t.Fatalf("provision user %s: %v", user.Name, err)
	}
	kc, err := au.KubeConfig()
	if err != nil {
		t.Fatalf("kubeconfig for %s: %v", user.Name, err)
	}
	f, err := os.CreateTemp(e.Dir, "kubeconfig-*")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(kc); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// auditedResources are the guarded kinds' resources, as an audit rule's.
const auditedResources = `  resources:
  - group: admissionregistration.k8s.io
    resources: ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"]
  - group: apiextensions.k8s.io
    resources: ["customresourcedefinitions"]
  - group: apiregistration.k8s.io
    resources: ["apiservices"]
`

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
` + auditedResources + `- level: None
`
