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

func (in Input) trustObjects() []trustObject {
	var out []trustObject
	for _, o := range []struct {
		kind  string
		names []string
	}{{guardapi.KindCustomResourceDefinition, in.CustomResourceDefinitions}, {guardapi.KindAPIService, in.APIServices}} {
		if info, _ := guardapi.KindInfoOf(o.kind); len(o.names) > 0 {
			out = append(out, trustObject{info.Group, info.Resource, o.names})
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
	parts := []string{`request.resource.group == "admissionregistration.k8s.io"`}
	for _, o := range objects {
		names := slices.Compact(slices.Sorted(slices.Values(o.names)))
		list, _ := json.Marshal(names) //nolint:errchkjson // a []string always encodes
		parts = append(parts, "(request.resource.resource == "+vap.CELString(o.resource)+" && "+vap.RequestName+" in "+string(list)+")")
	}
	return []admv1.MatchCondition{{Name: "named-trust-objects", Expression: strings.Join(parts, " || ")}}
}
