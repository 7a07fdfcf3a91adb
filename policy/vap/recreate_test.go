package vap

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// Test_recreatedEndpoint: the guard keeps nothing across a DELETE, so a
// CREATE of a CRD with a conversion webhook or of an APIService with a
// service chooses the endpoint kube-apiserver trusts, as an UPDATE moving
// it does. A non-writer may delete the object, but its CREATE with an
// endpoint is not-owner in the generated policies, as in the static shape,
// even pointing at the pin with an empty caBundle for cainjector to fill:
// otherwise delete and create would move the endpoint where an UPDATE may
// not. A writer's CREATE, and a non-writer's of an object without an
// endpoint, pass.
func Test_recreatedEndpoint(t *testing.T) {
	cfg := load(t, parityConfig)
	cur, err := testpki.NewCA("recreate-owner-ca")
	require.NoError(t, err)
	set, err := cabundle.NewCASet(paritySource, cur.PEM)
	require.NoError(t, err)
	ca := CA{PEM: cur.PEM, Source: paritySource, Fingerprints: set.Short()}
	objs, err := Generate(Input{Config: cfg, CAs: map[string]CA{"app": ca, "objects": ca, "injected": ca, "pinned": ca}})
	require.NoError(t, err)
	ps := compileAll(t, objs)

	writer := &user.DefaultInfo{Name: "system:serviceaccount:app-system:controller"}
	installer := &user.DefaultInfo{Name: "system:serviceaccount:argocd:argocd-application-controller"}
	pin := map[string]string{policy.AnnotationInjectCAFrom: parityInject}
	own := policy.Endpoint{Namespace: "installer", Name: "metrics", Port: 443}
	theirs := policy.Endpoint{Namespace: "app-system", Name: "metrics", Port: 443}
	create := func(kind policy.GuardedKind, name string, u user.Info, ann map[string]string, name2 string, b []byte, at policy.Endpoint) parityCase {
		return parityCase{op: policy.OperationCreate, kind: kind, config: name, user: u, annotations: ann, next: []entry{{name2, b}}, endpoint: at}
	}
	notOwner := verdict{Denied: true, Rules: []policy.Rule{policy.RuleNotOwner}}
	tests := map[string]struct {
		c    parityCase
		want verdict
	}{
		"if a non-writer recreates a pinned APIService at its own Service pointing at the pin with an empty caBundle, deny not-owner": {
			c: create(policy.KindAPIService, "v1.widgets.example.com", installer, pin, policy.EntryService, nil, own), want: notOwner,
		},
		"if a non-writer recreates a pinned CRD whose conversion webhook is its own URL, pointing at the pin, deny not-owner": {
			c: create(policy.KindCRD, "widgets.example.com", installer, pin, policy.EntryConversion, nil, policy.Endpoint{URL: "https://evil.example.com/convert"}), want: notOwner,
		},
		"if a non-writer creates an APIService at the owner's Service with the owner's CA, deny not-owner: the endpoint is still its choice": {
			c: create(policy.KindAPIService, "v1.gadgets.example.com", installer, nil, policy.EntryService, cur.PEM, theirs), want: notOwner,
		},
		"if a non-writer creates a CRD with no conversion webhook, allow: it names no endpoint": {
			c:    parityCase{op: policy.OperationCreate, kind: policy.KindCRD, config: "widgets.example.com", user: installer, annotations: pin},
			want: verdict{},
		},
		"if a non-writer deletes an APIService, allow: an object that is gone trusts nobody": {
			c: parityCase{op: policy.OperationDelete, kind: policy.KindAPIService, config: "v1.widgets.example.com", user: installer, annotations: pin,
				old: []entry{{policy.EntryService, cur.PEM}}, oldEndpoint: theirs},
			want: verdict{},
		},
		"if a writer creates a pinned APIService pointing at the pin with an empty caBundle, allow: cainjector fills it": {
			c: create(policy.KindAPIService, "v1.widgets.example.com", writer, pin, policy.EntryService, nil, theirs), want: verdict{},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			cel := celVerdict(ps.validate(t, tt.c.request(), true))
			assert.Equal(t, tt.want, cel, "the policy shape")
			assert.Equal(t, tt.want, staticVerdict(cfg, tt.c, set), "the static shape")
		})
	}
}
