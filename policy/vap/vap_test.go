package vap

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/policy"
)

const namesConfig = `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
defaultMode: audit
breakGlass:
  groups: [system:masters]
  users: [admin]
owners:
  - name: koordinator
    mode: enforce
    match:
      validating: [koord-validating]
      mutating: [koord-mutating]
    writers:
      serviceAccounts: [koordinator-system/koord-manager]
      groups: [koord-admins]
    ca:
      secret: {namespace: koordinator-system, name: webhook-certs}
  - name: audited
    match:
      validating: [audited-webhooks]
    writers:
      users: [alice]
    ca:
      certificate: {namespace: audited, name: serving}
`

const selectorConfig = `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
defaultMode: enforce
breakGlass:
  groups: [system:masters]
owners:
  - name: labelled
    match:
      labelSelector:
        matchLabels: {app.kubernetes.io/part-of: labelled}
    writers:
      serviceAccounts: [labelled/controller]
    ca:
      configMap: {namespace: labelled, name: ca}
  - name: injected
    match:
      mutating: [istio-sidecar-injector]
    ca:
      injectedByCertManager: {}
`

const bothConfig = `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
owners:
  - name: both
    match:
      validating: [both-webhooks]
      labelSelector:
        matchExpressions: [{key: team, operator: In, values: [a, b]}]
    writers:
      users: [bob]
    ca:
      secret: {namespace: both, name: ca}
`

func load(t *testing.T, cfg string) *policy.Config {
	t.Helper()
	c, err := policy.Load([]byte(cfg))
	require.NoError(t, err)
	return c
}

func generate(t *testing.T, cfg string) *Objects {
	t.Helper()
	c := load(t, cfg)
	cas := map[string]CA{}
	for _, o := range c.Spec.Owners {
		cas[o.Name] = CA{PEM: []byte("owner CA of " + o.Name), Source: "test source of " + o.Name, Fingerprints: []string{"0123456789abcdef"}}
	}
	objs, err := Generate(Input{Config: c, Namespace: "webhook-guard", CAs: cas, GuardServiceAccount: "webhook-guard/webhook-guard"})
	require.NoError(t, err)
	return objs
}

func Test_Generate(t *testing.T) {
	t.Run("if a mapping enforces, its binding denies; if it audits, it warns and audits", func(t *testing.T) {
		objs := generate(t, namesConfig)
		names := map[string][]admv1.ValidationAction{}
		for _, b := range objs.Bindings {
			names[b.Name] = b.Spec.ValidationActions
		}
		assert.Equal(t, map[string][]admv1.ValidationAction{
			"webhook-guard-koordinator":    {admv1.Deny},
			"webhook-guard-audited":        {admv1.Warn, admv1.Audit},
			"webhook-guard-protect-params": {admv1.Deny},
		}, names)
	})
	t.Run("if mappings are generated, each binding refers to its param ConfigMap and is skipped, never failed, while it is missing", func(t *testing.T) {
		objs := generate(t, namesConfig)
		b := objs.Bindings[1]
		require.Equal(t, "webhook-guard-koordinator", b.Name)
		assert.Equal(t, "webhook-guard-koordinator", b.Spec.PolicyName)
		assert.Equal(t, &admv1.ParamRef{Name: "webhook-guard-ca-koordinator", Namespace: "webhook-guard", ParameterNotFoundAction: ptrTo(admv1.AllowAction)}, b.Spec.ParamRef)
		assert.Equal(t, map[string]string{LabelManagedBy: ManagedBy, LabelMapping: "koordinator"}, b.Labels)
	})
	t.Run("if the CA is resolved, the param holds its bytes in binaryData and its source in data", func(t *testing.T) {
		objs := generate(t, namesConfig)
		require.Len(t, objs.ConfigMaps, 2)
		cm := objs.ConfigMaps[1]
		assert.Equal(t, "webhook-guard-ca-koordinator", cm.Name)
		assert.Equal(t, "webhook-guard", cm.Namespace)
		assert.Equal(t, map[string][]byte{"caBundle": []byte("owner CA of koordinator")}, cm.BinaryData)
		assert.Equal(t, map[string]string{"source": "test source of koordinator", "fingerprints": "0123456789abcdef"}, cm.Data)
	})
	t.Run("if the CA is not resolved, the param holds no CA and says why", func(t *testing.T) {
		c := load(t, namesConfig)
		objs, err := Generate(Input{Config: c, Namespace: "ns", CAs: map[string]CA{"koordinator": {Err: "Secret koordinator-system/webhook-certs: not found"}}})
		require.NoError(t, err)
		assert.Nil(t, objs.ConfigMaps[1].BinaryData)
		assert.Equal(t, map[string]string{"error": "Secret koordinator-system/webhook-certs: not found"}, objs.ConfigMaps[1].Data)
		assert.Equal(t, map[string]string{"error": "the guard has not resolved the owner's CA"}, objs.ConfigMaps[0].Data)
		assert.Len(t, objs.Policies, 2, "no guard service account, no protect-params policy")
	})
	t.Run("if a mapping names configurations, matchConditions select them by kind and name and skip break-glass", func(t *testing.T) {
		p := generate(t, namesConfig).Policies[1]
		require.Equal(t, "webhook-guard-koordinator", p.Name)
		assert.Equal(t, []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}, p.Spec.MatchConstraints.ResourceRules[0].Resources)
		assert.Equal(t, []admv1.OperationType{admv1.Create, admv1.Update, admv1.Delete}, p.Spec.MatchConstraints.ResourceRules[0].Operations)
		assert.Equal(t, []admv1.MatchCondition{
			{Name: "owned-configuration", Expression: `(request.kind.kind == "MutatingWebhookConfiguration" && ` + requestName + ` in ["koord-mutating"]) || (request.kind.kind == "ValidatingWebhookConfiguration" && ` + requestName + ` in ["koord-validating"])`},
			{Name: "not-break-glass", Expression: `!((has(request.userInfo.username) && request.userInfo.username in ["admin"]) || (has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ["system:masters"])))`},
		}, p.Spec.MatchConditions)
		assert.Equal(t, `(has(request.userInfo.username) && request.userInfo.username in ["system:serviceaccount:koordinator-system:koord-manager"]) || (has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ["koord-admins"]))`, variable(t, p, "isWriter"))
	})
	t.Run("if a mapping only names validating configurations, only that resource is matched", func(t *testing.T) {
		p := generate(t, namesConfig).Policies[0]
		require.Equal(t, "webhook-guard-audited", p.Name)
		assert.Equal(t, []string{"validatingwebhookconfigurations"}, p.Spec.MatchConstraints.ResourceRules[0].Resources)
	})
	t.Run("if a mapping selects by label, the objectSelector carries the selector and no name condition is added", func(t *testing.T) {
		objs := generate(t, selectorConfig)
		p := objs.Policies[1]
		require.Equal(t, "webhook-guard-labelled", p.Name)
		assert.Equal(t, map[string]string{"app.kubernetes.io/part-of": "labelled"}, p.Spec.MatchConstraints.ObjectSelector.MatchLabels)
		require.Len(t, p.Spec.MatchConditions, 1)
		assert.Equal(t, "not-break-glass", p.Spec.MatchConditions[0].Name)
	})
	t.Run("if the CA is injected by cert-manager, cainjector is a writer", func(t *testing.T) {
		p := generate(t, selectorConfig).Policies[0]
		require.Equal(t, "webhook-guard-injected", p.Name)
		assert.Equal(t, `(has(request.userInfo.username) && request.userInfo.username in ["system:serviceaccount:cert-manager:cert-manager-cainjector"])`, variable(t, p, "isWriter"))
	})
	t.Run("if a mapping has names and a selector, two policies share its param", func(t *testing.T) {
		objs := generate(t, bothConfig)
		require.Len(t, objs.Policies, 3)
		assert.Equal(t, "webhook-guard-both", objs.Policies[0].Name)
		assert.Equal(t, "webhook-guard-both-selected", objs.Policies[1].Name)
		assert.Equal(t, objs.Bindings[0].Spec.ParamRef, objs.Bindings[1].Spec.ParamRef)
		assert.Empty(t, objs.Policies[1].Spec.MatchConditions, "no break-glass in this config")
	})
	t.Run("if the guard's service account is given, only it may create or update the param ConfigMaps, and only it and the collectors delete them", func(t *testing.T) {
		objs := generate(t, namesConfig)
		p := objs.Policies[2]
		require.Equal(t, ProtectParamsName, p.Name)
		assert.Equal(t, requestName+` in ["webhook-guard-ca-audited","webhook-guard-ca-koordinator"]`, p.Spec.MatchConditions[0].Expression)
		assert.Equal(t, `request.operation == "DELETE" || (has(request.userInfo.username) ? request.userInfo.username : "") == "system:serviceaccount:webhook-guard:webhook-guard"`, p.Spec.Validations[0].Expression)
		assert.Equal(t, `request.operation != "DELETE" || (has(request.userInfo.username) ? request.userInfo.username : "") in `+
			`["system:serviceaccount:webhook-guard:webhook-guard","system:serviceaccount:kube-system:generic-garbage-collector","system:serviceaccount:kube-system:namespace-controller","system:kube-controller-manager"]`,
			p.Spec.Validations[1].Expression)
		assert.Equal(t, []admv1.OperationType{admv1.Create, admv1.Update, admv1.Delete}, p.Spec.MatchConstraints.ResourceRules[0].Operations)
		assert.Nil(t, objs.Bindings[2].Spec.ParamRef)
	})
	t.Run("if an anchor is given, every generated object is owned by it; else none is owned", func(t *testing.T) {
		c := load(t, namesConfig)
		anchor := AnchorReference("webhook-guard-policy-anchor", "0b1c")
		objs, err := Generate(Input{Config: c, Namespace: "ns", GuardServiceAccount: "ns/guard", Anchor: anchor})
		require.NoError(t, err)
		want := []metav1.OwnerReference{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "webhook-guard-policy-anchor", UID: "0b1c"}}
		var owners [][]metav1.OwnerReference
		for _, o := range objs.Policies {
			owners = append(owners, o.OwnerReferences)
		}
		for _, o := range objs.Bindings {
			owners = append(owners, o.OwnerReferences)
		}
		for _, o := range objs.ConfigMaps {
			owners = append(owners, o.OwnerReferences)
		}
		assert.Equal(t, [][]metav1.OwnerReference{want, want, want, want, want, want, want, want}, owners)
		for _, p := range generate(t, namesConfig).Policies {
			assert.Empty(t, p.OwnerReferences, p.Name)
		}
	})
	t.Run("if the namespace is invalid, say so", func(t *testing.T) {
		_, err := Generate(Input{Config: load(t, namesConfig), Namespace: "Bad_NS"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), `namespace "Bad_NS"`)
	})
}

func Test_labelValue(t *testing.T) {
	long := "a.very-long-mapping-name.that-is-a-valid-dns-subdomain.but-not-a-label-value.example.com"
	got := labelValue(long)
	assert.LessOrEqual(t, len(got), 63)
	assert.Equal(t, "a.very-long-mapping-name.that-is-a-valid-dns-subdomain.but-not", got)
	assert.Equal(t, "koordinator", labelValue("koordinator"))
}

func ptrTo[T any](v T) *T { return &v }

// variable is the expression of the policy's variable called name.
func variable(t *testing.T, p *admv1.ValidatingAdmissionPolicy, name string) string {
	t.Helper()
	for _, v := range p.Spec.Variables {
		if v.Name == name {
			return v.Expression
		}
	}
	t.Fatalf("policy %s has no variable %q", p.Name, name)
	return ""
}
