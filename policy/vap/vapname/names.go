package vapname

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Prefix starts every generated name.
const Prefix = "webhook-guard-"

// selectedSuffix names the second policy of a mapping with both names
// and a selector: names go in matchConditions, the selector in
// objectSelector, and two policies express "either".
const selectedSuffix = "-selected"

// CASuffix names the policy that checks caBundles against the owner's
// CA Secret, read as the policy's param.
const CASuffix = "-ca"

// ForMapping is the policy and binding name of a mapping.
func ForMapping(mapping string) string { return Prefix + mapping }

// CAPolicy is the name of the policy that checks the caBundles of the
// policy (or binding) name against the CA Secret it reads as its param.
func CAPolicy(name string) string { return name + CASuffix }

// The suffixes of the policies of a mapping's CRDs and APIServices: one
// policy per kind, so that each expression is typed against one schema.
const (
	CRDSuffix        = "-crds"
	APIServiceSuffix = "-apiservices"
)

// AllForMapping are every policy (and binding) name a mapping may generate,
// whatever its match. Another mapping may generate some of them (mapping
// "app" may generate webhook-guard-app-crds, which mapping "app-crds"
// generates): to name the mapping of an object, use Generated.
func AllForMapping(mapping string) []string {
	base := ForMapping(mapping)
	return []string{base, base + selectedSuffix, CAPolicy(base), CAPolicy(base + selectedSuffix),
		base + CRDSuffix, CAPolicy(base + CRDSuffix), base + APIServiceSuffix, CAPolicy(base + APIServiceSuffix)}
}

// Target is one policy an owner's match generates, before any CA
// policy.
type Target struct {
	Name string
	// BySelector says the policy matches by the owner's labelSelector, in
	// its objectSelector; otherwise by the owner's names, in
	// matchConditions.
	BySelector bool
}

// Targets are the policies an owner's match generates: one for its
// names, one for its selector.
func Targets(o *guardapi.Owner) []Target {
	base := ForMapping(o.Name)
	// CRDs and APIServices have policies of their own (TrustPolicies).
	hasNames := len(o.Match.Validating)+len(o.Match.Mutating) > 0
	var out []Target
	if hasNames {
		out = append(out, Target{Name: base})
	}
	if o.Match.LabelSelector != nil {
		name := base
		if hasNames {
			name += selectedSuffix
		}
		out = append(out, Target{Name: name, BySelector: true})
	}
	return out
}

// Generated are the names an owner generates with its match: each target,
// and its CA policy. Whether the CA policy exists depends on the CA source
// the guard resolves at run time (a Secret key), so it is counted always: a
// rename is cheap, a live policy flipping between two mappings is not.
// ValidateOwners refuses two mappings that share one, so within a loaded
// configuration each name belongs to one mapping.
func Generated(o *guardapi.Owner) []string {
	var out []string
	for _, t := range Targets(o) {
		out = append(out, t.Name, CAPolicy(t.Name))
	}
	if len(o.Match.CustomResourceDefinitions) > 0 {
		out = append(out, ForMapping(o.Name)+CRDSuffix, CAPolicy(ForMapping(o.Name)+CRDSuffix))
	}
	if len(o.Match.APIServices) > 0 {
		out = append(out, ForMapping(o.Name)+APIServiceSuffix, CAPolicy(ForMapping(o.Name)+APIServiceSuffix))
	}
	return out
}

// ValidateOwners reports a mapping whose generated policy name is
// not a valid object name, and two mappings that would generate one name
// (mapping "app" with names and a selector generates
// webhook-guard-app-selected, as does a mapping named "app-selected").
func ValidateOwners(ownersPath *field.Path, owners []guardapi.Owner) field.ErrorList {
	var errs field.ErrorList
	generatedBy := map[string]int{}
	seen := map[string]bool{}
	for i := range owners {
		o := &owners[i]
		// An empty, invalid or repeated mapping name is reported by
		// validateOwner and validate already.
		if o.Name == "" || len(validation.IsDNS1123Subdomain(o.Name)) > 0 || seen[o.Name] {
			continue
		}
		seen[o.Name] = true
		p := ownersPath.Index(i).Child("name")
		// Every name the mapping may generate, so that a config Load
		// accepts is one the generator accepts.
		if invalid := invalidPolicyName(o.Name); invalid != "" {
			errs = append(errs, field.Invalid(p, o.Name, invalid))
			continue
		}
		for _, name := range Generated(o) {
			first, dup := generatedBy[name]
			if !dup {
				generatedBy[name] = i
				continue
			}
			if first == i {
				continue
			}
			errs = append(errs, field.Invalid(p, o.Name, fmt.Sprintf("generates the policy %q, as does owners[%d] (%s); the guard would write it for each in turn: rename %q or %q",
				name, first, owners[first].Name, owners[first].Name, o.Name)))
			break
		}
	}
	return errs
}

// invalidPolicyName says why a mapping's longest generated name is not a
// valid object name, or "".
func invalidPolicyName(mapping string) string {
	for _, name := range AllForMapping(mapping) {
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			return fmt.Sprintf("the policy name %q generated from it is invalid: %s", name, strings.Join(msgs, "; "))
		}
	}
	return ""
}
