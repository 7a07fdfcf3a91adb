package policysync

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	admv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// refusingClient stands for a kube-apiserver that refuses, with err, every
// write of a policy called name that holds a CA (the generated policy of a
// CA it cannot store), and accepts the rest.
type refusingClient struct {
	client.Client
	name string
	err  error
}

func holdsCA(obj runtime.ApplyConfiguration) bool {
	p, ok := obj.(*admv1ac.ValidatingAdmissionPolicyApplyConfiguration)
	if !ok || p.Spec == nil {
		return false
	}
	for _, v := range p.Spec.Variables {
		if *v.Name == "ca" && *v.Expression != `""` {
			return true
		}
	}
	return false
}

func (r *refusingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if p, ok := obj.(*admv1ac.ValidatingAdmissionPolicyApplyConfiguration); ok && *p.Name == r.name && holdsCA(obj) {
		return r.err
	}
	return r.Client.Apply(ctx, obj, opts...)
}

// events collects the syncer's Events.
type events struct{ got []string }

func (e *events) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	m, _ := regarding.(metav1.Object)
	e.got = append(e.got, fmt.Sprintf("%s %s %s: %s", eventtype, reason, m.GetName(), fmt.Sprintf(note, args...)))
}

func tooLarge() error {
	return apierrors.NewRequestEntityTooLargeError("limit is 3145728")
}

func invalid() error {
	return apierrors.NewInvalid(schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}, "webhook-guard-app",
		field.ErrorList{field.TooLong(field.NewPath("spec", "variables").Index(3).Child("expression"), "", 5000)})
}

func Test_SyncerRefusals(t *testing.T) {
	ctx := context.Background()
	for name, refusal := range map[string]error{"too large": tooLarge(), "invalid": invalid(), "forbidden": apierrors.NewForbidden(schema.GroupResource{}, "webhook-guard-app", errors.New("no"))} {
		t.Run("if kube-apiserver refuses a mapping's policy ("+name+"), that mapping fails closed naming the refusal, and the other is unaffected", func(t *testing.T) {
			e := newEnv(t, testConfig)
			ev := &events{}
			e.syncer.Events = ev
			e.syncer.Client = &refusingClient{Client: e.client, name: "webhook-guard-app", err: refusal}
			err := e.syncer.Sync(ctx)
			require.NoError(t, err, "the fail-closed policy was accepted: the pass did what it could")
			p := e.policy(t, "webhook-guard-app")
			assert.Equal(t, `""`, policyVariable(t, p, "ca"), "no CA: every changed caBundle is denied")
			assert.Contains(t, p.Spec.Validations[1].MessageExpression, "ca-unavailable")
			assert.Contains(t, p.Spec.Validations[1].MessageExpression, "kube-apiserver refused the mapping's generated policy")
			assert.Contains(t, p.Spec.Validations[1].MessageExpression, strings.ReplaceAll(refusal.Error(), `"`, `\"`))
			var b admv1.ValidatingAdmissionPolicyBinding
			require.NoError(t, e.client.Get(ctx, client.ObjectKey{Name: "webhook-guard-app"}, &b), "the binding enforces the fail-closed policy")
			assert.NotEqual(t, `""`, policyVariable(t, e.policy(t, "webhook-guard-other"), "ca"), "the other mapping keeps its CA")
			assert.Equal(t, 1.0, testutil.ToFloat64(e.metrics.Refusals.WithLabelValues("app")))
			assert.Equal(t, 1.0, testutil.ToFloat64(e.metrics.Refused.WithLabelValues("app")))
			assert.Equal(t, 0.0, testutil.ToFloat64(e.metrics.Refused.WithLabelValues("other")))
			require.Len(t, ev.got, 1)
			assert.Contains(t, ev.got[0], "Warning PolicyRefused webhook-guard-app: kube-apiserver refused a generated object of mapping \"app\"")

			require.NoError(t, e.syncer.Sync(ctx))
			assert.Len(t, ev.got, 1, "one Event per refusal, not one per pass")

			e.syncer.Client = e.client
			require.NoError(t, e.syncer.Sync(ctx))
			assert.NotEqual(t, `""`, policyVariable(t, e.policy(t, "webhook-guard-app"), "ca"), "accepted again: the CA is back")
			assert.Equal(t, 0.0, testutil.ToFloat64(e.metrics.Refused.WithLabelValues("app")))
			require.Len(t, ev.got, 2)
			assert.Contains(t, ev.got[1], "Normal PolicyAccepted")
		})
	}
	t.Run("if kube-apiserver keeps refusing a mapping's object, later passes write nothing", func(t *testing.T) {
		for name, secretParams := range map[string]bool{"the CA param policy": true, "the policy holding the CA literal": false} {
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, testConfig)
				e.mayReadSecrets = secretParams
				refusedName := "webhook-guard-app"
				if secretParams {
					refusedName = "webhook-guard-app-ca"
				}
				e.syncer.Client = &refusingClient{Client: e.client, name: refusedName, err: invalid()}
				require.NoError(t, e.syncer.Sync(ctx))
				require.Equal(t, 1.0, testutil.ToFloat64(e.metrics.Refused.WithLabelValues("app")))
				before := e.total()
				for range 3 {
					require.NoError(t, e.syncer.Sync(ctx))
				}
				assert.Equal(t, before, e.total(), "the fail-closed objects are not rewritten back and forth")
				assert.Equal(t, 4.0, testutil.ToFloat64(e.metrics.Refusals.WithLabelValues("app")), "one refused attempt per pass")
				assert.Equal(t, `""`, policyVariable(t, e.policy(t, "webhook-guard-app"), "ca"))
			})
		}
	})
	t.Run("if a write fails for a passing reason (timeout, conflict), the mapping is not switched to fail closed", func(t *testing.T) {
		e := newEnv(t, testConfig)
		require.NoError(t, e.syncer.Sync(ctx))
		var s = e.policy(t, "webhook-guard-app")
		good := policyVariable(t, s, "ca")
		e.syncer.Client = &refusingClient{Client: e.client, name: "webhook-guard-app", err: apierrors.NewServerTimeout(schema.GroupResource{}, "update", 1)}
		require.NoError(t, e.client.Update(ctx, withSpecChange(s)), "make the guard want to write")
		require.Error(t, e.syncer.Sync(ctx))
		assert.Equal(t, good, policyVariable(t, e.policy(t, "webhook-guard-app"), "ca"))
		assert.Equal(t, 0.0, testutil.ToFloat64(e.metrics.Refusals.WithLabelValues("app")))
	})
	t.Run("if a policy holds a name the mapping generates without the guard's label, it is the guard's by that name: made the generated one, no refusal", func(t *testing.T) {
		e := newEnv(t, testConfig)
		foreign := &admv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "webhook-guard-app", Labels: map[string]string{"team": "x"}},
			Spec: admv1.ValidatingAdmissionPolicySpec{Validations: []admv1.Validation{{Expression: "true"}}}}
		require.NoError(t, e.client.Create(ctx, foreign))
		require.NoError(t, e.syncer.Sync(ctx))
		got := e.policy(t, "webhook-guard-app")
		assert.Equal(t, vap.ManagedBy, got.Labels[vap.LabelManagedBy], "the guard's label")
		assert.NotEqual(t, foreign.Spec.Validations, got.Spec.Validations, "the generated validations")
		assert.NotEqual(t, `""`, policyVariable(t, got, "ca"), "enforcing the owner's CA")
		var b admv1.ValidatingAdmissionPolicyBinding
		require.NoError(t, e.client.Get(ctx, client.ObjectKey{Name: "webhook-guard-app"}, &b))
		assert.Equal(t, 0.0, testutil.ToFloat64(e.metrics.Refused.WithLabelValues("app")))
	})
	t.Run("if an object holds the name of the mapping's CA-param policy, it is the guard's too", func(t *testing.T) {
		e := newEnv(t, testConfig)
		e.mayReadSecrets = true
		require.NoError(t, e.client.Create(ctx, &admv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "webhook-guard-app-ca"}}))
		require.NoError(t, e.syncer.Sync(ctx))
		assert.Equal(t, vap.ManagedBy, e.policy(t, "webhook-guard-app-ca").Labels[vap.LabelManagedBy])
		assert.Equal(t, 0.0, testutil.ToFloat64(e.metrics.Refused.WithLabelValues("app")))
	})
}

func withSpecChange(p *admv1.ValidatingAdmissionPolicy) *admv1.ValidatingAdmissionPolicy {
	p = p.DeepCopy()
	p.Spec.Validations = p.Spec.Validations[:1]
	return p
}

func Test_refused(t *testing.T) {
	gr := schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"}
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"invalid":                      {invalid(), true},
		"too large":                    {tooLarge(), true},
		"forbidden":                    {apierrors.NewForbidden(gr, "x", errors.New("no")), true},
		"already exists":               {apierrors.NewAlreadyExists(gr, "x"), true},
		"conflict (resourceVersion)":   {apierrors.NewConflict(gr, "x", errors.New("modified")), false},
		"server timeout":               {apierrors.NewServerTimeout(gr, "update", 1), false},
		"too many requests":            {apierrors.NewTooManyRequests("slow down", 1), false},
		"service unavailable":          {apierrors.NewServiceUnavailable("down"), false},
		"internal error":               {apierrors.NewInternalError(errors.New("boom")), false},
		"etcd request too large (500)": {apierrors.NewInternalError(errors.New("etcdserver: request is too large")), true},
		"plain error":                  {errors.New("connection refused"), false},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, refused(tc.err))
		})
	}
}

func Test_SyncerAnchor(t *testing.T) {
	ctx := context.Background()
	t.Run("if the anchor goes missing, the gauge drops to 0 and one Event says so", func(t *testing.T) {
		e := newEnv(t, testConfig)
		ev := &events{}
		e.syncer.Events = ev
		anchor := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "wg-policy-anchor", UID: "a1"}}
		require.NoError(t, e.client.Create(ctx, anchor))
		e.syncer.Anchor = anchor.Name
		require.NoError(t, e.syncer.Sync(ctx))
		assert.Equal(t, 1.0, testutil.ToFloat64(e.metrics.AnchorPresent.WithLabelValues("wg-policy-anchor")))
		assert.Empty(t, ev.got)
		p := e.policy(t, vap.AnchorPolicyName("wg-policy-anchor"))
		assert.Equal(t, "wg-policy-anchor", p.OwnerReferences[0].Name)

		require.NoError(t, e.client.Delete(ctx, anchor))
		require.Error(t, e.syncer.Sync(ctx))
		require.Error(t, e.syncer.Sync(ctx))
		assert.Equal(t, 0.0, testutil.ToFloat64(e.metrics.AnchorPresent.WithLabelValues("wg-policy-anchor")))
		require.Len(t, ev.got, 1)
		assert.Contains(t, ev.got[0], `Warning PolicyAnchorMissing wg-policy-anchor: the anchor ClusterRole "wg-policy-anchor" does not exist`)
	})
	t.Run("if anchor protection is turned off, its policy and binding are deleted and the mappings' stay", func(t *testing.T) {
		e := newEnv(t, testConfig)
		anchor := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "wg-policy-anchor", UID: "a1"}}
		require.NoError(t, e.client.Create(ctx, anchor))
		e.syncer.Anchor = anchor.Name
		require.NoError(t, e.syncer.Sync(ctx))
		e.policy(t, vap.AnchorPolicyName("wg-policy-anchor"))

		e.syncer.ProtectAnchor = false
		require.NoError(t, e.syncer.Sync(ctx))
		var p admv1.ValidatingAdmissionPolicy
		err := e.client.Get(ctx, types.NamespacedName{Name: vap.AnchorPolicyName("wg-policy-anchor")}, &p)
		assert.True(t, apierrors.IsNotFound(err), "the anchor policy is deleted: %v", err)
		var b admv1.ValidatingAdmissionPolicyBinding
		err = e.client.Get(ctx, types.NamespacedName{Name: vap.AnchorPolicyName("wg-policy-anchor")}, &b)
		assert.True(t, apierrors.IsNotFound(err), "the anchor binding is deleted: %v", err)
		e.policy(t, vap.PolicyName("app"))
	})
}

func Test_trimReason(t *testing.T) {
	long := `ValidatingAdmissionPolicy "webhook-guard-app-ca" is invalid: spec.variables[10].expression: Invalid value: "` + strings.Repeat("Q", 100000) + `": compilation failed: ERROR: <input>:-1:0: expression code point size exceeds limit: size: 100001, limit 100000`
	got := trimReason(long)
	assert.LessOrEqual(t, len(got), maxReasonLen+len(" … "))
	assert.True(t, strings.HasPrefix(got, `ValidatingAdmissionPolicy "webhook-guard-app-ca" is invalid`), "the start names the object")
	assert.True(t, strings.HasSuffix(got, "expression code point size exceeds limit: size: 100001, limit 100000"), "the end says why")
	assert.Equal(t, "short", trimReason("short"))

	t.Run("if a matchCondition is refused, CEL quotes it under the reason: the reason is kept", func(t *testing.T) {
		// kube-apiserver quotes the value as Go does (%q).
		expr := `!((request.userInfo.username in ["a"]) && ["` + strings.Repeat("Q", 100000) + `"].all(ca, true))`
		long := `ValidatingAdmissionPolicy.admissionregistration.k8s.io "webhook-guard-big-ca" is invalid: [spec.matchConditions[1].expression: Invalid value: ` + fmt.Sprintf("%q", expr) +
			`: compilation failed: ERROR: <input>:1:1: expression code point size exceeds limit: size: 100041, limit 100000` + "\n | " + expr + "\n | " + strings.Repeat(".", 100000) + "^" +
			// What the first causes: a variable that reads another which
			// did not compile is untyped.
			`, spec.variables[12].expression: Invalid value: "` + strings.Repeat("x", 2000) + `": compilation failed: ERROR: <input>:1:1427: expected type 'string' but found 'dyn'` + "\n | " + strings.Repeat("x", 2000) + "\n | " + strings.Repeat(".", 1426) + "^]"
		got := trimReason(long)
		assert.LessOrEqual(t, len(got), maxReasonLen+len(" … "))
		assert.Contains(t, got, "expression code point size exceeds limit: size: 100041, limit 100000")
		assert.NotContains(t, got, "\n", "a message expression's result holds no line break")
		assert.Contains(t, got, `"webhook-guard-big-ca" is invalid: [spec.matchConditions[1].expression: Invalid value: "!((request.userInfo.username in [\"a\"])`)
	})
}
