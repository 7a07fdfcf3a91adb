package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
)

// chartRelease is one `helm template` of charts/webhook-guard installed into
// its own namespace, so that releases of both shapes coexist on one API server.
type chartRelease struct {
	name, namespace string
	values          []string // --values files, relative to the repository root
	set             []string // --set arguments
}

var chartReleases = []chartRelease{
	{name: "wg-default", namespace: "wg-default"},
	{name: "wg-static", namespace: "wg-static", values: []string{"charts/testdata/values-static.yaml"}},
	{name: "wg-policy", namespace: "wg-policy", values: []string{"charts/testdata/values-policy.yaml"}},
	// The policy shape with the chart's own cert-manager CA (service DNS SANs).
	{name: "wg-policy-ca", namespace: "wg-policy-ca", set: []string{"shape=policy"}},
	{name: "wg-koordinator", namespace: "wg-koordinator", values: []string{"config/samples/values-koordinator.yaml"}},
	{name: "wg-cainjector", namespace: "wg-cainjector", values: []string{"config/samples/values-cainjector.yaml"}},
	// Every option added for parity with approver-policy and trust-manager:
	// OpenReports CRDs, CertificateRequestPolicies, spread constraints, extra
	// args/env/volumes/objects, PDB minAvailable, reader roles.
	{name: "wg-options", namespace: "wg-options", values: []string{"charts/testdata/values-options.yaml"}},
	// The GuardConfig kept in a ConfigMap of the user's (GitOps); the static
	// shape with its manifest sidecar, whose config volume names that ConfigMap.
	{name: "wg-existing-config", namespace: "wg-existing-config", set: []string{"config.existingConfigMap=gitops-guard-config", "staticManifestSync.enabled=true"}},
}

// chartTemplate renders a release with bin/helm.
func chartTemplate(t *testing.T, r chartRelease) []*unstructured.Unstructured {
	t.Helper()
	root := framework.RepoRoot()
	helm := filepath.Join(root, "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("%s is missing: run make tools (hack/build-helm.sh builds helm from the Go module proxy)", helm)
	}
	args := []string{"template", r.name, filepath.Join(root, "charts", "webhook-guard"), "--namespace", r.namespace, "--kube-version", "1.37.0"}
	for _, v := range r.values {
		args = append(args, "--values", filepath.Join(root, v))
	}
	for _, s := range r.set {
		args = append(args, "--set", s)
	}
	cmd := exec.CommandContext(t.Context(), helm, args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	for doc := range strings.SplitSeq(stdout.String(), "\n---\n") {
		doc = strings.TrimPrefix(strings.TrimSpace(doc), "---")
		if strings.TrimSpace(doc) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("release %s: rendered document is not YAML: %v\n%s", r.name, err, doc)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	if len(objs) == 0 {
		t.Fatalf("release %s rendered no objects", r.name)
	}
	return objs
}

// startChartControlPlane starts kube-apiserver and etcd from bin/ with
// cert-manager's CRDs and, when admissionConfig is set, that
// --admission-control-config-file (the static webhook manifest).
func startChartControlPlane(t *testing.T, admissionConfig string) (*envtest.Environment, *rest.Config) {
	t.Helper()
	binDir := framework.RequireControlPlane(t)
	log := &framework.Buffer{}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    binDir,
		ControlPlaneStartTimeout: 60 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
		ErrorIfCRDPathMissing:    true,
		CRDInstallOptions: envtest.CRDInstallOptions{
			Paths: slices.Concat(framework.CertManagerCRDPaths(t), framework.PrometheusOperatorCRDPaths(t), framework.ApproverPolicyCRDPaths(t)),
		},
	}
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(binDir, "etcd")}
	api := env.ControlPlane.GetAPIServer()
	api.Path = filepath.Join(binDir, "kube-apiserver")
	api.Out, api.Err = log, log
	if admissionConfig != "" {
		api.Configure().Set("admission-control-config-file", admissionConfig)
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatalf("start kube-apiserver and etcd: %v\n--- kube-apiserver log (last 40 lines) ---\n%s", err, log.Tail(40))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- kube-apiserver log (last 30 lines) ---\n%s", log.Tail(30))
		}
		if err := env.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	return env, cfg
}

func ensureNamespace(t *testing.T, kube kubernetes.Interface, name string) {
	t.Helper()
	_, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// installChart creates every object of every release on the API server
// and fails on any rejection.
func installChart(t *testing.T, cfg *rest.Config) map[string][]*unstructured.Unstructured {
	t.Helper()
	rendered := map[string][]*unstructured.Unstructured{}
	for _, r := range chartReleases {
		objs := chartTemplate(t, r)
		rendered[r.name] = objs
		createChartObjects(t, cfg, r, objs)
	}
	return rendered
}

// createChartObjects creates a release's objects (namespaces first, as `helm
// install --create-namespace` and the user's existing namespaces would
// provide them) with strict field validation: an unknown or misspelled field
// is an error, not a warning and a silently dropped field.
func createChartObjects(t *testing.T, cfg *rest.Config, r chartRelease, objs []*unstructured.Unstructured) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(cfg)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, kube, r.namespace)
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" {
			ensureNamespace(t, kube, ns)
		}
	}
	for _, o := range objs {
		if err := c.Create(t.Context(), o, client.FieldValidation("Strict")); err != nil {
			t.Errorf("release %s: kube-apiserver rejects %s %s/%s: %v", r.name, o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

// Test_chart covers the chart against a real kube-apiserver with cert-manager's
// CRDs: every object of both shapes and both samples is accepted, and the
// chart's service account may do exactly what values.yaml says.
func Test_chart(t *testing.T) {
	_, cfg := startChartControlPlane(t, "")
	rendered := installChart(t, cfg)

	t.Run("every rendered object is accepted", func(t *testing.T) {
		wantKinds := map[string][]string{
			"wg-static": {"Certificate", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "PrometheusRule", "Role", "RoleBinding", "Service", "ServiceAccount", "ServiceMonitor"},
			"wg-policy": {"ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "PodDisruptionBudget", "Role", "RoleBinding", "Service", "ServiceAccount", "ServiceMonitor"},
		}
		wantKinds["wg-options"] = []string{"Certificate", "CertificateRequestPolicy", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "CustomResourceDefinition", "Deployment", "Issuer", "NetworkPolicy", "PodDisruptionBudget", "PrometheusRule", "Role", "RoleBinding", "Service", "ServiceAccount"}
		wantKinds["wg-policy-ca"] = append(slices.DeleteFunc(slices.Clone(wantKinds["wg-policy"]), func(k string) bool { return k == "ServiceMonitor" }), "Certificate", "Issuer")
		for release, want := range wantKinds {
			var got []string
			for _, o := range rendered[release] {
				if !slices.Contains(got, o.GetKind()) {
					got = append(got, o.GetKind())
				}
			}
			for _, k := range want {
				if !slices.Contains(got, k) {
					t.Errorf("release %s renders no %s (kinds: %v)", release, k, got)
				}
			}
		}
		if t.Failed() || testing.Verbose() {
			for _, r := range chartReleases {
				t.Logf("release %s: %d objects created", r.name, len(rendered[r.name]))
			}
		}
	})

	t.Run("the service account's access matches values.yaml", func(t *testing.T) {
		testChartServiceAccountAccess(t, kubernetes.NewForConfigOrDie(cfg))
	})
}

type accessCase struct {
	attrs authorizationv1.ResourceAttributes
	want  bool
}

func (a accessCase) String() string {
	r := a.attrs
	s := r.Verb + " " + r.Resource
	if r.Group != "" {
		s += "." + r.Group
	}
	if r.Namespace != "" {
		s += " in " + r.Namespace
	}
	if r.Name != "" {
		s += " named " + r.Name
	}
	return s
}

// testChartServiceAccountAccess asks kube-apiserver (SubjectAccessReview)
// what the koordinator sample's service account may do: read but never write
// webhook configurations, get exactly the CA Secret the mapping names and no
// other Secret, and nothing else that values.yaml does not describe.
func testChartServiceAccountAccess(t *testing.T, kube kubernetes.Interface) {
	const (
		ns = "wg-koordinator"
		sa = "wg-koordinator-webhook-guard" // <release>-<chart>
	)
	user := framework.ServiceAccountUser(ns, sa)
	admission := "admissionregistration.k8s.io"
	var cases []accessCase
	for _, res := range []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"} {
		for _, verb := range []string{"get", "list", "watch"} {
			cases = append(cases, accessCase{authorizationv1.ResourceAttributes{Group: admission, Resource: res, Verb: verb}, true})
		}
		for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection"} {
			cases = append(cases,
				accessCase{authorizationv1.ResourceAttributes{Group: admission, Resource: res, Verb: verb}, false},
				accessCase{authorizationv1.ResourceAttributes{Group: admission, Resource: res, Verb: verb, Name: "koord-validating-webhook-configuration"}, false},
			)
		}
	}
	for _, res := range []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"} {
		for _, verb := range []string{"create", "update", "patch", "delete"} {
			cases = append(cases, accessCase{authorizationv1.ResourceAttributes{Group: admission, Resource: res, Verb: verb}, false})
		}
	}
	cases = append(cases,
		// Secrets: exactly the mapping's CA Secret, get and (by name: a
		// metadata.name field selector) list and watch.
		accessCase{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: "koordinator-system", Name: "webhook-certs"}, true},
		accessCase{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "list", Namespace: "koordinator-system", Name: "webhook-certs"}, true},
		accessCase{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: "koordinator-system", Name: "koord-manager-token"}, false},
		accessCase{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "list", Namespace: "koordinator-system"}, false},
		accessCase{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "watch", Namespace: "koordinator-system"}, false},
		accessCase{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "watch", Namespace: "koordinator-system", Name: "webhook-certs"}, true},
		accessCase{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "update", Namespace: "koordinator-system", Name: "webhook-certs"}, false},
		accessCase{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: "kube-system", Name: "webhook-certs"}, false},
		accessCase{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "list"}, false},
		// Its own serving Secret is mounted, never read through the API.
		accessCase{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: ns, Name: "wg-koordinator-webhook-guard-tls"}, false},
		accessCase{authorizationv1.ResourceAttributes{Resource: "configmaps", Verb: "get", Namespace: "koordinator-system", Name: "webhook-certs"}, false},
		// cert-manager objects: read.
		accessCase{authorizationv1.ResourceAttributes{Group: "cert-manager.io", Resource: "certificates", Verb: "list"}, true},
		accessCase{authorizationv1.ResourceAttributes{Group: "cert-manager.io", Resource: "issuers", Verb: "watch"}, true},
		accessCase{authorizationv1.ResourceAttributes{Group: "cert-manager.io", Resource: "clusterissuers", Verb: "get", Name: "platform-ca"}, true},
		accessCase{authorizationv1.ResourceAttributes{Group: "cert-manager.io", Resource: "certificates", Verb: "update", Namespace: ns}, false},
		// Events for the guarded (cluster-scoped) configurations land in default.
		accessCase{authorizationv1.ResourceAttributes{Resource: "events", Verb: "create", Namespace: "default"}, true},
		accessCase{authorizationv1.ResourceAttributes{Group: "events.k8s.io", Resource: "events", Verb: "patch", Namespace: "default"}, true},
		accessCase{authorizationv1.ResourceAttributes{Resource: "events", Verb: "delete", Namespace: "default"}, false},
		// Leader election only in the release namespace.
		accessCase{authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Namespace: ns, Name: "webhook-guard"}, true},
		accessCase{authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Namespace: "kube-system", Name: "kube-controller-manager"}, false},
		// Nothing else.
		accessCase{authorizationv1.ResourceAttributes{Resource: "pods", Verb: "list"}, false},
		accessCase{authorizationv1.ResourceAttributes{Group: "rbac.authorization.k8s.io", Resource: "roles", Verb: "create", Namespace: ns}, false},
	)
	for _, c := range cases {
		attrs := c.attrs
		review, err := kube.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               user.Name,
				Groups:             append(slices.Clone(user.Groups), "system:authenticated"),
				ResourceAttributes: &attrs,
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SubjectAccessReview %s: %v", c, err)
		}
		if review.Status.Allowed != c.want {
			t.Errorf("%s may %s: allowed=%v, want %v (%s)", user.Name, c, review.Status.Allowed, c.want, fmt.Sprint(review.Status.Reason))
		}
	}
}
