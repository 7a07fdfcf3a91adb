package v1alpha1

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Test_everyMatchFieldIsAKind: the name lists of Match (every JSON field
// but labelSelector) and the Field of each row of Kinds are the same list,
// in the same order, and NamesOf finds each kind's field. A field added
// without its row, or a row whose field NamesOf does not know, fails here.
func Test_everyMatchFieldIsAKind(t *testing.T) {
	var fields []string
	for f := range reflect.TypeFor[Match]().Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "labelSelector" {
			fields = append(fields, name)
		}
	}
	var kinds []string
	for _, k := range Kinds {
		kinds = append(kinds, k.Field)
	}
	assert.Equal(t, fields, kinds)

	for _, k := range Kinds {
		t.Run(k.Kind, func(t *testing.T) {
			var m Match
			p := m.NamesOf(k.Kind)
			require.NotNil(t, p, "Match.NamesOf has no field for the kind")
			*p = []string{k.ExampleName()}
			raw, err := json.Marshal(m)
			require.NoError(t, err)
			assert.JSONEq(t, `{"`+k.Field+`":["`+k.ExampleName()+`"]}`, string(raw), "NamesOf names another field than the row's Field")
		})
	}
}

// Test_kindRows: every row says where the kind is served, its short name
// (unique: report names carry it) and where its objects hold their
// entries: a list, or one named entry with its path and the path whose
// presence means it is there.
func Test_kindRows(t *testing.T) {
	shortNames := map[string]string{}
	for _, k := range Kinds {
		t.Run(k.Kind, func(t *testing.T) {
			for name, v := range map[string]string{"Group": k.Group, "Version": k.Version, "Resource": k.Resource, "Field": k.Field, "ShortName": k.ShortName} {
				assert.NotEmpty(t, v, name)
			}
			assert.Equal(t, strings.ToLower(k.Resource), k.Resource)
			if other, dup := shortNames[k.ShortName]; dup {
				t.Errorf("short name %q is %s's too", k.ShortName, other)
			}
			shortNames[k.ShortName] = k.Kind
			got, ok := KindInfoOf(k.Kind)
			assert.True(t, ok)
			assert.Equal(t, k, got)

			e := k.Entries
			if e.One() {
				assert.NotEmpty(t, e.Name, "the one entry's name")
				assert.NotEmpty(t, e.Label, "the one entry in a sentence")
				assert.NotEmpty(t, e.At, "the one entry's path")
				assert.NotEmpty(t, e.Present, "the path that says the entry is there")
			} else {
				assert.Empty(t, e.Name, "a list's entries are named by their own name field")
				assert.Empty(t, e.Label, "a list's entries are List[i] in a sentence")
				assert.Empty(t, e.At, "a list's entries are its items")
			}
		})
	}
}

// Test_kindExamples: each row's Example is an object of the kind, named
// ExampleName (a name validation accepts), with one entry whose caBundle
// is where the row says and which calls a Service.
func Test_kindExamples(t *testing.T) {
	bundle := []byte("-----BEGIN CERTIFICATE-----\n")
	for _, k := range Kinds {
		t.Run(k.Kind, func(t *testing.T) {
			obj := k.Example(bundle)
			require.NotNil(t, obj, "the row's example is no JSON object")
			assert.Equal(t, k.APIVersion(), obj["apiVersion"])
			assert.Equal(t, k.Kind, obj["kind"])
			assert.Equal(t, k.ExampleName(), nested(obj, "metadata", "name"))
			assert.NotEmpty(t, k.ExampleName())

			var m Match
			if p := m.NamesOf(k.Kind); assert.NotNil(t, p, "Match.NamesOf has no field for the kind") {
				*p = []string{k.ExampleName()}
				assert.Empty(t, validateTrustObjectNames(field.NewPath("match"), &m))
			}

			entry := obj
			if k.Entries.One() {
				assert.NotNil(t, nested(obj, k.Entries.Present...), "the entry is not present")
			} else {
				items, _ := obj[k.Entries.List].([]any)
				require.Len(t, items, 1, "entries in %s", k.Entries.List)
				entry, _ = items[0].(map[string]any)
				assert.NotEmpty(t, entry["name"], "the entry's name")
			}
			assert.Equal(t, base64.StdEncoding.EncodeToString(bundle), nested(entry, k.Entries.CABundlePath()...))
			cc, _ := nested(entry, k.Entries.ClientConfigPath()...).(map[string]any)
			assert.NotNil(t, cc["service"], "the entry calls no Service")
		})
	}
}

// nested is the value at path in obj; nil when there is none.
func nested(obj map[string]any, path ...string) any {
	var v any = obj
	for _, f := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[f]
	}
	return v
}

// Test_CABundleIn: a clientConfig's caBundle as JSON carries it, decoded;
// a value that is not base64 is kept as it is (it holds no certificate)
// and an absent or empty one is nil.
func Test_CABundleIn(t *testing.T) {
	for name, tc := range map[string]struct {
		clientConfig map[string]any
		want         []byte
	}{
		"base64":       {clientConfig: map[string]any{"caBundle": "UEVN"}, want: []byte("PEM")},
		"not base64":   {clientConfig: map[string]any{"caBundle": "not base64!"}, want: []byte("not base64!")},
		"empty":        {clientConfig: map[string]any{"caBundle": ""}},
		"absent":       {clientConfig: map[string]any{"url": "https://a.example.com"}},
		"not a string": {clientConfig: map[string]any{"caBundle": int64(1)}},
		"no map":       {},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, CABundleIn(tc.clientConfig))
		})
	}
}
