package gitops

import (
	"regexp"
	"strconv"
	"strings"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// DefaultWebhookEntries is how many webhook entries per configuration the
// Flux rules cover unless told otherwise. Flux's paths are JSON Pointers,
// which name one list index each; a pointer to an entry the object does not
// have is ignored, so covering more entries than a configuration has costs
// nothing.
const DefaultWebhookEntries = 8

// FluxIgnoreRule is one entry of a Flux Kustomization's spec.ignore, with
// the fields of kustomize-controller's IgnoreRule.
type FluxIgnoreRule struct {
	Paths  []string     `json:"paths"`
	Target FluxSelector `json:"target"`
}

// FluxSelector is the target of a FluxIgnoreRule, with the fields of
// Flux's kustomize.Selector this generator sets. group, version, kind and
// name are anchored regular expressions, so the names are quoted.
type FluxSelector struct {
	Group         string `json:"group"`
	Version       string `json:"version"`
	Kind          string `json:"kind"`
	Name          string `json:"name,omitempty"`
	LabelSelector string `json:"labelSelector,omitempty"`
}

// Flux is the ignore rules for owned, one per configuration or selector,
// each covering the caBundle of the first entries webhook entries (a CRD
// or an APIService has one caBundle).
func Flux(owned []Owned, entries int) []FluxIgnoreRule {
	out := []FluxIgnoreRule{}
	for _, o := range owned {
		info, _ := guardapi.KindInfoOf(o.Kind) // owned names the rows' kinds
		sel := FluxSelector{
			Group:         regexp.QuoteMeta(o.Group),
			Version:       info.Version,
			Kind:          o.Kind,
			LabelSelector: o.LabelSelector,
		}
		if o.Name != "" {
			sel.Name = regexp.QuoteMeta(o.Name)
		}
		out = append(out, FluxIgnoreRule{Paths: fluxCABundlePaths(info.Entries, entries), Target: sel})
	}
	return out
}

// fluxCABundlePaths are the JSON Pointers of the caBundles of an object
// whose entries are e: of entries 0 to n-1 of a list, the one entry's of a
// CRD or an APIService.
func fluxCABundlePaths(e guardapi.Entries, n int) []string {
	bundle := strings.Join(e.CABundlePath(), "/")
	if e.One() {
		return []string{"/" + bundle}
	}
	out := make([]string, n)
	for i := range out {
		out[i] = "/" + e.List + "/" + strconv.Itoa(i) + "/" + bundle
	}
	return out
}
