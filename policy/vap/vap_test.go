package vap

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
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

func load(t *testing.T, cfg string) *policy.Mappings {
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
	objs, err := Generate(Input{Config: c, CAs: cas})
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
			"webhook-guard-koordinator": {admv1.Deny},
			"webhook-guard-audited":     {admv1.Warn, admv1.Audit},
		}, names)
	})
	t.Run("if mappings are generated, nothing refers to a param: each binding names its policy only", func(t *testing.T) {
		objs := generate(t, namesConfig)
		b := objs.Bindings[1]
		require.Equal(t, "webhook-guard-koordinator", b.Name)
		assert.Equal(t, "webhook-guard-koordinator", b.Spec.PolicyName)
		assert.Nil(t, b.Spec.ParamRef)
		assert.Nil(t, objs.Policies[1].Spec.ParamKind)
		assert.Equal(t, map[string]string{LabelManagedBy: ManagedBy, LabelMapping: "koordinator"}, b.Labels)
	})
	t.Run("if the CA is a Secret key, a second policy reads that Secret as its param; the owner policy reads none", func(t *testing.T) {
		c := load(t, namesConfig)
		ref := &guardapi.KeyRef{Namespace: "koordinator-system", Name: "webhook-certs", Key: "ca.crt"}
		objs, err := Generate(Input{Config: c, CAs: map[string]CA{"koordinator": {PEM: []byte("owner CA of koordinator"), Param: ref}}})
		require.NoError(t, err)
		var names []string
		for _, p := range objs.Policies {
			names = append(names, p.Name)
		}
		assert.Equal(t, []string{"webhook-guard-audited", "webhook-guard-koordinator", "webhook-guard-koordinator-ca"}, names)
		owner, ca, b := objs.Policies[1], objs.Policies[2], objs.Bindings[2]
		assert.Nil(t, owner.Spec.ParamKind, "not-owner never depends on a param kube-apiserver may skip")
		assert.Nil(t, objs.Bindings[1].Spec.ParamRef)
		require.Len(t, owner.Spec.Validations, 2, "not-owner and the entry rule, which needs no CA")
		assert.Equal(t, "variables.isWriter", owner.Spec.Validations[0].Expression)
		assert.Equal(t, `!variables.isWriter || variables.sameNames || size(variables.unfilledWebhooks) == 0`, owner.Spec.Validations[1].Expression)
		assert.Equal(t, &admv1.ParamKind{APIVersion: "v1", Kind: "Secret"}, ca.Spec.ParamKind)
		assert.Equal(t, &admv1.ParamRef{Name: "webhook-certs", Namespace: "koordinator-system", ParameterNotFoundAction: ptr.To(admv1.AllowAction)}, b.Spec.ParamRef)
		assert.Equal(t, "webhook-guard-koordinator-ca", b.Spec.PolicyName)
		require.Len(t, ca.Spec.Validations, 1)
		assert.Equal(t, `!variables.isWriter || size(variables.badWebhooks) == 0`, ca.Spec.Validations[0].Expression, "writers only: the owner policy denies the others")
		assert.Equal(t, `params != null && has(params.data) && "ca.crt" in params.data ? string(params.data["ca.crt"]) : variables.syncedCA`, variable(t, ca, "ca"))
		assert.Equal(t, `"b3duZXIgQ0Egb2Yga29vcmRpbmF0b3I="`, variable(t, ca, "syncedCA"), "the literal once, in its own variable")
	})
	t.Run("if the CA Secret is missing, the owner policy checks caBundles against the literal too", func(t *testing.T) {
		c := load(t, namesConfig)
		ref := &guardapi.KeyRef{Namespace: "koordinator-system", Name: "webhook-certs", Key: "ca.crt"}
		objs, err := Generate(Input{Config: c, CAs: map[string]CA{"koordinator": {Err: "it does not exist", Param: ref, ParamMissing: true}}})
		require.NoError(t, err)
		require.Len(t, objs.Policies, 3)
		owner := objs.Policies[1]
		assert.Nil(t, owner.Spec.ParamKind)
		assert.Len(t, owner.Spec.Validations, 2)
		assert.Equal(t, `""`, variable(t, owner, "ca"))
	})
	t.Run("if the CA is resolved, the policy compares a changed caBundle with its base64 and names its source and fingerprints", func(t *testing.T) {
		p := generate(t, namesConfig).Policies[1]
		// base64("owner CA of koordinator")
		assert.Equal(t, `"b3duZXIgQ0Egb2Yga29vcmRpbmF0b3I="`, variable(t, p, "ca"))
		assert.Contains(t, variable(t, p, "badWebhooks"), `string(w.clientConfig.caBundle) == variables.ca`)
		msg := p.Spec.Validations[1].MessageExpression
		assert.Contains(t, msg, `ca-mismatch`)
		assert.Contains(t, msg, `from test source of koordinator [expected CA 0123456789abcdef]`)
	})
	t.Run("if the CA is not resolved, every changed caBundle is bad and the message says why; nothing else changes", func(t *testing.T) {
		c := load(t, namesConfig)
		objs, err := Generate(Input{Config: c, CAs: map[string]CA{"koordinator": {Err: "Secret koordinator-system/webhook-certs: not found"}}})
		require.NoError(t, err)
		for _, p := range objs.Policies {
			assert.Equal(t, `""`, variable(t, p, "ca"), p.Name)
			assert.Contains(t, variable(t, p, "badWebhooks"), `!((variables.ca != "" && `, p.Name)
			assert.Equal(t, "variables.isWriter", p.Spec.Validations[0].Expression, p.Name)
		}
		assert.Contains(t, objs.Policies[1].Spec.Validations[1].MessageExpression, `ca-unavailable`)
		assert.Contains(t, objs.Policies[1].Spec.Validations[1].MessageExpression, `(Secret koordinator-system/webhook-certs: not found)`)
		assert.Contains(t, objs.Policies[0].Spec.Validations[1].MessageExpression, `(the guard has not resolved the owner's CA)`)
		assert.Len(t, objs.Policies, 2)
	})
	t.Run("if a mapping names configurations, matchConditions select them by kind and name and skip break-glass", func(t *testing.T) {
		p := generate(t, namesConfig).Policies[1]
		require.Equal(t, "webhook-guard-koordinator", p.Name)
		assert.Equal(t, []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}, p.Spec.MatchConstraints.ResourceRules[0].Resources)
		assert.Equal(t, []admv1.OperationType{admv1.Create, admv1.Update, admv1.Delete}, p.Spec.MatchConstraints.ResourceRules[0].Operations)
		require.Equal(t, []string{"owned-configuration", "changes-trust", "not-break-glass"}, conditionNames(p))
		assert.Equal(t, RequestName+` in (request.kind.kind == "MutatingWebhookConfiguration" ? ["koord-mutating"] : request.kind.kind == "ValidatingWebhookConfiguration" ? ["koord-validating"] : [])`,
			p.Spec.MatchConditions[0].Expression)
		assert.Equal(t, `!((has(request.userInfo.username) && request.userInfo.username in ["admin"]) || (has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ["system:masters"])))`,
			p.Spec.MatchConditions[2].Expression)
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
		assert.Equal(t, []string{"changes-trust", "not-break-glass"}, conditionNames(p))
	})
	t.Run("if the CA is injected by cert-manager, cainjector is a writer", func(t *testing.T) {
		p := generate(t, selectorConfig).Policies[0]
		require.Equal(t, "webhook-guard-injected", p.Name)
		assert.Equal(t, `(has(request.userInfo.username) && request.userInfo.username in ["system:serviceaccount:cert-manager:cert-manager-cainjector"])`, variable(t, p, "isWriter"))
	})
	t.Run("if a mapping has names and a selector, two policies hold the same CA", func(t *testing.T) {
		objs := generate(t, bothConfig)
		require.Len(t, objs.Policies, 2)
		assert.Equal(t, "webhook-guard-both", objs.Policies[0].Name)
		assert.Equal(t, "webhook-guard-both-selected", objs.Policies[1].Name)
		assert.Equal(t, variable(t, objs.Policies[0], "badWebhooks"), variable(t, objs.Policies[1], "badWebhooks"))
		assert.Equal(t, []string{"changes-trust"}, conditionNames(objs.Policies[1]), "no break-glass in this config")
	})
	t.Run("if an anchor is given, every generated object is owned by it; else none is owned", func(t *testing.T) {
		c := load(t, namesConfig)
		anchor := AnchorReference("webhook-guard-policy-anchor", "0b1c")
		objs, err := Generate(Input{Config: c, Anchor: anchor})
		require.NoError(t, err)
		want := []metav1.OwnerReference{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "webhook-guard-policy-anchor", UID: "0b1c"}}
		var owners [][]metav1.OwnerReference
		for _, o := range objs.Policies {
			owners = append(owners, o.OwnerReferences)
		}
		for _, o := range objs.Bindings {
			owners = append(owners, o.OwnerReferences)
		}
		assert.Equal(t, [][]metav1.OwnerReference{want, want, want, want}, owners)
		for _, p := range generate(t, namesConfig).Policies {
			assert.Empty(t, p.OwnerReferences, p.Name)
		}
	})
}

func Test_labelValue(t *testing.T) {
	long := "a.very-long-mapping-name.that-is-a-valid-dns-subdomain.but-not-a-label-value.example.com"
	got := labelValue(long)
	assert.LessOrEqual(t, len(got), 63)
	assert.Equal(t, "a.very-long-mapping-name.that-is-a-valid-dns-subdomain.but-not", got)
	assert.Equal(t, "koordinator", labelValue("koordinator"))
}

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

// Test_messagesNameTableRules: every generated validation names, in its
// static message, a rule of the rule table and words it with the rule's
// summary, so the policy shape reports rules as the webhook does.
func Test_messagesNameTableRules(t *testing.T) {
	c := load(t, namesConfig)
	for _, cas := range []map[string]CA{nil, {"koordinator": {PEM: []byte("ca"), Source: "s"}, "audited": {PEM: []byte("ca"), Source: "s"}}} {
		objs, err := Generate(Input{Config: c, CAs: cas})
		require.NoError(t, err)
		for _, p := range objs.Policies {
			for _, v := range p.Spec.Validations {
				var named policy.Rule
				for _, r := range policy.Rules() {
					if strings.HasPrefix(v.Message, "webhook-guard: "+string(r)+" ") {
						named = r
					}
				}
				require.NotEmpty(t, named, "policy %s: %q names no rule of the table", p.Name, v.Message)
				assert.True(t, strings.HasSuffix(v.Message, named.Info().Summary), v.Message)
				assert.Contains(t, v.MessageExpression, `"`+string(named)+`: `, "the message expression names the same rule")
			}
		}
	}
}

// conditionNames are the names of p's matchConditions, in order.
func conditionNames(p *admv1.ValidatingAdmissionPolicy) []string {
	var names []string
	for _, c := range p.Spec.MatchConditions {
		names = append(names, c.Name)
	}
	return names
}
