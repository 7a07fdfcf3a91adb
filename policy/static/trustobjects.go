package static

import (
	"encoding/json"
	"slices"
	"strings"

	admv1 "k8s.io/api/admissionregistration/v1"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// trustObject is a kind beside the webhook configurations whose caBundle
// kube-apiserver trusts, as the static entry's rules name it.
type trustObject struct {
	group, resource string
	names           []string
}

// TrustObjectsOf are the names the mappings of cfg give the objects of the
// kinds whose trust alone a mapping owns, by kind: Input.TrustObjects.
func TrustObjectsOf(cfg *guardapi.GuardConfig) map[string][]string {
	out := map[string][]string{}
	for i := range cfg.Owners {
		for _, n := range cfg.Owners[i].Match.Named() {
			if n.OwnsTrustOnly && len(n.Names) > 0 {
				out[n.Kind] = append(out[n.Kind], n.Names...)
			}
		}
	}
	return out
}

// trustObjects are the kinds of guardapi.Kinds whose trust alone a mapping
// owns that the mappings name, in Kinds' order, with their names.
func (in Input) trustObjects() []trustObject {
	var out []trustObject
	for _, info := range guardapi.Kinds {
		if names := in.TrustObjects[info.Kind]; info.OwnsTrustOnly && len(names) > 0 {
			out = append(out, trustObject{info.Group, info.Resource, names})
		}
	}
	return out
}

// trustObjectRules are the rules of the CRDs and APIServices the mappings
// name; none when they name none.
func (in Input) trustObjectRules() []admv1.RuleWithOperations {
	var out []admv1.RuleWithOperations
	for _, o := range in.trustObjects() {
		out = append(out, writesIn(o.group, o.resource))
	}
	return out
}

// trustObjectConditions narrow the CRD and APIService rules to the named
// objects: unlike a webhook configuration, a CRD is written by every
// operator's installer, and a guard outage (failurePolicy Fail) must not
// block a CRD no mapping names. Webhook configurations pass the condition
// unchanged, so that `unmanaged: audit` still sees every one of them.
func (in Input) trustObjectConditions() []admv1.MatchCondition {
	objects := in.trustObjects()
	if len(objects) == 0 {
		return nil
	}
	var parts []string
	for _, rule := range wholeObjectRules() {
		parts = append(parts, "request.resource.group == "+vap.CELString(rule.APIGroups[0]))
	}
	for _, o := range objects {
		names := slices.Compact(slices.Sorted(slices.Values(o.names)))
		list, _ := json.Marshal(names) //nolint:errchkjson // a []string always encodes
		parts = append(parts, "(request.resource.resource == "+vap.CELString(o.resource)+" && "+vap.RequestName+" in "+string(list)+")")
	}
	return []admv1.MatchCondition{{Name: "named-trust-objects", Expression: strings.Join(parts, " || ")}}
}
