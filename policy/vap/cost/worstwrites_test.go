package cost

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// twoMappings is config and a second mapping, of the mutating
// configuration "other".
const twoMappings = config + `  - name: other
    mode: enforce
    match: {mutating: [other]}
    writers: {users: [other]}
    ca: {secret: {namespace: other, name: other-ca}}
`

// checked names one ObjectResult: the mapping, the object, the write and
// the entries it was run on.
type checked struct {
	mapping, object string
	write           Write
	entries         int
}

func Test_WorstWrites(t *testing.T) {
	cfg, err := policy.Load([]byte(twoMappings))
	require.NoError(t, err)
	appCA, otherCA := testpki.MustCA(t, "app-ca"), testpki.MustCA(t, "other-ca")
	cas := map[string]vap.CA{
		"app":   {PEM: appCA.PEM, Source: "Secret app-system/app-ca"},
		"other": {PEM: otherCA.PEM, Source: "Secret other/other-ca"},
	}
	// named is configuration(n) as the object kind/name.
	named := func(kind, name string, n int) *unstructured.Unstructured {
		obj := configuration(n, appCA.PEM)
		obj.SetKind(kind)
		obj.SetName(name)
		return obj
	}
	notBase64 := configuration(2, appCA.PEM)
	hooks, _, _ := unstructured.NestedSlice(notBase64.Object, "webhooks")
	hooks[0].(map[string]any)["clientConfig"].(map[string]any)["caBundle"] = "not base64"
	require.NoError(t, unstructured.SetNestedSlice(notBase64.Object, hooks, "webhooks"))

	tests := map[string]struct {
		configurations []*unstructured.Unstructured
		want           []checked
		wantErr        string
	}{
		"if a mapping owns a configuration, each of Writes is run on it, in order, named by the mapping": {
			configurations: []*unstructured.Unstructured{configuration(3, appCA.PEM)},
			want: []checked{
				{mapping: "app", object: "ValidatingWebhookConfiguration/app", write: Merge, entries: 3},
				{mapping: "app", object: "ValidatingWebhookConfiguration/app", write: Merged, entries: 3},
			},
		},
		"if no mapping owns a configuration, it is not checked": {
			configurations: []*unstructured.Unstructured{named("ValidatingWebhookConfiguration", "unowned", 3)},
		},
		"if a configuration has no entries, the owner has no such write": {
			configurations: []*unstructured.Unstructured{configuration(0, appCA.PEM)},
		},
		"if two mappings own configurations, each is run in its own mapping's policies, in the order given": {
			configurations: []*unstructured.Unstructured{
				named("MutatingWebhookConfiguration", "other", 2),
				named("ValidatingWebhookConfiguration", "unowned", 3),
				configuration(3, appCA.PEM),
			},
			want: []checked{
				{mapping: "other", object: "MutatingWebhookConfiguration/other", write: Merge, entries: 2},
				{mapping: "other", object: "MutatingWebhookConfiguration/other", write: Merged, entries: 2},
				{mapping: "app", object: "ValidatingWebhookConfiguration/app", write: Merge, entries: 3},
				{mapping: "app", object: "ValidatingWebhookConfiguration/app", write: Merged, entries: 3},
			},
		},
		"if an entry's caBundle is not base64, the error names the mapping and the configuration": {
			configurations: []*unstructured.Unstructured{notBase64},
			wantErr:        "owners[app]: ValidatingWebhookConfiguration app: webhooks[0].clientConfig.caBundle: ",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rs, err := WorstWrites(t.Context(), cfg, cas, tc.configurations)

			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			var got []checked
			for _, r := range rs {
				got = append(got, checked{mapping: r.Mapping, object: r.Object.GetKind() + "/" + r.Object.GetName(), write: r.Result.Write, entries: r.Result.Entries})
				assert.Positive(t, r.Result.Cost, "%s on %s", r.Result.Write, r.Object.GetName())
				assert.False(t, r.Result.Refused())
				assert.Contains(t, vap.PolicyNames(r.Mapping), r.Result.Policy, "run in the policies of the mapping that owns the object")
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
