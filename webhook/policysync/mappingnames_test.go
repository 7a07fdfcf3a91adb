package policysync

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
	"github.com/webhook-guard/webhook-guard/webhook/policyca"
)

// prefixConfig has mappings "app-crds" and "app": "app" might generate
// webhook-guard-app-crds (were it to guard CRDs), which "app-crds"
// generates. "app-crds" is listed first, so that a map of every name a
// mapping might generate gives that name to "app".
const prefixConfig = `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
breakGlass: {groups: [system:masters]}
owners:
  - name: app-crds
    mode: enforce
    match: {mutating: [other-webhooks]}
    writers: {users: [other]}
    ca: {secret: {namespace: other, name: other-ca}}
  - name: app
    mode: enforce
    match: {validating: [app-webhooks]}
    writers: {serviceAccounts: [app/controller]}
    ca: {secret: {namespace: app, name: app-ca}}
`

// unreachableFor cannot ask the source of one mapping (a transient
// error) and resolves the others with next.
type unreachableFor struct {
	mapping string
	next    policyca.CAResolver
}

func (u unreachableFor) Resolve(ctx context.Context, req casource.Request, live bool) casource.Result {
	if req.Owner != nil && req.Owner.Name == u.mapping {
		var r casource.Result
		r.Err = &casource.SourceError{Source: "Secret app/app-ca", Reason: "connection refused"}
		return r
	}
	return u.next.Resolve(ctx, req, live)
}

// Test_Syncer_mappingNames: an object name belongs to the mapping that
// generates it, not to a mapping whose name is a prefix of the name.
func Test_Syncer_mappingNames(t *testing.T) {
	ctx := context.Background()
	t.Run("if the CA source of app cannot be asked, the policy of app-crds still follows its mapping", func(t *testing.T) {
		e := newEnv(t, prefixConfig)
		require.NoError(t, e.syncer.Sync(ctx))
		e.syncer.CA = unreachableFor{mapping: "app", next: e.syncer.CA}
		c := *e.config
		c.Spec.Owners = append(c.Spec.Owners[:0:0], c.Spec.Owners...)
		c.Spec.Owners[0].Mode = guardapi.ModeAudit
		cfg, err := policy.Load(mustYAML(t, c.Spec))
		require.NoError(t, err)
		e.config = cfg
		require.NoError(t, e.syncer.Sync(ctx))
		var b admv1.ValidatingAdmissionPolicyBinding
		require.NoError(t, e.client.Get(ctx, client.ObjectKey{Name: "webhook-guard-app-crds"}, &b))
		assert.Equal(t, []admv1.ValidationAction{admv1.Warn, admv1.Audit}, b.Spec.ValidationActions, "app-crds' change is applied, not frozen by app's error")
	})
	t.Run("if kube-apiserver refuses the policy of app-crds, app-crds is blamed and fails closed, not app", func(t *testing.T) {
		e := newEnv(t, prefixConfig)
		e.syncer.Client = &refusingClient{Client: e.client, name: "webhook-guard-app-crds",
			err: apierrors.NewForbidden(schema.GroupResource{}, "webhook-guard-app-crds", errors.New("no"))}
		require.NoError(t, e.syncer.Sync(ctx))
		assert.Equal(t, 1.0, testutil.ToFloat64(e.metrics.Refused.WithLabelValues("app-crds")))
		assert.Equal(t, 0.0, testutil.ToFloat64(e.metrics.Refused.WithLabelValues("app")))
		assert.Equal(t, `""`, policyVariable(t, e.policy(t, "webhook-guard-app-crds"), "ca"))
		assert.NotEqual(t, `""`, policyVariable(t, e.policy(t, "webhook-guard-app"), "ca"), "app keeps its CA")
	})
}
