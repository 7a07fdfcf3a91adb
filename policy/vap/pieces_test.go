package vap

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap/celfmt"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/pieces")

// Test_pieces holds each named piece the policies are built from to a
// small golden file of its own (testdata/pieces, laid out by celfmt), so
// that a change to one rule shows as a diff of that rule, not of every
// policy that holds it. The arguments are placeholders a reader can find
// in the output: k and nb for base64 texts, "CA" for the owner's CA.
func Test_pieces(t *testing.T) {
	sel := &metav1.LabelSelector{
		MatchLabels:      map[string]string{"app": "demo"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}},
	}
	selector, err := LabelSelectorExpression(sel, "object")
	require.NoError(t, err)
	subjects, _ := SubjectsExpression(guardapi.Subjects{ServiceAccounts: []string{"demo-system/demo"}, Groups: []string{"demo-admins"}})
	crd, _ := TrustObjectKeepsTrust("CustomResourceDefinition")
	apiService, _ := TrustObjectKeepsTrust("APIService")
	pieces := map[string]string{
		// Who asks and what about (request.go).
		"request-name":     RequestName,
		"request-user":     requestUser,
		"owned-name":       ownedName([]string{namesOfKind("MutatingWebhookConfiguration", []string{"m"}), namesOfKind("ValidatingWebhookConfiguration", []string{"v"})}),
		"subjects":         subjects,
		"label-selector":   selector,
		"pointer-of":       pointerOf("object"),
		"denial-prefix":    mappingPolicy{owner: &guardapi.Owner{Name: "demo"}, mode: guardapi.ModeEnforce}.denial(),
		"same-entry-names": sameEntryNames,
		// What leaves the trust alone (keepstrust.go, unchanged.go).
		"same-webhooks":             sameWebhooks,
		"same-client-configs":       sameClientConfigs,
		"same-pointer":              samePointerAlways,
		"webhooks-keep-trust":       WebhooksKeepTrust(),
		"crd-keeps-trust":           crd,
		"apiservice-keeps-trust":    apiService,
		"keeps-entries":             keepsEntries("entriesOK"),
		"same-bundles":              sameBundles,
		"bundle-of":                 bundleOf("e"),
		"all-bundles-are":           allBundlesAre(`"CA"`),
		"uniform-under":             uniformUnder("ca", `"Ci0t" + shift2`, `"LQot" + shift1`, " && mergeIf", true),
		"uniform-rotation-variable": uniformRotationVariable("sameNames"),
		// The rotation rule (rotation.go).
		"byte-length":      byteLength("k"),
		"ends-with-footer": endsWithFooter("k"),
		"merged-tail":      mergedTail("q", "ca", "afterOne", "afterTwo"),
		"merged-after":     mergedAfterOf("k", "nb"),
		"ca-is-pem":        caIsPEM,
		"ca-shift-1":       caShift1,
		"ca-shift-2":       caShift2,
		"ca-values":        caValues,
		"ca-len":           caLen,
		"old-bundles":      oldBundles,
		// The entry rule (entries.go).
		"unfilled-webhooks": unfilledWebhooks,
		// The trust of CRDs and APIServices (trustobjects.go, pointer.go).
		"crd-same-endpoint":        crdSameEndpoint("object", "oldObject"),
		"apiservice-same-endpoint": apiServiceSameEndpoint("object", "oldObject"),
	}
	for name, expr := range pieces {
		t.Run(name, func(t *testing.T) {
			got, err := celfmt.Format(expr, 0)
			require.NoError(t, err, expr)
			path := filepath.Join("testdata", "pieces", name+".cel")
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, []byte(got+"\n"), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./policy/vap -run Test_pieces -update")
			assert.Equal(t, string(want), got+"\n", "%s changed: review the diff, then rerun with -update", name)
		})
	}
	t.Run("every golden is a piece's", func(t *testing.T) {
		files, err := filepath.Glob(filepath.Join("testdata", "pieces", "*.cel"))
		require.NoError(t, err)
		for _, f := range files {
			name := filepath.Base(f)
			_, ok := pieces[name[:len(name)-len(".cel")]]
			assert.True(t, ok, "%s is no piece's golden: delete it", f)
		}
	})
}
