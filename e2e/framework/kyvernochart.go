package framework

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// kyvernoModule is the module e2e/writers/kyverno runs Kyverno's code from.
const kyvernoModule = "github.com/kyverno/kyverno"

// KyvernoModuleDir is the Kyverno module's directory, at the version
// e2e/writers/kyverno builds (its charts/kyverno and config/crds).
func KyvernoModuleDir(t testing.TB) string {
	t.Helper()
	return writerModuleDir(t, "kyverno", kyvernoModule)
}

// InstallKyvernoCRDs installs the kyverno.io and policies.kyverno.io CRDs
// from the module (config/crds, which the chart's crds subchart holds too)
// and waits until they are served.
func InstallKyvernoCRDs(t testing.TB, env *Env) {
	t.Helper()
	dir := filepath.Join(KyvernoModuleDir(t), "config", "crds")
	_, err := envtest.InstallCRDs(env.Admin, envtest.CRDInstallOptions{
		Paths:              []string{filepath.Join(dir, "kyverno"), filepath.Join(dir, "policies.kyverno.io")},
		ErrorIfPathMissing: true,
	})
	if err != nil {
		t.Fatalf("install Kyverno's CRDs: %v", err)
	}
}

// RenderKyvernoChart renders Kyverno's chart (charts/kyverno of the module)
// with bin/helm as release "kyverno" in namespace kyverno, with the chart's
// defaults and extra --set values.
func RenderKyvernoChart(t testing.TB, set ...string) []*unstructured.Unstructured {
	t.Helper()
	return helmTemplate(t, "Kyverno's chart", "kyverno", localKyvernoChart(t), KyvernoNamespace, set...)
}

// localKyvernoChart is a copy of the module's charts/kyverno without the
// dependencies it fetches from chart repositories (kyverno-api,
// openreports, reports-server): the module ships only the local ones
// (crds, grafana) under charts/, helm refuses to render a chart whose
// dependencies are missing, and nothing the test takes from the chart (the
// admission controller's RBAC, Deployment, ConfigMap) comes from them.
func localKyvernoChart(t testing.TB) string {
	t.Helper()
	src := filepath.Join(KyvernoModuleDir(t), "charts", "kyverno")
	dst := filepath.Join(t.TempDir(), "kyverno")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatalf("copy Kyverno's chart: %v", err)
	}
	chartFile := filepath.Join(dst, "Chart.yaml")
	data, err := os.ReadFile(chartFile)
	if err != nil {
		t.Fatal(err)
	}
	var chart map[string]any
	if err := yaml.Unmarshal(data, &chart); err != nil {
		t.Fatalf("Kyverno's Chart.yaml: %v", err)
	}
	deps, _ := chart["dependencies"].([]any)
	var local []any
	for _, d := range deps {
		if m, ok := d.(map[string]any); ok && m["repository"] == nil {
			local = append(local, d)
		}
	}
	chart["dependencies"] = local
	if data, err = yaml.Marshal(chart); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(chartFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// The lock names the dropped dependencies too.
	if err := os.Remove(filepath.Join(dst, "Chart.lock")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return dst
}

// kyvernoChartObject reports whether the rendered object is one of what the
// chart installs for the admission controller that the writer needs: its
// RBAC, its Deployment (whose replicas the webhook controller checks for
// rolling updates; nothing runs its pods) and the kyverno ConfigMap.
func kyvernoChartObject(o *unstructured.Unstructured) bool {
	name := o.GetName()
	switch o.GetKind() {
	case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		return strings.HasPrefix(name, "kyverno:admission-controller")
	case "ServiceAccount", "Deployment":
		return name == KyvernoServiceAccount
	case "ConfigMap":
		return name == "kyverno"
	}
	return false
}

// installKyvernoChartObjects creates the admission controller's objects of
// the rendered chart as the admin, with the aggregated ClusterRole filled as
// kube-controller-manager's clusterrole-aggregation controller fills it
// (which does not run here): the rules of every ClusterRole its selectors
// match.
func installKyvernoChartObjects(t testing.TB, env *Env, objs []*unstructured.Unstructured) {
	t.Helper()
	env.EnsureNamespace(t, KyvernoNamespace)
	var clusterRoles []*rbacv1.ClusterRole
	for _, o := range objs {
		// Every rendered ClusterRole: an aggregated role may select
		// another component's.
		if o.GetKind() == "ClusterRole" {
			var cr rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cr); err != nil {
				t.Fatalf("ClusterRole %s: %v", o.GetName(), err)
			}
			clusterRoles = append(clusterRoles, &cr)
		}
	}
	var install []*unstructured.Unstructured
	for _, o := range objs {
		if !kyvernoChartObject(o) {
			continue
		}
		if o.GetKind() == "ClusterRole" {
			aggregateClusterRole(t, o, clusterRoles)
		}
		install = append(install, o)
	}
	createObjects(t, env, KyvernoNamespace, install)
}

// aggregateClusterRole sets an aggregated ClusterRole's rules to those of the
// ClusterRoles its aggregationRule selects.
func aggregateClusterRole(t testing.TB, o *unstructured.Unstructured, roles []*rbacv1.ClusterRole) {
	t.Helper()
	var cr rbacv1.ClusterRole
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cr); err != nil {
		t.Fatalf("ClusterRole %s: %v", o.GetName(), err)
	}
	if cr.AggregationRule == nil {
		return
	}
	var rules []any
	for _, sel := range cr.AggregationRule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			t.Fatalf("ClusterRole %s: selector: %v", cr.Name, err)
		}
		for _, r := range roles {
			if r.Name == cr.Name || !s.Matches(labels.Set(r.Labels)) {
				continue
			}
			for _, rule := range r.Rules {
				u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&rule)
				if err != nil {
					t.Fatal(err)
				}
				rules = append(rules, u)
			}
		}
	}
	if len(rules) == 0 {
		t.Fatalf("ClusterRole %s aggregates no rules from the chart's ClusterRoles", cr.Name)
	}
	o.Object["rules"] = rules
}
