package v1alpha1

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// Test_everyCASourceFieldIsAKind: the JSON fields of CASource and the kinds
// of CASourceKinds are the same list, in the same order (the order messages
// name them). A field added without its kind type, or a kind without its
// field, fails here.
func Test_everyCASourceFieldIsAKind(t *testing.T) {
	var fields []string
	typ := reflect.TypeFor[CASource]()
	for field := range typ.Fields() {
		name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
		fields = append(fields, name)
	}
	var kinds []string
	for _, k := range CASourceKinds() {
		kinds = append(kinds, string(k))
	}
	assert.Equal(t, fields, kinds)
}

// Test_caSourceKindExamples: each kind's Example sets that kind alone,
// validates, survives a YAML round trip (what the chart renders), and
// names its reads with the namespace and name it configures.
func Test_caSourceKindExamples(t *testing.T) {
	for _, k := range CASourceKinds() {
		t.Run(string(k), func(t *testing.T) {
			ex := k.Example()
			require.Len(t, ex.setKinds(), 1)
			assert.Equal(t, k, ex.Kind(), "Example sets another kind's field")
			assert.Empty(t, validateCASource(field.NewPath("ca"), &ex))

			raw, err := yaml.Marshal(ex)
			require.NoError(t, err)
			var m map[string]any
			require.NoError(t, yaml.Unmarshal(raw, &m))
			assert.Equal(t, []string{string(k)}, keys(m), "the example's YAML")
			var back CASource
			require.NoError(t, yaml.Unmarshal(raw, &back))
			assert.Equal(t, ex, back)

			for _, r := range ex.Reads() {
				assert.Contains(t, []string{"secrets", "configmaps"}, r.Resource)
				assert.NotEmpty(t, r.Namespace)
				assert.NotEmpty(t, r.Name)
			}
		})
	}
}

// Test_caSourceKindOfEmpty: no kind claims a source that sets nothing, so
// validation's "exactly one" count is right.
func Test_caSourceKindOfEmpty(t *testing.T) {
	var s CASource
	assert.Empty(t, s.Kind())
	for _, k := range caSourceKinds {
		assert.False(t, k.isSet(&s), k.kind)
	}
}

// Test_caSourceKindPairsAreRejected: any two kinds together fail validation
// with both fields named.
func Test_caSourceKindPairsAreRejected(t *testing.T) {
	kinds := CASourceKinds()
	for i, a := range kinds {
		for _, b := range kinds[i+1:] {
			s := a.Example()
			merge(&s, b.Example())
			errs := validateCASource(field.NewPath("ca"), &s)
			if assert.Len(t, errs, 1, "%s+%s", a, b) {
				assert.Contains(t, errs[0].Error(), "exactly one CA source may be set")
				assert.Contains(t, errs[0].Error(), string(a))
				assert.Contains(t, errs[0].Error(), string(b))
			}
		}
	}
}

// merge copies the non-zero fields of o into s.
func merge(s *CASource, o CASource) {
	sv, ov := reflect.ValueOf(s).Elem(), reflect.ValueOf(o)
	for i := range ov.NumField() {
		if !ov.Field(i).IsZero() {
			sv.Field(i).Set(ov.Field(i))
		}
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
