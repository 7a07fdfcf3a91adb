package probe

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Test_Runner_Paths_everyKind walks guardapi.Kinds: with one guarded
// object of each kind in the cluster (its row's example), a round lists
// the trust path of each, with its Service and caBundle. A kind the
// runner does not list (or whose entry TrustObjectPath cannot find) fails
// here: its served chains would never be probed.
func Test_Runner_Paths_everyKind(t *testing.T) {
	ca := testpki.MustCA(t, "owner-ca")
	var objs []client.Object
	for _, k := range guardapi.Kinds {
		objs = append(objs, &unstructured.Unstructured{Object: k.Example(ca.PEM)})
	}
	doc, err := json.Marshal(map[string]any{"apiVersion": guardapi.APIVersion, "kind": guardapi.Kind, "owners": []guardapi.Owner{
		{Name: "app", Match: guardapi.ExampleMatch(), Writers: guardapi.Subjects{ServiceAccounts: []string{"app/controller"}}, CA: guardapi.CASource{PEM: string(ca.PEM)}}}})
	require.NoError(t, err)
	cfg, err := policy.Load(doc)
	require.NoError(t, err)
	// A scheme of its own: the fake client registers the metadata lists it
	// is asked for in its scheme, and another test's would be this one's.
	s := runtime.NewScheme()
	require.NoError(t, scheme.AddToScheme(s))
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	r := &Runner{Config: staticConfig{cfg}, Cached: metadataLister{c}, Direct: c, Log: testr.New(t)}

	paths := map[string]TrustPath{}
	for _, p := range r.Paths(t.Context()) {
		paths[p.Kind] = p
	}
	for _, k := range guardapi.Kinds {
		t.Run(k.Kind, func(t *testing.T) {
			p, ok := paths[k.Kind]
			require.True(t, ok, "no trust path of the kind")
			assert.Equal(t, k.ExampleName(), p.Configuration)
			assert.Equal(t, "app", p.Mapping)
			assert.Equal(t, ca.PEM, p.CABundle)
			if assert.NotNil(t, p.Service) {
				assert.Equal(t, ServiceRef{Namespace: "example-system", Name: "example-webhook", Port: 443}, *p.Service)
			}
		})
	}
}

// metadataLister lists the metadata of kinds the fake client knows only
// as unstructured objects (it cannot convert them into
// PartialObjectMetadata, as the manager's metadata cache does).
type metadataLister struct{ client.Reader }

func (m metadataLister) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	meta, ok := list.(*metav1.PartialObjectMetadataList)
	if !ok {
		return m.Reader.List(ctx, list, opts...)
	}
	u := &unstructured.UnstructuredList{}
	u.SetGroupVersionKind(meta.GroupVersionKind())
	if err := m.Reader.List(ctx, u, opts...); err != nil {
		return err
	}
	for _, item := range u.Items {
		meta.Items = append(meta.Items, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: item.GetName(), Labels: item.GetLabels()}})
	}
	return nil
}
