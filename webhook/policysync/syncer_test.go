package policysync

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

const testConfig = `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
breakGlass: {groups: [system:masters]}
owners:
  - name: app
    mode: enforce
    match: {validating: [app-webhooks]}
    writers: {serviceAccounts: [app/controller]}
    ca: {secret: {namespace: app, name: app-ca}}
  - name: other
    match: {mutating: [other-webhooks]}
    writers: {users: [other]}
    ca: {secret: {namespace: other, name: other-ca}}
`

// caPEM is a real certificate (the resolver parses what it reads).
var caPEM = []byte(`-----BEGIN CERTIFICATE-----
MIIBcDCCARagAwIBAgIIGOy6JX+krQYwCgYIKoZIzj0EAwIwGzEZMBcGA1UEAxMQ
aXN0aW8td2ViaG9vay1jYTAgFw0yNjAxMDEwMDAwMDBaGA8yMTI2MDEwMTAwMDAw
MFowGzEZMBcGA1UEAxMQaXN0aW8td2ViaG9vay1jYTBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABJX03clRjCdSQyvCsuv3/HY6Kqi6soE91WTUG/Ofec1T/WXLb4p/
cPVSmTYxStgkR4fGBHNzPSY4is1XnGYb6dqjQjBAMA4GA1UdDwEB/wQEAwIBBjAP
BgNVHRMBAf8EBTADAQH/MB0GA1UdDgQWBBTnlburuJpa5oWN4i69KtTkMlwX0jAK
BggqhkjOPQQDAgNIADBFAiADN4vLUBShwSIo9XPj0+WFjE/clsEPy2lZ0wzLTQu5
DwIhALKe9wIPQhiD1FR7e7nCDRvUhAooWZxvru0oBju6wKgV
-----END CERTIFICATE-----
`)

type env struct {
	client  client.Client
	syncer  *Syncer
	metrics *Metrics
	config  *policy.Mappings
	// mayReadSecrets is the answer to the guard's access review for get on
	// every Secret.
	mayReadSecrets bool
}

func newEnv(t *testing.T, cfg string) *env {
	t.Helper()
	c, err := policy.Load([]byte(cfg))
	require.NoError(t, err)
	// The chart's default: the guard may not get every Secret, so the
	// policies hold their CAs as literals (the param tests say otherwise).
	e := &env{metrics: NewMetrics(prometheus.NewRegistry()), config: c}
	cl := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app-ca"}, Data: map[string][]byte{"ca.crt": caPEM}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "other-ca"}, Data: map[string][]byte{"ca.crt": caPEM}},
	).WithReturnManagedFields().WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		// kube-apiserver answers access reviews; the fake client cannot.
		if r, ok := obj.(*authorizationv1.SelfSubjectAccessReview); ok {
			r.Status.Allowed = e.mayReadSecrets
			return nil
		}
		return c.Create(ctx, obj, opts...)
	}}).Build()
	e.client = cl
	e.syncer = &Syncer{
		Client: cl, Reader: cl, Objects: cl, Sources: cl, Config: func() *policy.Mappings { return e.config },
		// Read at every pass, as the watching resolver holds every change.
		CA:      casource.New(cl, casource.Options{TTL: time.Nanosecond}),
		Metrics: e.metrics, Log: logr.Discard(), ProtectAnchor: true,
	}
	return e
}

func (e *env) writes(kind, verb string) float64 {
	return testutil.ToFloat64(e.metrics.Writes.WithLabelValues(kind, verb))
}

func (e *env) total() float64 {
	var n float64
	for _, k := range []string{kindAdmissionPolicy, kindAdmissionPolicyBinding} {
		for _, v := range []string{VerbCreate, VerbUpdate, VerbDelete} {
			n += e.writes(k, v)
		}
	}
	return n
}

func Test_Syncer(t *testing.T) {
	ctx := context.Background()
	t.Run("if nothing exists, create policies and bindings once; a second pass writes nothing", func(t *testing.T) {
		e := newEnv(t, testConfig)
		require.NoError(t, e.syncer.Sync(ctx))
		assert.Equal(t, 2.0, e.writes(kindAdmissionPolicy, VerbCreate), "one per mapping")
		assert.Equal(t, 2.0, e.writes(kindAdmissionPolicyBinding, VerbCreate))
		before := e.total()
		for range 5 {
			require.NoError(t, e.syncer.Sync(ctx))
		}
		assert.Equal(t, before, e.total(), "unchanged mappings and CAs must cost no write")
	})
	t.Run("if the owner's CA Secret rotates, only its policy is updated", func(t *testing.T) {
		e := newEnv(t, testConfig)
		require.NoError(t, e.syncer.Sync(ctx))
		var s corev1.Secret
		require.NoError(t, e.client.Get(ctx, types.NamespacedName{Namespace: "app", Name: "app-ca"}, &s))
		s.Data["ca.crt"] = append(append([]byte{}, caPEM...), caPEM...)
		require.NoError(t, e.client.Update(ctx, &s))
		before := e.total()
		require.NoError(t, e.syncer.Sync(ctx))
		assert.Equal(t, before+1, e.total())
		assert.Equal(t, 1.0, e.writes(kindAdmissionPolicy, VerbUpdate))
		assert.Contains(t, e.variable(t, "webhook-guard-app", "ca"), base64.StdEncoding.EncodeToString(s.Data["ca.crt"]))
	})
	t.Run("if someone adds labels or annotations to a generated object, it is not rewritten", func(t *testing.T) {
		e := newEnv(t, testConfig)
		require.NoError(t, e.syncer.Sync(ctx))
		var p admv1.ValidatingAdmissionPolicy
		require.NoError(t, e.client.Get(ctx, types.NamespacedName{Name: "webhook-guard-app"}, &p))
		p.Labels["team"] = "platform"
		p.Annotations = map[string]string{"note": "x"}
		require.NoError(t, e.client.Update(ctx, &p))
		before := e.total()
		require.NoError(t, e.syncer.Sync(ctx))
		assert.Equal(t, before, e.total())
	})
	t.Run("if someone changes a field of a generated policy, it is restored and the conflict counted", func(t *testing.T) {
		e := newEnv(t, testConfig)
		require.NoError(t, e.syncer.Sync(ctx))
		p := e.policy(t, "webhook-guard-app")
		p.Spec.FailurePolicy = ptr.To(admv1.Ignore)
		require.NoError(t, e.client.Update(ctx, p, client.FieldOwner("someone")))
		ev := &events{}
		e.syncer.Events = ev
		require.NoError(t, e.syncer.Sync(ctx))
		assert.Equal(t, 1.0, e.writes(kindAdmissionPolicy, VerbUpdate))
		assert.Equal(t, ptr.To(admv1.Fail), e.policy(t, "webhook-guard-app").Spec.FailurePolicy)
		assert.Equal(t, 1.0, testutil.ToFloat64(e.metrics.Conflicts.WithLabelValues("app", kindAdmissionPolicy, "webhook-guard-app")), "the fight is counted")
		require.Len(t, ev.got, 1)
		assert.Equal(t, `Warning PolicyConflict webhook-guard-app: field manager "someone" changed .spec.failurePolicy of the generated ValidatingAdmissionPolicy "webhook-guard-app"; the guard applied its own again with force, as it does at every such change (mapping "app")`, ev.got[0])
		before := e.total()
		require.NoError(t, e.syncer.Sync(ctx))
		assert.Equal(t, before, e.total(), "restored: the next pass writes nothing")
	})
	t.Run("if someone adds to a generated binding's spec what the guard does not own, it is removed and the fight counted", func(t *testing.T) {
		e := newEnv(t, testConfig)
		require.NoError(t, e.syncer.Sync(ctx))
		var b admv1.ValidatingAdmissionPolicyBinding
		require.NoError(t, e.client.Get(ctx, types.NamespacedName{Name: "webhook-guard-app"}, &b))
		b.Spec.ValidationActions = []admv1.ValidationAction{admv1.Warn}
		b.Spec.MatchResources = &admv1.MatchResources{ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"skip": "guard"}}}
		require.NoError(t, e.client.Update(ctx, &b, client.FieldOwner("someone")))
		ev := &events{}
		e.syncer.Events = ev
		require.NoError(t, e.syncer.Sync(ctx))
		require.NoError(t, e.client.Get(ctx, types.NamespacedName{Name: "webhook-guard-app"}, &b))
		assert.Equal(t, []admv1.ValidationAction{admv1.Deny}, b.Spec.ValidationActions)
		assert.Nil(t, b.Spec.MatchResources, "no selector narrows the binding")
		assert.Equal(t, 1.0, testutil.ToFloat64(e.metrics.Conflicts.WithLabelValues("app", kindAdmissionPolicyBinding, "webhook-guard-app")))
		require.Len(t, ev.got, 1)
		assert.Contains(t, ev.got[0], `Warning PolicyConflict webhook-guard-app: field manager "someone" changed .spec.matchResources`)
		assert.Contains(t, ev.got[0], `.spec.validationActions[="Warn"]`)
		assert.Contains(t, ev.got[0], `the guard removed what it does not generate`)
		before := e.total()
		require.NoError(t, e.syncer.Sync(ctx))
		assert.Equal(t, before, e.total(), "restored: the next pass writes nothing")
	})
	t.Run("if a mapping is removed, its objects are deleted and nothing else", func(t *testing.T) {
		e := newEnv(t, testConfig)
		require.NoError(t, e.syncer.Sync(ctx))
		unrelated := &admv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "unrelated"}}
		require.NoError(t, e.client.Create(ctx, unrelated))
		c := *e.config
		c.Spec.Owners = c.Spec.Owners[:1]
		cfg, err := policy.Load(mustYAML(t, c.Spec))
		require.NoError(t, err)
		e.config = cfg
		require.NoError(t, e.syncer.Sync(ctx))
		assert.Equal(t, 1.0, e.writes(kindAdmissionPolicy, VerbDelete))
		assert.Equal(t, 1.0, e.writes(kindAdmissionPolicyBinding, VerbDelete))
		assert.Equal(t, 0.0, e.writes(kindAdmissionPolicy, VerbUpdate))
		require.NoError(t, e.client.Get(ctx, client.ObjectKeyFromObject(unrelated), unrelated))
	})
	t.Run("if the CA Secret disappears, the policy holds no CA and says why (caBundle changes fail closed)", func(t *testing.T) {
		e := newEnv(t, testConfig)
		require.NoError(t, e.syncer.Sync(ctx))
		require.NoError(t, e.client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app-ca"}}))
		require.NoError(t, e.syncer.Sync(ctx))
		p := e.policy(t, "webhook-guard-app")
		assert.Equal(t, `""`, policyVariable(t, p, "ca"), "no CA in the policy: every changed caBundle is bad until the Secret is back")
		assert.Contains(t, p.Spec.Validations[1].MessageExpression, "it does not exist")
		assert.Contains(t, p.Spec.Validations[1].MessageExpression, "ca-unavailable")
	})
	t.Run("if the CA source cannot be asked, the mapping's policy keeps the CA it holds", func(t *testing.T) {
		e := newEnv(t, testConfig)
		require.NoError(t, e.syncer.Sync(ctx))
		good := e.variable(t, "webhook-guard-app", "ca")
		e.syncer.CA = unreachable{}
		before := e.total()
		require.NoError(t, e.syncer.Sync(ctx))
		assert.Equal(t, before, e.total(), "nothing is rewritten while the sources cannot be asked")
		assert.Equal(t, good, e.variable(t, "webhook-guard-app", "ca"))
	})
	t.Run("if the guard may not get Secrets cluster-wide, the policy holds the CA as a literal only (kube-apiserver requires it for a Secret param)", func(t *testing.T) {
		e := newEnv(t, testConfig)
		require.NoError(t, e.syncer.Sync(ctx))
		p := e.policy(t, "webhook-guard-app")
		assert.Nil(t, p.Spec.ParamKind)
		assert.Equal(t, `"`+base64.StdEncoding.EncodeToString(caPEM)+`"`, policyVariable(t, p, "ca"))
		var none admv1.ValidatingAdmissionPolicy
		assert.Error(t, e.client.Get(ctx, client.ObjectKey{Name: "webhook-guard-app-ca"}, &none), "no param policy")
	})
	t.Run("if the CA Secret is missing, the owner policy checks caBundles against no CA, and the param policy waits for the Secret", func(t *testing.T) {
		e := newEnv(t, testConfig)
		e.mayReadSecrets = true
		require.NoError(t, e.client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app-ca"}}))
		require.NoError(t, e.syncer.Sync(ctx))
		owner := e.policy(t, "webhook-guard-app")
		assert.Nil(t, owner.Spec.ParamKind)
		assert.Equal(t, `""`, policyVariable(t, owner, "ca"), "fail closed on caBundle changes")
		ca := e.policy(t, "webhook-guard-app-ca")
		assert.Equal(t, &admv1.ParamKind{APIVersion: "v1", Kind: "Secret"}, ca.Spec.ParamKind)
		assert.Equal(t, `params != null && has(params.data) && "ca.crt" in params.data ? string(params.data["ca.crt"]) : ""`, policyVariable(t, ca, "ca"))
	})
	t.Run("if the CA is a Secret key and the guard may get Secrets, a second policy reads that Secret as its param", func(t *testing.T) {
		e := newEnv(t, testConfig)
		e.mayReadSecrets = true
		require.NoError(t, e.syncer.Sync(ctx))
		owner := e.policy(t, "webhook-guard-app")
		assert.Nil(t, owner.Spec.ParamKind)
		assert.Len(t, owner.Spec.Validations, 2, "not-owner and the entry rules, neither of which reads the CA")
		p := e.policy(t, "webhook-guard-app-ca")
		assert.Equal(t, &admv1.ParamKind{APIVersion: "v1", Kind: "Secret"}, p.Spec.ParamKind)
		var b admv1.ValidatingAdmissionPolicyBinding
		require.NoError(t, e.client.Get(ctx, client.ObjectKey{Name: "webhook-guard-app-ca"}, &b))
		require.NotNil(t, b.Spec.ParamRef)
		assert.Equal(t, "app", b.Spec.ParamRef.Namespace)
		assert.Equal(t, "app-ca", b.Spec.ParamRef.Name)
	})
	t.Run("if an anchor is set, every object is created owned by it, and objects from before gain the reference once", func(t *testing.T) {
		e := newEnv(t, testConfig)
		require.NoError(t, e.syncer.Sync(ctx), "first pass without an anchor")
		anchor := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "wg-policy-anchor", UID: "a1"}}
		require.NoError(t, e.client.Create(ctx, anchor))
		e.syncer.Anchor = anchor.Name
		require.NoError(t, e.syncer.Sync(ctx))
		assert.Equal(t, 2.0, e.writes(kindAdmissionPolicy, VerbUpdate))
		assert.Equal(t, 2.0, e.writes(kindAdmissionPolicyBinding, VerbUpdate))
		assert.Equal(t, 1.0, e.writes(kindAdmissionPolicy, VerbCreate)-2, "and the anchor's own policy is created")
		want := []metav1.OwnerReference{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "wg-policy-anchor", UID: anchor.UID}}
		var b admv1.ValidatingAdmissionPolicyBinding
		require.NoError(t, e.client.Get(ctx, types.NamespacedName{Name: "webhook-guard-app"}, &b))
		assert.Equal(t, want, b.OwnerReferences)
		before := e.total()
		require.NoError(t, e.syncer.Sync(ctx))
		assert.Equal(t, before, e.total(), "owned objects are not rewritten")
	})
	t.Run("if the anchor does not exist, nothing is written and the error says why", func(t *testing.T) {
		e := newEnv(t, testConfig)
		e.syncer.Anchor = "wg-policy-anchor"
		err := e.syncer.Sync(ctx)
		require.Error(t, err)
		assert.Equal(t, `the anchor ClusterRole "wg-policy-anchor" does not exist (the guard is being uninstalled, someone deleted it, or --policy-anchor names the wrong ClusterRole): writing nothing, since generated objects without it would outlive the guard; `+"`helm upgrade`"+` creates it again`, err.Error())
		assert.Equal(t, 0.0, e.total())
	})
	t.Run("if the anchor was deleted and created again, the reference to the old one is replaced", func(t *testing.T) {
		e := newEnv(t, testConfig)
		anchor := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "wg-policy-anchor", UID: "old"}}
		require.NoError(t, e.client.Create(ctx, anchor))
		e.syncer.Anchor = anchor.Name
		require.NoError(t, e.syncer.Sync(ctx))
		require.NoError(t, e.client.Delete(ctx, anchor))
		again := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "wg-policy-anchor", UID: "new"}}
		require.NoError(t, e.client.Create(ctx, again))
		require.NoError(t, e.syncer.Sync(ctx))
		want := []metav1.OwnerReference{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "wg-policy-anchor", UID: "new"}}
		var b admv1.ValidatingAdmissionPolicyBinding
		require.NoError(t, e.client.Get(ctx, types.NamespacedName{Name: "webhook-guard-app"}, &b))
		assert.Equal(t, want, b.OwnerReferences)
	})
	t.Run("if nothing changed, a pass sends no write request at all", func(t *testing.T) {
		e := newEnv(t, testConfig)
		require.NoError(t, e.syncer.Sync(ctx))
		counting := &countingClient{Client: e.client}
		e.syncer.Client = counting
		for range 3 {
			require.NoError(t, e.syncer.Sync(ctx))
		}
		assert.Equal(t, 0, counting.applies, "what the guard owns already holds what it wants")
	})
	t.Run("if fields of a generated object were written by the guard's own updates, they are taken over without counting a fight", func(t *testing.T) {
		e := newEnv(t, testConfig)
		require.NoError(t, e.syncer.Sync(ctx))
		p := e.policy(t, "webhook-guard-app")
		p.Spec.FailurePolicy = ptr.To(admv1.Ignore)
		require.NoError(t, e.client.Update(ctx, p, client.FieldOwner(FieldManager)))
		require.NoError(t, e.syncer.Sync(ctx))
		assert.Equal(t, ptr.To(admv1.Fail), e.policy(t, "webhook-guard-app").Spec.FailurePolicy)
		assert.Equal(t, 0.0, testutil.ToFloat64(e.metrics.Conflicts.WithLabelValues("app", kindAdmissionPolicy, "webhook-guard-app")))
	})
}

// countingClient counts the server-side applies sent through it.
type countingClient struct {
	client.Client
	applies int
}

func (c *countingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c.applies++
	return c.Client.Apply(ctx, obj, opts...)
}

// unreachable is a CA resolver whose sources cannot be asked (the API
// server does not answer): a transient error, not a definitive one.
type unreachable struct{}

func (unreachable) Resolve(_ context.Context, _ casource.Request, _ bool) casource.Result {
	var r casource.Result
	r.Err = &casource.SourceError{Source: "Secret app/app-ca", Reason: "connection refused"}
	return r
}

func (e *env) policy(t *testing.T, name string) *admv1.ValidatingAdmissionPolicy {
	t.Helper()
	var p admv1.ValidatingAdmissionPolicy
	require.NoError(t, e.client.Get(context.Background(), types.NamespacedName{Name: name}, &p))
	return &p
}

// badWebhooks is the expression of the policy's badWebhooks variable,
// where the owner's CA is compared.
// variable is the expression of the variable of the policy name (the CA
// is the variable ca).
func (e *env) variable(t *testing.T, name, variable string) string {
	t.Helper()
	for _, v := range e.policy(t, name).Spec.Variables {
		if v.Name == variable {
			return v.Expression
		}
	}
	t.Fatalf("policy %s has no variable %s", name, variable)
	return ""
}

func mustYAML(t *testing.T, spec guardapi.GuardConfig) []byte {
	t.Helper()
	spec.APIVersion, spec.Kind = guardapi.APIVersion, guardapi.Kind
	b, err := yaml.Marshal(spec)
	require.NoError(t, err)
	return b
}

// policyVariable is the expression of the policy's variable name.
func policyVariable(t *testing.T, p *admv1.ValidatingAdmissionPolicy, name string) string {
	t.Helper()
	for _, v := range p.Spec.Variables {
		if v.Name == name {
			return v.Expression
		}
	}
	t.Fatalf("policy %s has no variable %q", p.Name, name)
	return ""
}
