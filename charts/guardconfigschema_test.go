package charts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// chartOnlyConfigKeys are keys under `config` that the chart consumes and
// never writes into guard.yaml.
var chartOnlyConfigKeys = []string{"existingConfigMap"}

// Test_guardConfigSchemaMatchesGoTypes: the `config` part of
// values.schema.json (rendered verbatim into guard.yaml) has exactly the
// fields of guardapi.GuardConfig, recursively, with matching JSON types, and
// rejects unknown keys everywhere. A field added to the Go types without the
// schema (or the reverse) fails here instead of failing `helm install` or
// the guard's config load.
func Test_guardConfigSchemaMatchesGoTypes(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	s := schemaWalker{t: t, definitions: schema["definitions"].(map[string]any)}
	config := schema["properties"].(map[string]any)["config"].(map[string]any)
	s.compare("config", reflect.TypeFor[guardapi.GuardConfig](), config, chartOnlyConfigKeys)
}

type schemaWalker struct {
	t           *testing.T
	definitions map[string]any
}

func (s schemaWalker) resolve(node map[string]any) map[string]any {
	if ref, ok := node["$ref"].(string); ok {
		return s.definitions[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
	}
	return node
}

func (s schemaWalker) compare(path string, typ reflect.Type, node map[string]any, extra []string) {
	node = s.resolve(node)
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ == reflect.TypeFor[metav1.Duration]() {
		s.wantType(path, node, "string")
		return
	}
	// The Go kinds the GuardConfig's fields have; the default reports any
	// other.
	//exhaustive:ignore
	switch typ.Kind() {
	case reflect.Struct:
		s.wantType(path, node, "object")
		if node["additionalProperties"] != false {
			s.t.Errorf("%s: the schema does not reject unknown keys (additionalProperties: false)", path)
		}
		props, _ := node["properties"].(map[string]any)
		fields := jsonFields(typ)
		for name, f := range fields {
			p, ok := props[name].(map[string]any)
			if !ok {
				s.t.Errorf("%s.%s: field of %s missing from values.schema.json", path, name, typ)
				continue
			}
			s.compare(path+"."+name, f, p, nil)
		}
		for name := range props {
			if _, ok := fields[name]; !ok && !slices.Contains(extra, name) {
				s.t.Errorf("%s.%s: in values.schema.json but not a field of %s (policy/config_types.go)", path, name, typ)
			}
		}
	case reflect.Slice:
		s.wantType(path, node, "array")
		if items, ok := node["items"].(map[string]any); ok {
			s.compare(path+"[]", typ.Elem(), items, nil)
		}
	case reflect.Map:
		s.wantType(path, node, "object")
	case reflect.String:
		s.wantType(path, node, "string")
	case reflect.Int, reflect.Int32, reflect.Int64:
		s.wantType(path, node, "integer")
	case reflect.Bool:
		s.wantType(path, node, "boolean")
	default:
		s.t.Errorf("%s: no schema comparison for Go kind %s", path, typ.Kind())
	}
}

func (s schemaWalker) wantType(path string, node map[string]any, want string) {
	if got, ok := node["type"]; ok && got != want {
		s.t.Errorf("%s: schema type %v, Go type is %s", path, got, want)
	}
}

// jsonFields maps the JSON names of a struct's fields (inline TypeMeta
// excluded: the chart writes apiVersion and kind itself) to their types.
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		out[name] = f.Type
	}
	return out
}
