package charts

import (
	"slices"
	"strings"
	"testing"

	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// Test_policyObjectWritesByName: in the policy shape the guard may update
// and delete only the objects it generates, named as the generator names
// them (vap.PolicyNames per mapping, vap.AnchorPolicyName); create, get
// and list cannot be restricted by name in RBAC.
func Test_policyObjectWritesByName(t *testing.T) {
	want := append(vap.PolicyNames("example-operator"), vap.AnchorPolicyName("webhook-guard-policy-anchor"))
	slices.Sort(want)
	var found bool
	for _, o := range renderObjects(t, valueSets["policy"]) {
		if o.Kind != "ClusterRole" {
			continue
		}
		for i, r := range o.Rules {
			if !slices.Contains(r.Resources, "validatingadmissionpolicies") {
				continue
			}
			writes := slices.ContainsFunc(r.Verbs, func(v string) bool { return v == "update" || v == "delete" || v == "patch" })
			if !writes {
				continue
			}
			found = true
			if !slices.Equal(r.ResourceNames, want) {
				t.Errorf("ClusterRole %s rules[%d] grants %v on generated policies to names %v; want exactly %v", o.Metadata.Name, i, r.Verbs, r.ResourceNames, want)
			}
		}
	}
	if !found {
		t.Fatal("the policy shape grants no update or delete on its generated policies")
	}
}

// Test_eventsOnlyWhereRead: the guard writes Events only in namespace
// default (records.EventNamespace), where cluster-scoped objects' Events are
// read, and leader election's about its Lease in the release namespace:
// Roles there, no cluster-wide grant.
func Test_eventsOnlyWhereRead(t *testing.T) {
	for _, name := range sortedKeys(valueSets) {
		t.Run(name, func(t *testing.T) {
			var inDefault bool
			for _, o := range renderObjects(t, valueSets[name]) {
				if o.Kind != "Role" && o.Kind != "ClusterRole" {
					continue
				}
				for i, r := range o.Rules {
					if !slices.Contains(r.Resources, "events") || !slices.ContainsFunc(r.Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" }) {
						continue
					}
					leaderElection := strings.HasSuffix(o.Metadata.Name, "-leader-election")
					if o.Kind == "ClusterRole" || (o.Metadata.Namespace != "default" && !leaderElection) {
						t.Errorf("%s %s/%s rules[%d] grants %v on events: the guard writes Events only in namespace default (and leader election's next to its Lease)", o.Kind, o.Metadata.Namespace, o.Metadata.Name, i, r.Verbs)
					}
					inDefault = inDefault || o.Metadata.Namespace == "default"
				}
			}
			if !inDefault {
				t.Error("no Role lets the guard write its Events in namespace default")
			}
		})
	}
}
