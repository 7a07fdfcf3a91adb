package charts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Test_caSourceKindsInSchema: every kind of guardapi.CASourceKinds is a
// property of the values schema's caSource definition and is named in its
// description, so a new kind cannot be rejected by `helm install`.
func Test_caSourceKindsInSchema(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Definitions struct {
			CASource struct {
				Properties  map[string]any `json:"properties"`
				Description string         `json:"description"`
			} `json:"caSource"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	def := schema.Definitions.CASource
	for _, k := range guardapi.CASourceKinds() {
		if _, ok := def.Properties[string(k)]; !ok {
			t.Errorf("values.schema.json definitions.caSource has no property %q for the CA source kind %T", string(k), k)
		}
		if !strings.Contains(def.Description, string(k)) {
			t.Errorf("values.schema.json definitions.caSource's description %q does not name %q", def.Description, string(k))
		}
	}
}

// Test_caSourceKindsRenderRBAC installs one mapping per kind of
// guardapi.CASourceKinds, each with the kind's Example: the values pass the
// schema, and the Roles grant get, list and watch on exactly the Secrets and
// ConfigMaps the kinds name (Reads), no more and no fewer. A new kind whose
// reads the caReads helper (_helpers.tpl) does not collect fails here.
func Test_caSourceKindsRenderRBAC(t *testing.T) {
	want := map[string][]string{} // "namespace resource" -> names
	for _, k := range guardapi.CASourceKinds() {
		ex := k.Example()
		for _, r := range ex.Reads() {
			key := r.Namespace + " " + r.Resource
			want[key] = append(want[key], r.Name)
		}
	}
	got := map[string][]string{}
	for _, o := range renderObjects(t, mappingPerKind(t), "--show-only", "templates/rbac.yaml") {
		if o.Kind != "Role" || strings.HasSuffix(o.Metadata.Name, "-leader-election") || strings.HasSuffix(o.Metadata.Name, "-events") {
			continue
		}
		for i, r := range o.Rules {
			for _, res := range r.Resources {
				if !slices.Equal(r.Verbs, []string{"get", "list", "watch"}) {
					t.Errorf("Role %s/%s rules[%d] grants %v on %s; want get, list, watch", o.Metadata.Namespace, o.Metadata.Name, i, r.Verbs, res)
				}
				key := o.Metadata.Namespace + " " + res
				got[key] = append(got[key], r.ResourceNames...)
			}
		}
	}
	for _, key := range sortedKeys(want) {
		slices.Sort(want[key])
		slices.Sort(got[key])
		if !slices.Equal(got[key], want[key]) {
			t.Errorf("%s: the Roles grant %v; the CA sources name %v", key, got[key], want[key])
		}
	}
	for _, key := range sortedKeys(got) {
		if _, ok := want[key]; !ok {
			t.Errorf("%s: the Roles grant %v, which no CA source names", key, got[key])
		}
	}
}

// Test_caSourceKindsInNotes: NOTES.txt reminds the user to list in
// extraSecretReads the Secrets of exactly the mappings whose kind finds its
// Secret at run time, and its reminder names each such kind.
func Test_caSourceKindsInNotes(t *testing.T) {
	notes := renderNotes(t, mappingPerKind(t))
	lines := strings.Split(notes, "\n")
	for _, k := range guardapi.CASourceKinds() {
		listed := slices.Contains(lines, "  - "+exampleMappingName(k))
		if listed != k.SecretAtRunTime() {
			t.Errorf("%s: NOTES.txt lists the mapping among those whose Secret the chart cannot name: %v; SecretAtRunTime: %v (webhook-guard.indirectSources in _helpers.tpl)", string(k), listed, k.SecretAtRunTime())
		}
		if k.SecretAtRunTime() && !strings.Contains(notes, string(k)) {
			t.Errorf("NOTES.txt's extraSecretReads reminder does not name the source kind %s", string(k))
		}
	}
}

// mappingPerKind writes values with one mapping per kind of
// guardapi.CASourceKinds, each with the kind's Example as its CA source.
func mappingPerKind(t *testing.T) string {
	t.Helper()
	var owners []guardapi.Owner
	for _, k := range guardapi.CASourceKinds() {
		name := exampleMappingName(k)
		owners = append(owners, guardapi.Owner{
			Name:    name,
			Match:   guardapi.Match{Validating: []string{name}},
			Writers: guardapi.Subjects{ServiceAccounts: []string{"example-system/example-controller"}},
			CA:      k.Example(),
		})
	}
	raw, err := yaml.Marshal(map[string]any{"config": map[string]any{"owners": owners}})
	if err != nil {
		t.Fatal(err)
	}
	return writeValues(t, string(raw))
}

func exampleMappingName(k guardapi.CASourceKind) string {
	return "example-" + strings.ToLower(string(k))
}
