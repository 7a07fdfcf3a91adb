package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// seededWorkload is what a controller serving a webhook has in a real
// cluster: a ServiceAccount, a Deployment running as it and mounting a
// Secret, a Service selecting the Deployment's pods, and (standing in for the
// EndpointSlice controller, which does not run here) an EndpointSlice.
type seededWorkload struct {
	namespace, name string
	// secret is the mounted Secret; data its content.
	secret string
	data   map[string][]byte
	// secretMeta adds annotations and a type to the Secret (cert-manager's format).
	annotations map[string]string
	secretType  corev1.SecretType
	// ready is how many ready endpoints the EndpointSlice lists.
	ready int
	// unmounted leaves the Secret out of the pod template: the controller
	// reads it through the API instead.
	unmounted bool
}

func (w seededWorkload) service() string { return w.name + "-webhook" }

func seedWorkload(t *testing.T, kube kubernetes.Interface, w seededWorkload) {
	t.Helper()
	ctx := t.Context()
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.namespace}}, metav1.CreateOptions{})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("create namespace %s: %v", w.namespace, err)
	}
	labels := map[string]string{"app.kubernetes.io/name": w.name}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("create %s %s/%s: %v", what, w.namespace, w.name, err)
		}
	}
	_, err = kube.CoreV1().ServiceAccounts(w.namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: w.name}}, metav1.CreateOptions{})
	must("ServiceAccount", err)
	_, err = kube.CoreV1().Secrets(w.namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: w.secret, Annotations: w.annotations}, Type: w.secretType, Data: w.data}, metav1.CreateOptions{})
	must("Secret", err)
	pod := corev1.PodSpec{
		ServiceAccountName: w.name,
		Containers: []corev1.Container{{Name: "manager", Image: "example.invalid/" + w.name,
			VolumeMounts: []corev1.VolumeMount{{Name: "certs", MountPath: "/certs", ReadOnly: true}}}},
		Volumes: []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: w.secret}}}},
	}
	if w.unmounted {
		pod.Containers[0].VolumeMounts, pod.Volumes = nil, nil
	}
	_, err = kube.AppsV1().Deployments(w.namespace).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: w.name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
		},
	}, metav1.CreateOptions{})
	must("Deployment", err)
	_, err = kube.CoreV1().Services(w.namespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: w.service()},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 443}}},
	}, metav1.CreateOptions{})
	must("Service", err)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: w.service() + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: w.service()}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](9443)}},
	}
	for i := range w.ready {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.1.0.%d", i+1)}, Conditions: discoveryv1.EndpointConditions{Ready: new(true)}})
	}
	_, err = kube.DiscoveryV1().EndpointSlices(w.namespace).Create(ctx, slice, metav1.CreateOptions{})
	must("EndpointSlice", err)
}

// healthyWebhook is a webhook entry with nothing for scan to report: its
// failurePolicy Fail rules exclude kube-system, kube-node-lease and its own
// namespace, and it matches a resource nothing creates.
func healthyWebhook(name string, cc admv1.WebhookClientConfig, ownNamespace string) admv1.ValidatingWebhook {
	return admv1.ValidatingWebhook{
		Name: name, ClientConfig: cc, AdmissionReviewVersions: []string{"v1"},
		FailurePolicy: ptr.To(admv1.Fail), SideEffects: ptr.To(admv1.SideEffectClassNone), TimeoutSeconds: ptr.To[int32](5),
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "kube-node-lease", ownNamespace}}}},
		Rules: []admv1.RuleWithOperations{{Operations: []admv1.OperationType{admv1.Create},
			Rule: admv1.Rule{APIGroups: []string{"e2e.webhook-guard.io"}, APIVersions: []string{"v1"}, Resources: []string{"widgets"}}}},
	}
}

func serviceClient(w seededWorkload, bundle []byte) admv1.WebhookClientConfig {
	return admv1.WebhookClientConfig{Service: &admv1.ServiceReference{Namespace: w.namespace, Name: w.service()}, CABundle: bundle}
}

// createValidating creates a configuration as the admin with a field manager
// name, as the controller that writes it would.
func createValidating(t *testing.T, kube kubernetes.Interface, name, manager string, annotations map[string]string, webhooks ...admv1.ValidatingWebhook) {
	t.Helper()
	_, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(),
		&admv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}, Webhooks: webhooks},
		metav1.CreateOptions{FieldManager: manager})
	if err != nil {
		t.Fatalf("create ValidatingWebhookConfiguration %s: %v", name, err)
	}
}

// discoverCluster seeds the configurations discover must decide: a
// cert-manager-injected one, a Koordinator-style one whose controller
// writes the CA from the Secret it mounts, one whose caBundle has two field
// managers, and a URL-based one.
type discoverCluster struct {
	issuerCA, koordCA, sharedCA *framework.CA
	app, koord, shared          seededWorkload
}

func seedDiscoverCluster(t *testing.T, env *framework.Env) *discoverCluster {
	t.Helper()
	ctx := t.Context()
	kube := env.AdminKube
	d := &discoverCluster{issuerCA: framework.NewCA(t, "app-issuer-ca"), koordCA: framework.NewCA(t, "koord-ca"), sharedCA: framework.NewCA(t, "shared-ca")}

	// cert-manager: a Certificate and the Secret it issued, mounted by the
	// application's controller; cainjector fills the caBundle.
	d.app = seededWorkload{namespace: "app-system", name: "app-controller", secret: "app-serving-cert", ready: 1, secretType: corev1.SecretTypeTLS,
		annotations: map[string]string{"cert-manager.io/certificate-name": "app-serving-cert", "cert-manager.io/issuer-name": "app-ca", "cert-manager.io/issuer-kind": "Issuer"}}
	d.app.data = framework.SecretData(d.issuerCA, d.issuerCA.Issue(t, "app-controller-webhook", "app-controller-webhook.app-system.svc"))
	seedWorkload(t, kube, d.app)
	certGVR := schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
	_, err := dynamic.NewForConfigOrDie(env.Admin).Resource(certGVR).Namespace("app-system").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
		"metadata": map[string]any{"name": "app-serving-cert", "namespace": "app-system"},
		"spec": map[string]any{"secretName": "app-serving-cert", "dnsNames": []any{"app-controller-webhook.app-system.svc"},
			"issuerRef": map[string]any{"name": "app-ca", "kind": "Issuer"}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the cert-manager Certificate: %v", err)
	}
	createValidating(t, kube, "app-validating", "cainjector", map[string]string{"cert-manager.io/inject-ca-from": "app-system/app-serving-cert"},
		healthyWebhook("v.app.example.com", serviceClient(d.app, d.issuerCA.PEM), "app-system"))

	// Koordinator: koord-manager generates its CA into webhook-certs (its
	// own key names) and writes it into both of its configurations. As in
	// Koordinator's install manifests, it does not mount webhook-certs: it
	// reads and writes it through the API.
	koordLeaf := d.koordCA.Issue(t, "koord-manager-webhook", "koord-manager-webhook.koordinator-system.svc")
	d.koord = seededWorkload{namespace: "koordinator-system", name: "koord-manager", secret: "webhook-certs", ready: 2, unmounted: true,
		data: map[string][]byte{"ca-cert.pem": d.koordCA.PEM, "ca-key.pem": d.koordCA.KeyPEM, "cert.pem": koordLeaf.CertPEM, "key.pem": koordLeaf.KeyPEM}}
	seedWorkload(t, kube, d.koord)
	seedLookalike(t, env, lookalikeNamespace, d.koordCA.PEM)
	createValidating(t, kube, "koord-validating-webhook-configuration", "koord-manager", nil,
		healthyWebhook("vpod.koordinator.sh", serviceClient(d.koord, d.koordCA.PEM), "koordinator-system"))
	mwh := healthyWebhook("mpod.koordinator.sh", serviceClient(d.koord, d.koordCA.PEM), "koordinator-system")
	_, err = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "koord-mutating-webhook-configuration"},
		Webhooks: []admv1.MutatingWebhook{{Name: mwh.Name, ClientConfig: mwh.ClientConfig, AdmissionReviewVersions: mwh.AdmissionReviewVersions,
			FailurePolicy: mwh.FailurePolicy, SideEffects: mwh.SideEffects, TimeoutSeconds: mwh.TimeoutSeconds, NamespaceSelector: mwh.NamespaceSelector, Rules: mwh.Rules}},
	}, metav1.CreateOptions{FieldManager: "koord-manager"})
	if err != nil {
		t.Fatalf("create the Koordinator MutatingWebhookConfiguration: %v", err)
	}

	// Two writers: the owner writes the CA, then another tool applies the
	// same caBundle (server-side apply shares the field between managers).
	sharedLeaf := d.sharedCA.Issue(t, "shared-controller-webhook", "shared-controller-webhook.shared-system.svc")
	d.shared = seededWorkload{namespace: "shared-system", name: "shared-controller", secret: "shared-webhook-tls", ready: 1,
		data: framework.SecretData(d.sharedCA, sharedLeaf)}
	seedWorkload(t, kube, d.shared)
	createValidating(t, kube, "shared-webhooks", "shared-controller", nil,
		healthyWebhook("v.shared.example.com", serviceClient(d.shared, d.sharedCA.PEM), "shared-system"))
	applyCABundle(t, kube, "shared-webhooks", "v.shared.example.com", "rogue-injector", d.sharedCA.PEM)

	// A webhook reached by URL: no Service, so no workload to name.
	createValidating(t, kube, "url-webhooks", "kubectl-client-side-apply", nil,
		healthyWebhook("v.url.example.com", admv1.WebhookClientConfig{URL: new("https://10.0.0.9:8443/validate"), CABundle: framework.NewCA(t, "url-ca").PEM}, ""))
	return d
}

// lookalikeNamespace is named like Koordinator's namespace.
const lookalikeNamespace = "koordinator-systen"

// seedLookalike is what anyone allowed to create a namespace and a
// cert-manager Certificate can set up: a Certificate (so that discover reads
// the namespace's Secrets) and its Secret holding a copy of a victim's
// public CA certificate, named like the victim's.
func seedLookalike(t *testing.T, env *framework.Env, namespace string, victimCA []byte) {
	t.Helper()
	ctx := t.Context()
	kube := env.AdminKube
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", namespace, err)
	}
	_, err := kube.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "webhook-certs"},
		Data: map[string][]byte{"ca.crt": victimCA}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the lookalike Secret: %v", err)
	}
	certGVR := schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
	_, err = dynamic.NewForConfigOrDie(env.Admin).Resource(certGVR).Namespace(namespace).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
		"metadata": map[string]any{"name": "webhook-certs", "namespace": namespace},
		"spec": map[string]any{"secretName": "webhook-certs", "dnsNames": []any{"lookalike.example.com"},
			"issuerRef": map[string]any{"name": "lookalike", "kind": "Issuer"}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the lookalike Certificate: %v", err)
	}
}

// applyCABundle server-side applies one webhook's caBundle as manager.
func applyCABundle(t *testing.T, kube kubernetes.Interface, config, webhook, manager string, bundle []byte) {
	t.Helper()
	patch := map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
		"metadata": map[string]any{"name": config},
		"webhooks": []any{map[string]any{"name": webhook, "clientConfig": map[string]any{"caBundle": bundle}}},
	}
	b, err := yaml.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = yaml.YAMLToJSON(b); err != nil {
		t.Fatal(err)
	}
	_, err = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(t.Context(), config, types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: manager})
	if err != nil {
		t.Fatalf("%s applies the caBundle of %s: %v", manager, config, err)
	}
}

// TestDiscoverProposesOwners seeds a cluster set up like a real one, runs
// `discover`, checks every mapping and the undecided URL webhook, checks the
// values pass the chart's schema, then runs the guard with the proposal:
// each owner's own writes leave no record and the second writer is recorded.
func TestDiscoverProposesOwners(t *testing.T) {
	t.Parallel()
	env := framework.Start(t, framework.Options{Config: &guardapi.GuardConfig{
		BreakGlass: guardapi.Subjects{Groups: []string{"system:masters"}}, Unmanaged: guardapi.UnmanagedAllow, Owners: []guardapi.Owner{},
	}, CertManagerCRDs: true})
	d := seedDiscoverCluster(t, env)
	kubeconfig := env.Kubeconfig(t, envtest.User{Name: "e2e-discoverer", Groups: []string{"system:masters"}})

	proposal, code := cli(t, "discover", "--format", "config", "--kubeconfig", kubeconfig)
	if code != 0 {
		t.Fatalf("discover exited %d:\n%s", code, proposal)
	}
	t.Logf("discover --format config:\n%s", proposal)
	cfg, err := policy.Load([]byte(proposal))
	if err != nil {
		t.Fatalf("the proposal does not load: %v\n%s", err, proposal)
	}
	want := []guardapi.Owner{
		{Name: "app-controller", Match: guardapi.Match{Validating: []string{"app-validating"}},
			Writers: guardapi.Subjects{ServiceAccounts: []string{"app-system/app-controller"}},
			CA: guardapi.CASource{InjectedByCertManager: &guardapi.InjectedByCertManager{
				Certificate: &guardapi.ObjectRef{Namespace: "app-system", Name: "app-serving-cert"},
			}}},
		{Name: "koord-manager", Match: guardapi.Match{Validating: []string{"koord-validating-webhook-configuration"}, Mutating: []string{"koord-mutating-webhook-configuration"}},
			Writers: guardapi.Subjects{ServiceAccounts: []string{"koordinator-system/koord-manager"}},
			CA:      guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: "koordinator-system", Name: "webhook-certs", Key: "ca-cert.pem"}}},
		{Name: "shared-controller", Match: guardapi.Match{Validating: []string{"shared-webhooks"}},
			Writers: guardapi.Subjects{ServiceAccounts: []string{"shared-system/shared-controller"}},
			CA:      guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: "shared-system", Name: "shared-webhook-tls", Key: "ca.crt"}}},
	}
	if mustYAML(t, cfg.Spec.Owners) != mustYAML(t, want) {
		t.Errorf("proposed owners:\n%s\nwant:\n%s", mustYAML(t, cfg.Spec.Owners), mustYAML(t, want))
	}
	for _, s := range []string{
		"#   ValidatingWebhookConfiguration/shared-webhooks: caBundle field managers: rogue-injector, shared-controller (2 writers of caBundle",
		"# - ValidatingWebhookConfiguration/url-webhooks:\n#     undecided: webhooks[0] calls clientConfig.url https://10.0.0.9:8443/validate, not a Service: no workload, so no service account to name as the writer\n",
		"#     undecided: the caBundle's CA ",
		// The lookalike copy of Koordinator's CA is evidence, not a rival
		// source that would leave Koordinator undecided.
		"#   ValidatingWebhookConfiguration/koord-validating-webhook-configuration: copies of the caBundle's CA " + d.koordCA.Fingerprint()[:16] +
			" outside the webhooks' namespace, not taken as the source: Secret " + lookalikeNamespace + "/webhook-certs key ca.crt",
	} {
		if !strings.Contains(proposal, s) {
			t.Errorf("the proposal lacks %q", s)
		}
	}

	t.Run("the Helm values pass the chart's schema", func(t *testing.T) {
		values, code := cli(t, "discover", "--kubeconfig", kubeconfig)
		if code != 0 {
			t.Fatalf("discover exited %d", code)
		}
		p := filepath.Join(t.TempDir(), "discovered.yaml")
		if err := os.WriteFile(p, []byte(values), 0o600); err != nil {
			t.Fatal(err)
		}
		root := framework.RepoRoot()
		cmd := exec.CommandContext(t.Context(), filepath.Join(root, "bin", "helm"), "template", "wg", filepath.Join(root, "charts", "webhook-guard"), "--namespace", "webhook-guard", "--values", p)
		home := t.TempDir()
		cmd.Env = append(os.Environ(), "HOME="+home, "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helm template with the discovered values: %v\n%s\nvalues:\n%s", err, lastLines(string(out), 20), values)
		}
		if !strings.Contains(string(out), "koordinator-system/koord-manager") {
			t.Errorf("the rendered guard config does not carry the discovered mappings")
		}
	})

	// The guard runs with the proposal as it is.
	env.Guard.RewriteConfigFile(t, []byte(proposal), "success")
	ctx := t.Context()
	writes := []struct {
		who    *framework.Client
		kind   framework.Kind
		name   string
		bundle []byte
	}{
		{env.ServiceAccount(t, "cert-manager", "cert-manager-cainjector"), framework.Validating, "app-validating", d.issuerCA.PEM},
		{env.ServiceAccount(t, "koordinator-system", "koord-manager"), framework.Validating, "koord-validating-webhook-configuration", d.koordCA.PEM},
		{env.ServiceAccount(t, "koordinator-system", "koord-manager"), framework.Mutating, "koord-mutating-webhook-configuration", d.koordCA.PEM},
		{env.ServiceAccount(t, "shared-system", "shared-controller"), framework.Validating, "shared-webhooks", d.sharedCA.PEM},
	}
	// Each write changes the stored bytes (a trailing newline: the same
	// certificate), so it is a real update.
	for _, w := range writes {
		if _, err := w.who.SetCABundle(ctx, w.kind, w.name, append(slices.Clone(w.bundle), '\n')); err != nil {
			t.Errorf("%s writing its own CA into %s was rejected: %v", w.who.User.Name, w.name, err)
		}
		if ws := w.who.Warnings.Take(); len(ws) > 0 {
			t.Errorf("%s writing its own CA into %s got warnings %q", w.who.User.Name, w.name, ws)
		}
	}
	rogue := env.ServiceAccount(t, "shared-system", "rogue-injector")
	if _, err := rogue.SetCABundle(ctx, framework.Validating, "shared-webhooks", d.sharedCA.PEM); err != nil {
		t.Fatalf("audit mode rejected the second writer: %v", err)
	}
	waitForRecord(t, env.Guard, "the second writer", func(r framework.Record) bool {
		return r.Name == "shared-webhooks" && r.Subject == rogue.User.Name && r.Rule == "not-owner" && r.Outcome == "audit" && r.Mapping == "shared-controller"
	})
	for _, w := range writes {
		for _, r := range env.Guard.RecordsFor(w.name) {
			if r.Subject == w.who.User.Name {
				t.Errorf("an owner's own write was recorded: %s", r.Raw)
			}
		}
	}
}

func mustYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestScanReportsWebhookHealth seeds one configuration per health problem
// and a healthy one, and checks scan names each problem's field and fix and
// says nothing about the healthy one.
func TestScanReportsWebhookHealth(t *testing.T) {
	t.Parallel()
	env := framework.Start(t, framework.Options{Config: &guardapi.GuardConfig{
		BreakGlass: guardapi.Subjects{Groups: []string{"system:masters"}}, Unmanaged: guardapi.UnmanagedAllow, Owners: []guardapi.Owner{},
	}})
	kube := env.AdminKube
	const ns = "health-system"
	healthCA := framework.NewCA(t, "health-ca")
	ctrl := seededWorkload{namespace: ns, name: "health-ctrl", secret: "health-ctrl-tls", ready: 1,
		data: framework.SecretData(healthCA, healthCA.Issue(t, "health-ctrl-webhook", "health-ctrl-webhook."+ns+".svc"))}
	seedWorkload(t, kube, ctrl)
	empty := seededWorkload{namespace: ns, name: "empty-ctrl", secret: "empty-ctrl-tls", ready: 0,
		data: framework.SecretData(healthCA, healthCA.Issue(t, "empty-ctrl-webhook", "empty-ctrl-webhook."+ns+".svc"))}
	seedWorkload(t, kube, empty)
	soon, err := testpki.NewCA("expiring-ca", testpki.WithValidity(time.Now().Add(-time.Hour), time.Now().Add(30*time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	soonLeaf, err := soon.Issue("expiring-ctrl-webhook", "expiring-ctrl-webhook."+ns+".svc")
	if err != nil {
		t.Fatal(err)
	}
	expiring := seededWorkload{namespace: ns, name: "expiring-ctrl", secret: "expiring-ctrl-tls", ready: 1, data: testpki.SecretData(soon, soonLeaf)}
	seedWorkload(t, kube, expiring)

	ok := func(name string) admv1.ValidatingWebhook {
		return healthyWebhook(name, serviceClient(ctrl, healthCA.PEM), ns)
	}
	createValidating(t, kube, "health-ok", "health-ctrl", nil, ok("ok.health.example.com"))
	createValidating(t, kube, "health-no-endpoints", "empty-ctrl", nil, healthyWebhook("ep.health.example.com", serviceClient(empty, healthCA.PEM), ns))
	createValidating(t, kube, "health-cert-mismatch", "health-ctrl", nil, healthyWebhook("cert.health.example.com", serviceClient(ctrl, framework.NewCA(t, "unrelated-ca").PEM), ns))
	createValidating(t, kube, "health-cert-expiring", "expiring-ctrl", nil, healthyWebhook("exp.health.example.com", serviceClient(expiring, soon.PEM), ns))
	scope := ok("scope.health.example.com")
	scope.NamespaceSelector = nil
	createValidating(t, kube, "health-fail-scope", "health-ctrl", nil, scope)
	slow := ok("slow.health.example.com")
	slow.TimeoutSeconds = ptr.To[int32](30)
	createValidating(t, kube, "health-timeout", "health-ctrl", nil, slow)
	createValidating(t, kube, "health-two-writers", "health-ctrl", nil, ok("two.health.example.com"))
	applyCABundle(t, kube, "health-two-writers", "two.health.example.com", "second-writer", healthCA.PEM)

	kubeconfig := env.Kubeconfig(t, envtest.User{Name: "e2e-scanner", Groups: []string{"system:masters"}})
	// The framework's CAs live a day; the expiring one half an hour.
	out, code := cli(t, "scan", "-o", "json", "--expiry-threshold", "1h", "--kubeconfig", kubeconfig)
	if code != 1 {
		t.Fatalf("scan exited %d; want 1 (problems found):\n%s", code, out)
	}
	var res struct {
		Findings []struct {
			Level, Check, Configuration, Field, Detail, Suggestion string
		} `json:"findings"`
	}
	if err := yaml.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("scan -o json: %v\n%s", err, out)
	}
	want := []struct{ level, check, config, field, fix string }{
		{"fail", "no-ready-endpoints", "health-no-endpoints", "webhooks[0].clientConfig.service", "run the webhook's pods behind Service health-system/empty-ctrl-webhook, or set failurePolicy: Ignore"},
		{"fail", "serving-cert", "health-cert-mismatch", "webhooks[0].clientConfig.caBundle", "make the caBundle hold the CA that signs the serving certificate"},
		{"warn", "serving-cert", "health-cert-expiring", "webhooks[0].clientConfig.caBundle", "renew the serving certificate in Secret health-system/expiring-ctrl-tls"},
		{"warn", "fail-catches-system-namespaces", "health-fail-scope", "webhooks[0].namespaceSelector", "values: [kube-system, kube-node-lease, health-system]"},
		{"warn", "timeout", "health-timeout", "webhooks[0].timeoutSeconds", "set webhooks[0].timeoutSeconds to 10 or less"},
		{"warn", "multiple-ca-writers", "health-two-writers", "webhooks[].clientConfig.caBundle", "keep one CA writer"},
	}
	for _, w := range want {
		found := false
		for _, f := range res.Findings {
			found = found || (f.Level == w.level && f.Check == w.check && f.Configuration == "ValidatingWebhookConfiguration/"+w.config &&
				f.Field == w.field && strings.Contains(f.Suggestion, w.fix))
		}
		if !found {
			t.Errorf("scan did not report %s %s on %s %s with fix %q:\n%s", w.level, w.check, w.config, w.field, w.fix, out)
		}
	}
	for _, f := range res.Findings {
		if f.Configuration == "ValidatingWebhookConfiguration/health-ok" {
			t.Errorf("scan reported the healthy configuration: %+v", f)
		}
	}
	if len(res.Findings) != len(want) {
		t.Errorf("scan reported %d findings; want exactly the %d seeded:\n%s", len(res.Findings), len(want), out)
	}
}

// TestDiscoverAndScanScale times discover and scan (the CLI processes, as
// a user runs them) over 200 configurations served by 20 controllers, and
// checks that every configuration is mapped and healthy.
func TestDiscoverAndScanScale(t *testing.T) {
	t.Parallel()
	env := framework.Start(t, framework.Options{Config: &guardapi.GuardConfig{
		BreakGlass: guardapi.Subjects{Groups: []string{"system:masters"}}, Unmanaged: guardapi.UnmanagedAllow, Owners: []guardapi.Owner{},
	}})
	const controllers, perController = 20, 10
	for i := range controllers {
		ca := framework.NewCA(t, fmt.Sprintf("ctrl-%d-ca", i))
		w := seededWorkload{namespace: fmt.Sprintf("team-%02d", i), name: fmt.Sprintf("ctrl-%02d", i), secret: "webhook-tls", ready: 1}
		w.data = framework.SecretData(ca, ca.Issue(t, w.service(), w.service()+"."+w.namespace+".svc"))
		seedWorkload(t, env.AdminKube, w)
		for j := range perController {
			createValidating(t, env.AdminKube, fmt.Sprintf("%s-%d", w.name, j), w.name, nil,
				healthyWebhook("v.scale.example.com", serviceClient(w, ca.PEM), w.namespace))
		}
	}
	kubeconfig := env.Kubeconfig(t, envtest.User{Name: "e2e-scale", Groups: []string{"system:masters"}})

	start := time.Now()
	proposal, discoverErr, code := runCLI(t, "discover", "--format", "config", "--kubeconfig", kubeconfig)
	discoverTook := time.Since(start)
	start = time.Now()
	scanOut, scanErr, scanCode := runCLI(t, "scan", "--expiry-threshold", "1h", "--kubeconfig", kubeconfig)
	scanTook := time.Since(start)
	t.Logf("%d configurations: discover %s, scan %s (each a whole CLI process)", controllers*perController, discoverTook.Round(time.Millisecond), scanTook.Round(time.Millisecond))

	if code != 0 {
		t.Fatalf("discover exited %d:\n%s", code, discoverErr)
	}
	cfg, err := policy.Load([]byte(proposal))
	if err != nil {
		t.Fatalf("the proposal does not load: %v", err)
	}
	mapped := 0
	for _, o := range cfg.Spec.Owners {
		mapped += len(o.Match.Validating)
	}
	if len(cfg.Spec.Owners) != controllers || mapped != controllers*perController {
		t.Errorf("discover proposed %d mappings covering %d configurations; want %d covering %d", len(cfg.Spec.Owners), mapped, controllers, controllers*perController)
	}
	if scanCode != 0 || !strings.Contains(scanOut, "No findings.") {
		t.Errorf("scan of healthy configurations exited %d:\n%s\n%s", scanCode, scanOut, scanErr)
	}
}
