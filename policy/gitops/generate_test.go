package gitops

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// config is a GuardConfig with defaults applied holding owners.
func config(owners ...guardapi.Owner) *guardapi.GuardConfig {
	cfg := &guardapi.GuardConfig{Owners: owners}
	guardapi.SetDefaults(cfg)
	return cfg
}

var (
	injected = guardapi.Owner{
		Name:  "istio",
		Match: guardapi.Match{Mutating: []string{"istio-sidecar-injector"}},
		CA:    guardapi.CASource{InjectedByCertManager: &guardapi.InjectedByCertManager{}},
	}
	selfSigned = guardapi.Owner{
		Name:    "koordinator",
		Match:   guardapi.Match{Validating: []string{"koord-validating"}, Mutating: []string{"koord.mutating"}},
		Writers: guardapi.Subjects{ServiceAccounts: []string{"koordinator-system/koord-manager"}},
		CA:      guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: "koordinator-system", Name: "webhook-certs"}},
	}
	trustObjects = guardapi.Owner{
		Name:  "widgets",
		Match: guardapi.Match{CustomResourceDefinitions: []string{"widgets.example.com"}, APIServices: []string{"v1beta1.metrics.example.com"}},
		CA:    guardapi.CASource{InjectedByCertManager: &guardapi.InjectedByCertManager{}},
	}
	inline = guardapi.Owner{
		Name:    "fixed",
		Match:   guardapi.Match{Validating: []string{"fixed-webhook"}},
		Writers: guardapi.Subjects{Users: []string{"admin"}},
		CA:      guardapi.CASource{PEM: "-----BEGIN CERTIFICATE-----"},
	}
	selected = guardapi.Owner{
		Name:    "selected",
		Match:   guardapi.Match{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}},
		Writers: guardapi.Subjects{Users: []string{"admin"}},
		CA:      guardapi.CASource{Certificate: &guardapi.ObjectRef{Namespace: "x", Name: "x-cert"}},
	}
)

func Test_Generate(t *testing.T) {
	tests := map[string]struct {
		in       Input
		want     string
		warnings []string
	}{
		"if cainjector injects the CA, Argo CD ignores every entry's caBundle of the configuration": {
			in: Input{Config: config(injected), Tool: ToolArgoCD},
			want: `# Argo CD: paste under the Application's spec, and add RespectIgnoreDifferences=true
# to its spec.syncPolicy.syncOptions: without it a sync still writes Git's value.
# MutatingWebhookConfiguration istio-sidecar-injector: caBundle written by cert-manager's cainjector (cert-manager/cert-manager-cainjector)
ignoreDifferences:
- group: admissionregistration.k8s.io
  jqPathExpressions:
  - .webhooks[]?.clientConfig.caBundle
  kind: MutatingWebhookConfiguration
  name: istio-sidecar-injector
`,
		},
		"if a mapping names a CRD and an APIService, each tool ignores the one caBundle of each in its own API group": {
			in: Input{Config: config(trustObjects), Tool: ToolArgoCD},
			want: `# Argo CD: paste under the Application's spec, and add RespectIgnoreDifferences=true
# to its spec.syncPolicy.syncOptions: without it a sync still writes Git's value.
# APIService v1beta1.metrics.example.com: caBundle written by cert-manager's cainjector (cert-manager/cert-manager-cainjector)
# CustomResourceDefinition widgets.example.com: caBundle written by cert-manager's cainjector (cert-manager/cert-manager-cainjector)
ignoreDifferences:
- group: apiregistration.k8s.io
  jqPathExpressions:
  - .spec.caBundle
  kind: APIService
  name: v1beta1.metrics.example.com
- group: apiextensions.k8s.io
  jqPathExpressions:
  - .spec.conversion.webhook.clientConfig.caBundle
  kind: CustomResourceDefinition
  name: widgets.example.com
`,
		},
		"if Flux is asked for a CRD and an APIService, one pointer each": {
			in: Input{Config: config(trustObjects), Tool: ToolFlux},
			want: `# Flux: paste under the Kustomization's spec (kustomize-controller's ignore rules).
# APIService v1beta1.metrics.example.com: caBundle written by cert-manager's cainjector (cert-manager/cert-manager-cainjector)
# CustomResourceDefinition widgets.example.com: caBundle written by cert-manager's cainjector (cert-manager/cert-manager-cainjector)
ignore:
- paths:
  - /spec/caBundle
  target:
    group: apiregistration\.k8s\.io
    kind: APIService
    name: v1beta1\.metrics\.example\.com
    version: v1
- paths:
  - /spec/conversion/webhook/clientConfig/caBundle
  target:
    group: apiextensions\.k8s\.io
    kind: CustomResourceDefinition
    name: widgets\.example\.com
    version: v1
`,
		},
		"if the CA is inline, no rule, and the comment says why": {
			in: Input{Config: config(inline), Tool: ToolArgoCD},
			want: `# Argo CD: paste under the Application's spec, and add RespectIgnoreDifferences=true
# to its spec.syncPolicy.syncOptions: without it a sync still writes Git's value.
# mapping fixed: no rule, its CA is inline (pem), so Git can carry the caBundle
ignoreDifferences: []
`,
		},
		"if a patch is asked for, write the whole Application with the sync option": {
			in: Input{Config: config(selfSigned, inline), Tool: ToolArgoCD, Patch: "argocd/koordinator"},
			want: `# Argo CD: a merge patch of Application argocd/koordinator:
#   kubectl patch application koordinator -n argocd --type merge --patch-file FILE
# A merge patch replaces the lists it sets: merge them with the Application's own first.
# MutatingWebhookConfiguration koord.mutating: caBundle written by the writers of mapping koordinator (CA source secret)
# ValidatingWebhookConfiguration koord-validating: caBundle written by the writers of mapping koordinator (CA source secret)
# mapping fixed: no rule, its CA is inline (pem), so Git can carry the caBundle
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: koordinator
  namespace: argocd
spec:
  ignoreDifferences:
  - group: admissionregistration.k8s.io
    jqPathExpressions:
    - .webhooks[]?.clientConfig.caBundle
    kind: MutatingWebhookConfiguration
    name: koord.mutating
  - group: admissionregistration.k8s.io
    jqPathExpressions:
    - .webhooks[]?.clientConfig.caBundle
    kind: ValidatingWebhookConfiguration
    name: koord-validating
  syncPolicy:
    syncOptions:
    - RespectIgnoreDifferences=true
`,
		},
		"if a mapping selects by label, Argo CD has no rule for it and a warning says what to do": {
			in: Input{Config: config(selected), Tool: ToolArgoCD},
			want: `# Argo CD: paste under the Application's spec, and add RespectIgnoreDifferences=true
# to its spec.syncPolicy.syncOptions: without it a sync still writes Git's value.
# MutatingWebhookConfiguration selected by "app=x": caBundle written by the writers of mapping selected (CA source certificate)
# ValidatingWebhookConfiguration selected by "app=x": caBundle written by the writers of mapping selected (CA source certificate)
ignoreDifferences: []
`,
			warnings: []string{
				"owners[selected].match.labelSelector (app=x): Argo CD's ignoreDifferences selects by name, not by label; list the configurations under match.validating or match.mutating, or add a rule for kind MutatingWebhookConfiguration without a name (it then covers every MutatingWebhookConfiguration of the Application)",
				"owners[selected].match.labelSelector (app=x): Argo CD's ignoreDifferences selects by name, not by label; list the configurations under match.validating or match.mutating, or add a rule for kind ValidatingWebhookConfiguration without a name (it then covers every ValidatingWebhookConfiguration of the Application)",
			},
		},
		"if Flux is asked for, one rule per configuration names each entry's caBundle and quotes the names": {
			in: Input{Config: config(selfSigned), Tool: ToolFlux, WebhookEntries: 2},
			want: `# Flux: paste under the Kustomization's spec (kustomize-controller's ignore rules).
# MutatingWebhookConfiguration koord.mutating: caBundle written by the writers of mapping koordinator (CA source secret)
# ValidatingWebhookConfiguration koord-validating: caBundle written by the writers of mapping koordinator (CA source secret)
ignore:
- paths:
  - /webhooks/0/clientConfig/caBundle
  - /webhooks/1/clientConfig/caBundle
  target:
    group: admissionregistration\.k8s\.io
    kind: MutatingWebhookConfiguration
    name: koord\.mutating
    version: v1
- paths:
  - /webhooks/0/clientConfig/caBundle
  - /webhooks/1/clientConfig/caBundle
  target:
    group: admissionregistration\.k8s\.io
    kind: ValidatingWebhookConfiguration
    name: koord-validating
    version: v1
`,
		},
		"if a mapping selects by label, Flux's rule targets the selector": {
			in: Input{Config: config(selected), Tool: ToolFlux, WebhookEntries: 1, Patch: "flux-system/apps"},
			want: `# Flux: a merge patch of Kustomization flux-system/apps:
#   kubectl patch kustomization apps -n flux-system --type merge --patch-file FILE
# A merge patch replaces the lists it sets: merge them with the Kustomization's own first.
# MutatingWebhookConfiguration selected by "app=x": caBundle written by the writers of mapping selected (CA source certificate)
# ValidatingWebhookConfiguration selected by "app=x": caBundle written by the writers of mapping selected (CA source certificate)
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  ignore:
  - paths:
    - /webhooks/0/clientConfig/caBundle
    target:
      group: admissionregistration\.k8s\.io
      kind: MutatingWebhookConfiguration
      labelSelector: app=x
      version: v1
  - paths:
    - /webhooks/0/clientConfig/caBundle
    target:
      group: admissionregistration\.k8s\.io
      kind: ValidatingWebhookConfiguration
      labelSelector: app=x
      version: v1
`,
		},
		"if no entry count is given, Flux covers the default number": {
			in: Input{Config: config(injected), Tool: ToolFlux},
			want: `# Flux: paste under the Kustomization's spec (kustomize-controller's ignore rules).
# MutatingWebhookConfiguration istio-sidecar-injector: caBundle written by cert-manager's cainjector (cert-manager/cert-manager-cainjector)
ignore:
- paths:
  - /webhooks/0/clientConfig/caBundle
  - /webhooks/1/clientConfig/caBundle
  - /webhooks/2/clientConfig/caBundle
  - /webhooks/3/clientConfig/caBundle
  - /webhooks/4/clientConfig/caBundle
  - /webhooks/5/clientConfig/caBundle
  - /webhooks/6/clientConfig/caBundle
  - /webhooks/7/clientConfig/caBundle
  target:
    group: admissionregistration\.k8s\.io
    kind: MutatingWebhookConfiguration
    name: istio-sidecar-injector
    version: v1
`,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := Generate(test.in)
			require.NoError(t, err)
			assert.Equal(t, test.want, string(out.YAML))
			assert.Equal(t, test.warnings, out.Warnings)
		})
	}
}

func Test_Generate_invalid(t *testing.T) {
	tests := map[string]struct {
		in   Input
		want string
	}{
		"if the tool is unknown, name the supported ones": {
			in:   Input{Config: config(injected), Tool: "jenkins"},
			want: `tool: Unsupported value: "jenkins": supported values: "argocd", "flux"`,
		},
		"if the patch is not namespace/name, say so": {
			in:   Input{Config: config(injected), Tool: ToolArgoCD, Patch: "apps"},
			want: `patch: Invalid value: "apps": must be "namespace/name"`,
		},
		"if the entry count is negative, say so": {
			in:   Input{Config: config(injected), Tool: ToolFlux, WebhookEntries: -1},
			want: `webhookEntries: Invalid value: -1: must be at least 1 (0: the default)`,
		},
		"if no config is given, say it is required": {
			in:   Input{Tool: ToolFlux},
			want: `config: Required value: the GuardConfig`,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Generate(test.in)
			require.Error(t, err)
			assert.Equal(t, test.want, err.Error())
		})
	}
}

// Test_WrittenAtRunTime_everyKind: every CA source kind has its decision,
// so a new kind cannot fall silently on either side.
func Test_WrittenAtRunTime_everyKind(t *testing.T) {
	for _, k := range guardapi.CASourceKinds() {
		_, ok := writtenAtRunTime[k]
		assert.True(t, ok, "CA source kind %s has no entry in writtenAtRunTime", k)
	}
	assert.Len(t, writtenAtRunTime, len(guardapi.CASourceKinds()))
}

// Test_OwnedFields_everyKind: one mapping per kind; only pem is kept.
func Test_OwnedFields_everyKind(t *testing.T) {
	var owners []guardapi.Owner
	for _, k := range guardapi.CASourceKinds() {
		owners = append(owners, guardapi.Owner{Name: string(k), Match: guardapi.Match{Validating: []string{string(k)}}, CA: k.Example()})
	}
	owned, kept, err := OwnedFields(config(owners...))
	require.NoError(t, err)
	var names []string
	for _, o := range owned {
		names = append(names, o.Name)
	}
	assert.Equal(t, []string{"certificate", "configMap", "injectedByCertManager", "issuer", "secret"}, names)
	assert.Equal(t, []Kept{{Mapping: "pem", Reason: "its CA is inline (pem), so Git can carry the caBundle"}}, kept)
}
