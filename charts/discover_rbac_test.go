package charts

import (
	"slices"
	"strings"
	"testing"
)

// Test_discoverRBAC checks the ClusterRole for people running discover and
// scan: off by default, and when on, read-only.
func Test_discoverRBAC(t *testing.T) {
	discoverRoles := func(objs []object) []object {
		var out []object
		for _, o := range objs {
			if o.Kind == "ClusterRole" && strings.HasSuffix(o.Metadata.Name, "-discover") {
				out = append(out, o)
			}
		}
		return out
	}
	t.Run("if discoverRBAC.create is not set, render no discover ClusterRole", func(t *testing.T) {
		if got := discoverRoles(renderObjects(t, "")); len(got) != 0 {
			t.Errorf("rendered %d discover ClusterRoles by default; want none", len(got))
		}
	})
	t.Run("if discoverRBAC.create is true, render one that only gets and lists", func(t *testing.T) {
		got := discoverRoles(renderObjects(t, "", "--set", "discoverRBAC.create=true"))
		if len(got) != 1 {
			t.Fatalf("rendered %d discover ClusterRoles; want 1", len(got))
		}
		var resources []string
		for i, r := range got[0].Rules {
			if !slices.Equal(r.Verbs, []string{"get", "list"}) {
				t.Errorf("rules[%d] grants %v on %v; want get, list", i, r.Verbs, r.Resources)
			}
			resources = append(resources, r.Resources...)
		}
		slices.Sort(resources)
		want := []string{"apiservices", "certificates", "clusterissuers", "configmaps", "customresourcedefinitions", "daemonsets", "deployments", "endpointslices", "issuers",
			"mutatingwebhookconfigurations", "namespaces", "secrets", "services", "statefulsets", "validatingwebhookconfigurations"}
		if !slices.Equal(resources, want) {
			t.Errorf("resources %v; want %v", resources, want)
		}
	})
}
