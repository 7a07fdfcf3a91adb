package gitops

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Test_everyKind walks guardapi.Kinds: a mapping whose CA is written at
// run time and that names each kind's example object gives each away, in
// the kind's group, and the Argo CD jq path and the Flux JSON Pointers of
// each find the caBundle in the kind's example object. A kind whose
// caBundle the rules would not find (the GitOps tool would write Git's
// value over the owner's) fails here.
func Test_everyKind(t *testing.T) {
	bundle := []byte("ca")
	want := base64.StdEncoding.EncodeToString(bundle)
	owned, _, err := OwnedFields(config(guardapi.Owner{Name: "example", Match: guardapi.ExampleMatch(),
		Writers: guardapi.Subjects{ServiceAccounts: []string{"example-system/example-controller"}},
		CA:      guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: "example-system", Name: "example-ca"}}}))
	require.NoError(t, err)
	argo, _ := ArgoCD(owned)
	flux := Flux(owned, 1)
	require.Len(t, argo, len(guardapi.Kinds))
	require.Len(t, flux, len(guardapi.Kinds))
	for i, o := range owned {
		k, ok := guardapi.KindInfoOf(o.Kind)
		require.True(t, ok, o.Kind)
		t.Run(k.Kind, func(t *testing.T) {
			assert.Equal(t, k.Group, o.Group)
			obj := k.Example(bundle)
			require.Len(t, argo[i].JQPathExpressions, 1)
			assert.Equal(t, []any{want}, jqPath(obj, argo[i].JQPathExpressions[0]), "Argo CD's %s", argo[i].JQPathExpressions[0])
			for _, p := range flux[i].Paths {
				assert.Equal(t, want, jsonPointer(obj, p), "Flux's %s", p)
			}
		})
	}
}

// jqPath evaluates the subset of jq that argoCDPath writes: .a.b fields,
// and a[]? iterating a list.
func jqPath(obj any, path string) []any {
	values := []any{obj}
	for f := range strings.SplitSeq(strings.TrimPrefix(path, "."), ".") {
		name, iterate := strings.CutSuffix(f, "[]?")
		var next []any
		for _, v := range values {
			m, _ := v.(map[string]any)
			if !iterate {
				next = append(next, m[name])
				continue
			}
			items, _ := m[name].([]any)
			next = append(next, items...)
		}
		values = next
	}
	return values
}

// jsonPointer evaluates an RFC 6901 JSON Pointer without escapes.
func jsonPointer(obj any, pointer string) any {
	v := obj
	for f := range strings.SplitSeq(strings.TrimPrefix(pointer, "/"), "/") {
		switch c := v.(type) {
		case map[string]any:
			v = c[f]
		case []any:
			i, err := strconv.Atoi(f)
			if err != nil || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}
