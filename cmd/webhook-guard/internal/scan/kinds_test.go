package scan

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/discover"
	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/webhook"
)

// Test_endpoints_everyKind walks guardapi.Kinds: an entry of each kind
// whose Service does not exist fails with what fails for that kind, at
// the field where the kind's row says the entry's service is. A kind
// unreachable has no words for gets the sentence for any kind, and fails
// here.
func Test_endpoints_everyKind(t *testing.T) {
	for _, k := range guardapi.Kinds {
		t.Run(k.Kind, func(t *testing.T) {
			cfg := discover.Configuration{Kind: policy.GuardedKind(k.Kind), Name: k.ExampleName(), Webhooks: []discover.Webhook{{Name: k.Entries.Name,
				Service: &discover.ServiceRef{Namespace: "example-system", Name: "example-webhook"}, FailurePolicy: ptr.To(admv1.Fail)}}}
			found := Health([]discover.Configuration{cfg}, discover.Cluster{}, Options{Now: time.Now(), ExpiryThreshold: time.Hour})
			require.Len(t, found, 1)
			assert.Equal(t, CheckNoEndpoints, found[0].Check)
			assert.NotContains(t, found[0].Detail, "cannot call what", "unreachable has no words for the kind")
			want := strings.Join(append(k.Entries.ClientConfigPath(), "service"), ".")
			if !k.Entries.One() {
				want = k.Entries.List + "[0]." + want
			}
			assert.Equal(t, want, found[0].Field)
		})
	}
}

// Test_scanMappings_everyKind walks guardapi.Kinds: with the example
// object of each kind in the cluster, holding a CA that is not the
// owner's, and a mapping naming them all, scan finds each and reports its
// caBundle as ca-mismatch, none missing. A kind scan does not list, or
// lists without its entry, fails here.
func Test_scanMappings_everyKind(t *testing.T) {
	ownerCA, foreignCA := testpki.MustCA(t, "owner-ca"), testpki.MustCA(t, "foreign-ca")
	var objs []client.Object
	for _, k := range guardapi.Kinds {
		objs = append(objs, &unstructured.Unstructured{Object: k.Example(foreignCA.PEM)})
	}
	doc, err := json.Marshal(map[string]any{"apiVersion": guardapi.APIVersion, "kind": guardapi.Kind, "owners": []guardapi.Owner{{Name: "example",
		Match: guardapi.ExampleMatch(), Writers: guardapi.Subjects{ServiceAccounts: []string{"example-system/example-controller"}}, CA: guardapi.CASource{PEM: string(ownerCA.PEM)}}}})
	require.NoError(t, err)
	cfg, err := policy.Load(doc)
	require.NoError(t, err)
	scheme, err := webhook.NewScheme()
	require.NoError(t, err)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()

	found, err := scanMappings(t.Context(), c, cfg, Options{Now: time.Now(), ExpiryThreshold: time.Hour, DialTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	mismatched := map[string]bool{}
	for _, f := range found {
		assert.NotEqual(t, CheckMissing, f.Check, f.Configuration)
		if f.Check == CheckCAMismatch {
			mismatched[f.Configuration] = true
		}
	}
	for _, k := range guardapi.Kinds {
		assert.True(t, mismatched[k.Kind+"/"+k.ExampleName()], "no ca-mismatch of the %s", k.Kind)
	}
}
