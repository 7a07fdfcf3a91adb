package charts

import (
	"slices"
	"testing"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Test_guardedKindsInRBAC walks guardapi.Kinds: under every values file
// the guard's ClusterRole lets it get, list and watch each kind's resource
// (the observer watches them, the prober lists them and gets the guarded
// ones), the discover ClusterRole lets people get and list them (discover
// and scan read them), and no Role or ClusterRole grants any other verb
// on them: the guard never writes what it guards. A kind added without
// its grants fails here.
func Test_guardedKindsInRBAC(t *testing.T) {
	for _, name := range sortedKeys(valueSets) {
		t.Run(name, func(t *testing.T) {
			roles := map[string][]string{} // ClusterRole name, group/resource: verbs
			for _, o := range renderObjects(t, valueSets[name], "--set", "discoverRBAC.create=true") {
				if o.Kind != "Role" && o.Kind != "ClusterRole" {
					continue
				}
				for _, r := range o.Rules {
					for _, k := range guardapi.Kinds {
						if !slices.Contains(r.APIGroups, k.Group) || !slices.Contains(r.Resources, k.Resource) {
							continue
						}
						for _, v := range r.Verbs {
							if !slices.Contains([]string{"get", "list", "watch"}, v) {
								t.Errorf("%s %s grants %q on %s: the guard must never write what it guards", o.Kind, o.Metadata.Name, v, k.Resource)
							}
						}
						if o.Kind == "ClusterRole" && len(r.ResourceNames) == 0 {
							key := o.Metadata.Name + " " + k.Group + "/" + k.Resource
							roles[key] = append(roles[key], r.Verbs...)
						}
					}
				}
			}
			for _, k := range guardapi.Kinds {
				for role, want := range map[string][]string{releaseName: {"get", "list", "watch"}, releaseName + "-discover": {"get", "list"}} {
					got := roles[role+" "+k.Group+"/"+k.Resource]
					for _, v := range want {
						if !slices.Contains(got, v) {
							t.Errorf("ClusterRole %s does not grant %s on %s.%s (grants %v)", role, v, k.Resource, k.Group, got)
						}
					}
				}
			}
		})
	}
}
