package framework

import (
	"net"
	"path/filepath"
	"strconv"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Istio's names for istiod, its CA and what it writes (the base and
// istio-discovery charts of istio.io/istio, release "istiod" in
// istio-system, revision "default").
const (
	// istioModule is the module e2e/writers/istio runs istiod's code from.
	istioModule         = "istio.io/istio"
	IstioNamespace      = "istio-system"
	IstioServiceAccount = "istiod"
	// IstioRevision is the chart's revision label (istio.io/rev) and
	// istiod's REVISION: the writers patch only configurations labelled so.
	IstioRevision = "default"
	// IstioCASecret is the plugged-in CA istiod mounts at /etc/cacerts;
	// IstioRootKey holds the roots istiod writes into every caBundle.
	IstioCASecret = "cacerts"
	IstioRootKey  = "root-cert.pem"
	// IstioInjector is the sidecar injector's configuration (the
	// istio-discovery chart; four entries, *sidecar-injector.istio.io).
	IstioInjector = "istio-sidecar-injector"
	// IstioValidator is the revision's validation configuration (the
	// istio-discovery chart), IstioDefaultValidator the default revision's
	// (the base chart); both are labelled istio.io/rev=default, so the
	// validation controller writes both.
	IstioValidator        = "istio-validator-istio-system"
	IstioDefaultValidator = "istiod-default-validator"
	// IstioCustomHost is the name istiod adds to its serving certificate
	// (ISTIOD_CUSTOM_HOST) and the validators' URLs use.
	IstioCustomHost = "localhost"
)

// IstioTargets are the configurations istiod writes the CA into.
var IstioTargets = []Target{
	{Mutating, IstioInjector},
	{Validating, IstioValidator},
	{Validating, IstioDefaultValidator},
}

// IstioModuleDir is the Istio module's directory, at the version
// e2e/writers/istio builds (its manifests/charts).
func IstioModuleDir(t testing.TB) string {
	t.Helper()
	return writerModuleDir(t, "istio", istioModule)
}

// istioChartKinds are what InstallIstio creates of the istio-discovery
// chart: istiod's identity and RBAC, the ConfigMaps it reads (mesh config,
// injector templates: the patcher runs only when the injector's exists)
// and the webhook configurations. Its Deployment and Service come with
// InstallIstiodWorkload; the autoscaler and the rest are left out.
var istioChartKinds = map[string]bool{
	"ServiceAccount": true, "ConfigMap": true,
	"ClusterRole": true, "ClusterRoleBinding": true, "Role": true, "RoleBinding": true,
	"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true,
}

// istioRelease is what the charts rendered for one install.
type istioRelease struct {
	// workload are istiod's Deployment and Service (InstallIstiodWorkload).
	workload []*unstructured.Unstructured
	// container is the Deployment's discovery container, whose environment
	// the writer gets.
	container map[string]any
}

// installIstioCharts renders Istio's base and istio-discovery charts with
// bin/helm, for an istiod outside the cluster as the charts configure one
// (an external control plane): the validators call base.validationURL
// (https://localhost:<httpsPort>/validate), istiod adds localhost to its
// serving certificate (env.ISTIOD_CUSTOM_HOST) and accepts a change of
// roots (env.ISTIO_MULTIROOT_MESH, which Istio's plugged-in root rotation
// needs). It creates, as the admin, the base chart's CRDs and validator
// and istioChartKinds of istio-discovery's objects.
func installIstioCharts(t testing.TB, env *Env, httpsPort int) istioRelease {
	t.Helper()
	charts := filepath.Join(IstioModuleDir(t), "manifests", "charts")
	url := "https://" + net.JoinHostPort(IstioCustomHost, strconv.Itoa(httpsPort)) + "/validate"
	env.EnsureNamespace(t, IstioNamespace)

	base := helmTemplate(t, "Istio's base chart", "istio-base", filepath.Join(charts, "base"), IstioNamespace,
		"base.validationURL="+url)
	var crds []*apiextensionsv1.CustomResourceDefinition
	var baseObjs []*unstructured.Unstructured
	for _, o := range base {
		if o.GetKind() != "CustomResourceDefinition" {
			baseObjs = append(baseObjs, o)
			continue
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &crd); err != nil {
			t.Fatalf("Istio's CRD %s: %v", o.GetName(), err)
		}
		crds = append(crds, &crd)
	}
	if _, err := envtest.InstallCRDs(env.Admin, envtest.CRDInstallOptions{CRDs: crds}); err != nil {
		t.Fatalf("install Istio's CRDs: %v", err)
	}
	createObjects(t, env, IstioNamespace, baseObjs)

	objs, rel := splitIstiodChart(t, helmTemplate(t, "Istio's istio-discovery chart", "istiod",
		filepath.Join(charts, "istio-control", "istio-discovery"), IstioNamespace,
		"base.validationURL="+url, "env.ISTIOD_CUSTOM_HOST="+IstioCustomHost, "env.ISTIO_MULTIROOT_MESH=true"))
	createObjects(t, env, IstioNamespace, objs)
	return rel
}

// splitIstiodChart picks, of the istio-discovery chart's objects, those
// installIstioCharts creates (istioChartKinds) and those of the release:
// istiod's Deployment and Service, and the Deployment's discovery
// container.
func splitIstiodChart(t testing.TB, rendered []*unstructured.Unstructured) ([]*unstructured.Unstructured, istioRelease) {
	t.Helper()
	var rel istioRelease
	var objs []*unstructured.Unstructured
	for _, o := range rendered {
		istiod := o.GetName() == IstioServiceAccount
		switch {
		case istioChartKinds[o.GetKind()]:
			if o.GetKind() == "ClusterRole" && o.Object["aggregationRule"] != nil {
				t.Fatalf("Istio's ClusterRole %s aggregates others: the suite does not fill it", o.GetName())
			}
			objs = append(objs, o)
		case istiod && o.GetKind() == "Service":
			rel.workload = append(rel.workload, o)
		case istiod && o.GetKind() == "Deployment":
			rel.workload = append(rel.workload, o)
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				if m, ok := c.(map[string]any); ok && m["name"] == "discovery" {
					rel.container = m
				}
			}
		}
	}
	if rel.container == nil {
		t.Fatal("Istio's istio-discovery chart rendered no istiod Deployment with a discovery container")
	}
	return objs, rel
}

// writerEnv is the environment the chart gives istiod's container, its
// fields resolved as the kubelet would for a pod named podName, without
// KUBECONFIG (a mount of a remote cluster's Secret the writer does not
// have: it gets --kubeconfig) and without the resource fields (GOMAXPROCS
// from a CPU limit the chart does not set: Go's default).
func (r istioRelease) writerEnv(t testing.TB, podName string) []string {
	t.Helper()
	vars, _, _ := unstructured.NestedSlice(r.container, "env")
	fields := map[string]string{
		"metadata.name": podName, "metadata.namespace": IstioNamespace, "spec.serviceAccountName": IstioServiceAccount,
	}
	var out []string
	for _, v := range vars {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		if name == "KUBECONFIG" {
			continue
		}
		if value, ok := m["value"].(string); ok {
			out = append(out, name+"="+value)
			continue
		}
		if _, resource, _ := unstructured.NestedMap(m, "valueFrom", "resourceFieldRef"); resource {
			continue
		}
		path, _, _ := unstructured.NestedString(m, "valueFrom", "fieldRef", "fieldPath")
		value, ok := fields[path]
		if !ok {
			t.Fatalf("istiod's env %s: the suite does not resolve %v", name, m["valueFrom"])
		}
		out = append(out, name+"="+value)
	}
	return out
}
