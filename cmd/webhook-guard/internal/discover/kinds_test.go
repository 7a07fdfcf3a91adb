package discover

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Test_Propose_everyKind walks guardapi.Kinds: with the example object of
// each kind in the cluster, all calling one workload's Service with its
// CA, Gather reads each (with its entry, named as its row names it) and
// Propose puts every one under its own match field of one mapping. A kind
// Gather does not list, or that Propose names under another field (or
// none), fails here.
func Test_Propose_everyKind(t *testing.T) {
	ca := testpki.MustCA(t, "example-ca")
	labels := map[string]string{"app": "example"}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "example-system"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "example-system", Name: "example-webhook"}, Spec: corev1.ServiceSpec{Selector: labels}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "example-system", Name: "example"}, Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{ServiceAccountName: "example-controller"}}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "example-system", Name: "example-ca"}, Data: map[string][]byte{"ca.crt": ca.PEM}},
	}
	for _, k := range guardapi.Kinds {
		objs = append(objs, &unstructured.Unstructured{Object: k.Example(ca.PEM)})
	}
	c := fake.NewClientBuilder().WithScheme(trustScheme(t)).WithObjects(objs...).Build()

	configs, cl, err := Gather(t.Context(), c, "cert-manager/cert-manager-cainjector")
	require.NoError(t, err)
	read := map[string]Configuration{}
	for _, cfg := range configs {
		read[string(cfg.Kind)] = cfg
	}
	for _, k := range guardapi.Kinds {
		cfg, ok := read[k.Kind]
		if assert.True(t, ok, "Gather read no %s", k.Kind) && assert.Len(t, cfg.Webhooks, 1, k.Kind) {
			assert.Equal(t, k.ExampleName(), cfg.Name)
			assert.Equal(t, ca.PEM, cfg.Webhooks[0].CABundle, k.Kind)
			if k.Entries.One() {
				assert.Equal(t, k.Entries.Name, cfg.Webhooks[0].Name, k.Kind)
			}
		}
	}

	p := Propose(configs, cl)
	require.Len(t, p.Mappings, 1, "undecided: %+v", p.Undecided)
	assert.Equal(t, guardapi.ExampleMatch(), p.Mappings[0].Owner.Match)
	assert.Equal(t, []string{"example-system/example-controller"}, p.Mappings[0].Owner.Writers.ServiceAccounts)
}
