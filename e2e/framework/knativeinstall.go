package framework

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// Knative Serving's names for its webhook and what it writes
// (config/core of knative.dev/serving, and knative.dev/pkg's
// webhook/certificates/resources for the Secret's keys).
const (
	// KnativeServingVersion is the release whose manifests are installed;
	// e2e/writers/knative requires the knative.dev/pkg it requires.
	KnativeServingVersion = "v0.50.0"
	KnativeNamespace      = "knative-serving"
	// KnativeServiceAccount is the identity serving's webhook Deployment
	// runs as (serviceAccountName: controller).
	KnativeServiceAccount = "controller"
	KnativeSecret         = "webhook-certs"
	// KnativeCAKey holds the CA the reconcilers write into every caBundle;
	// KnativeServerKey the serving key (removing it forces a new CA).
	KnativeCAKey     = "ca-cert.pem"
	KnativeServerKey = "server-key.pem"
	// The configurations, each with one entry of the same name.
	KnativeDefaulting = "webhook.serving.knative.dev"
	KnativeValidation = "validation.webhook.serving.knative.dev"
	KnativeConfigMaps = "config.webhook.serving.knative.dev"
	// KnativeWidgetCRD is the CRD whose conversion webhook the writer's
	// conversion reconciler keeps (e2e/writers/knative's Widget type).
	KnativeWidgetCRD = "widgets.knative-writer.e2e.webhook-guard.io"
)

// knativeManifests are the files of serving's config/core the suite
// installs: the namespace, the RBAC of the webhook's service account, and
// the webhook configurations with their (empty) Secret.
var knativeManifests = []string{
	"100-namespace.yaml",
	"200-roles/activator.yaml",
	"200-roles/addressable-resolvers-clusterrole.yaml",
	"200-roles/clusterrole-namespaced.yaml",
	"200-roles/clusterrole.yaml",
	"200-roles/podspecable-bindings-clusterrole.yaml",
	"200-serviceaccount.yaml",
	"webhooks/configmap-validation.yaml",
	"webhooks/defaulting.yaml",
	"webhooks/resource-validation.yaml",
	"webhooks/secret.yaml",
}

var knativeGVRs = map[string]schema.GroupVersionResource{
	"Namespace":                      {Version: "v1", Resource: "namespaces"},
	"ServiceAccount":                 {Version: "v1", Resource: "serviceaccounts"},
	"Secret":                         {Version: "v1", Resource: "secrets"},
	"Role":                           rbacv1.SchemeGroupVersion.WithResource("roles"),
	"RoleBinding":                    rbacv1.SchemeGroupVersion.WithResource("rolebindings"),
	"ClusterRole":                    rbacv1.SchemeGroupVersion.WithResource("clusterroles"),
	"ClusterRoleBinding":             rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"),
	"ValidatingWebhookConfiguration": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
	"MutatingWebhookConfiguration":   {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"},
	"CustomResourceDefinition":       crdGVR,
	"Deployment":                     {Group: "apps", Version: "v1", Resource: "deployments"},
	"Service":                        {Version: "v1", Resource: "services"},
	"EndpointSlice":                  {Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"},
}

// InstallKnativeServing creates, as the admin (the installer), what
// serving's release installs for its webhook: knativeManifests, read from
// knative.dev/serving@KnativeServingVersion in the module cache, and the
// Widget CRD with a conversion webhook on serving's webhook Service. The
// aggregated ClusterRoles get the rules of the roles they select, as
// kube-controller-manager's clusterrole-aggregation controller (not run
// here) fills them.
func InstallKnativeServing(t testing.TB, env *Env) {
	t.Helper()
	applyServing(t, env, knativeManifests, widgetCRD())
}

// InstallKnativeWebhookWorkload creates serving's webhook Deployment and
// Service (config/core/deployments/webhook.yaml) and, standing in for the
// EndpointSlice controller (not run here), one ready endpoint: what
// `webhook-guard discover` follows from a configuration's service to the
// service account that writes it. Nothing runs the Deployment's pods.
func InstallKnativeWebhookWorkload(t testing.TB, env *Env) {
	t.Helper()
	slice := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
		"metadata": map[string]any{"name": "webhook-1", "namespace": KnativeNamespace,
			"labels": map[string]any{"kubernetes.io/service-name": "webhook"}},
		"addressType": "IPv4",
		"ports":       []any{map[string]any{"name": "https-webhook", "port": int64(8443)}},
		"endpoints":   []any{map[string]any{"addresses": []any{"10.1.0.1"}, "conditions": map[string]any{"ready": true}}},
	}}
	applyServing(t, env, []string{"deployments/webhook.yaml"}, slice)
}

// applyServing creates, as the admin, the objects of files (paths below
// config/core of knative.dev/serving@KnativeServingVersion in the module
// cache) and extra, aggregated ClusterRoles filled as aggregate does.
func applyServing(t testing.TB, env *Env, files []string, extra ...*unstructured.Unstructured) {
	t.Helper()
	dir := filepath.Join(DownloadModule(t, "knative.dev/serving@"+KnativeServingVersion), "config", "core")
	dyn := dynamic.NewForConfigOrDie(env.Admin)
	var objs []*unstructured.Unstructured
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("read serving's manifest: %v", err)
		}
		for doc := range bytes.SplitSeq(raw, []byte("\n---")) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &u.Object); err != nil {
				t.Fatalf("parse %s: %v", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if _, ok := knativeGVRs[u.GetKind()]; !ok {
				t.Fatalf("%s: kind %s is not one the suite installs", f, u.GetKind())
			}
			objs = append(objs, u)
		}
	}
	objs = append(objs, extra...)
	aggregate(t, objs)
	for _, u := range objs {
		res := dyn.Resource(knativeGVRs[u.GetKind()])
		var err error
		if ns := u.GetNamespace(); ns != "" {
			_, err = res.Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
		} else {
			_, err = res.Create(context.Background(), u, metav1.CreateOptions{})
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("install %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// aggregate fills every ClusterRole with an aggregationRule with the rules
// of the ClusterRoles among objs its selectors match.
func aggregate(t testing.TB, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, agg := range objs {
		if agg.GetKind() != "ClusterRole" {
			continue
		}
		selectors, found, _ := unstructured.NestedSlice(agg.Object, "aggregationRule", "clusterRoleSelectors")
		if !found {
			continue
		}
		var rules []any
		for _, s := range selectors {
			raw, _ := yaml.Marshal(s)
			var ls metav1.LabelSelector
			if err := yaml.Unmarshal(raw, &ls); err != nil {
				t.Fatalf("%s: selector: %v", agg.GetName(), err)
			}
			sel, err := metav1.LabelSelectorAsSelector(&ls)
			if err != nil {
				t.Fatalf("%s: selector: %v", agg.GetName(), err)
			}
			for _, r := range objs {
				if r.GetKind() == "ClusterRole" && r != agg && sel.Matches(labels.Set(r.GetLabels())) {
					more, _, _ := unstructured.NestedSlice(r.Object, "rules")
					rules = append(rules, more...)
				}
			}
		}
		if err := unstructured.SetNestedSlice(agg.Object, rules, "rules"); err != nil {
			t.Fatal(err)
		}
	}
}

// widgetCRD is the CRD the conversion reconciler writes: two versions and a
// conversion webhook on serving's webhook Service, with no caBundle yet
// (the reconciler fills it and the path). No Widget is ever stored, so
// kube-apiserver never calls the webhook.
func widgetCRD() *unstructured.Unstructured {
	version := func(name string, storage bool) any {
		return map[string]any{"name": name, "served": true, "storage": storage,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": KnativeWidgetCRD},
		"spec": map[string]any{
			"group":    "knative-writer.e2e.webhook-guard.io",
			"names":    map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"scope":    "Namespaced",
			"versions": []any{version("v1alpha1", false), version("v1", true)},
			"conversion": map[string]any{"strategy": "Webhook", "webhook": map[string]any{
				"conversionReviewVersions": []any{"v1"},
				"clientConfig": map[string]any{"service": map[string]any{
					"namespace": KnativeNamespace, "name": "webhook", "port": int64(443),
				}},
			}},
		},
	}}
	return u
}
