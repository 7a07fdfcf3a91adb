package gitops

import (
	"fmt"
	"strings"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// ArgoCDSyncOption is the sync option that makes a sync keep the ignored
// fields as the cluster holds them; without it ignoreDifferences only hides
// them from the diff, and a sync of the object still writes Git's value.
const ArgoCDSyncOption = "RespectIgnoreDifferences=true"

// argoCDPath is the jq path of the caBundle(s) of an object of kind, as
// Argo CD's jq path expressions name it, where the kind's row of
// guardapi.Kinds says they are: every entry's of a list
// (.webhooks[]?.clientConfig.caBundle: the entries need not be counted or
// named), the one entry's of a CRD or an APIService.
func argoCDPath(kind string) string {
	info, _ := guardapi.KindInfoOf(kind) // owned names the rows' kinds
	bundle := strings.Join(info.Entries.CABundlePath(), ".")
	if info.Entries.One() {
		return "." + bundle
	}
	return "." + info.Entries.List + "[]?." + bundle
}

// ArgoCDIgnoreDifference is one entry of an Application's
// spec.ignoreDifferences, with the fields of Argo CD's
// ResourceIgnoreDifferences this generator sets.
type ArgoCDIgnoreDifference struct {
	Group             string   `json:"group"`
	Kind              string   `json:"kind"`
	Name              string   `json:"name"`
	JQPathExpressions []string `json:"jqPathExpressions"`
}

// ArgoCD is the ignoreDifferences entries for owned, one per named
// configuration, and a warning per label selector: ignoreDifferences
// selects by name only, and a rule without a name would cover every
// configuration of that kind in the Application, not only the mapping's.
func ArgoCD(owned []Owned) ([]ArgoCDIgnoreDifference, []string) {
	out := []ArgoCDIgnoreDifference{}
	var warnings []string
	for _, o := range owned {
		if o.Name == "" {
			warnings = append(warnings, fmt.Sprintf("owners[%s].match.labelSelector (%s): Argo CD's ignoreDifferences selects by name, not by label; list the configurations under match.validating or match.mutating, or add a rule for kind %s without a name (it then covers every %s of the Application)", o.Mapping, o.LabelSelector, o.Kind, o.Kind))
			continue
		}
		out = append(out, ArgoCDIgnoreDifference{
			Group:             o.Group,
			Kind:              o.Kind,
			Name:              o.Name,
			JQPathExpressions: []string{argoCDPath(o.Kind)},
		})
	}
	return out, warnings
}
