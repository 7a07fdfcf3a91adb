package policy

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The names of the ValidatingAdmissionPolicies (and bindings) the policy
// shape generates for a mapping live here, not in policy/vap, so that Load
// can refuse a configuration whose mappings would generate one name: the
// syncer would otherwise write that object for each in turn. policy/vap
// builds every name with these functions; nothing else spells them.

// PolicyNamePrefix starts every generated name.
const PolicyNamePrefix = "webhook-guard-"

// policySelectedSuffix names the second policy of a mapping with both names
// and a selector: names go in matchConditions, the selector in
// objectSelector, and two policies express "either".
const policySelectedSuffix = "-selected"

// PolicyCASuffix names the policy that checks caBundles against the owner's
// CA Secret, read as the policy's param.
const PolicyCASuffix = "-ca"

// PolicyName is the policy and binding name of a mapping.
func PolicyName(mapping string) string { return PolicyNamePrefix + mapping }

// CAPolicyName is the name of the policy that checks the caBundles of the
// policy (or binding) name against the CA Secret it reads as its param.
func CAPolicyName(name string) string { return name + PolicyCASuffix }

// PolicyNames are every policy (and binding) name a mapping may generate,
// whatever its match: the syncer looks up a mapping's live objects by them.
func PolicyNames(mapping string) []string {
	base := PolicyName(mapping)
	return []string{base, base + policySelectedSuffix, CAPolicyName(base), CAPolicyName(base + policySelectedSuffix)}
}

// PolicyTarget is one policy an owner's match generates, before any CA
// policy.
type PolicyTarget struct {
	Name string
	// BySelector says the policy matches by the owner's labelSelector, in
	// its objectSelector; otherwise by the owner's names, in
	// matchConditions.
	BySelector bool
}

// PolicyTargets are the policies an owner's match generates: one for its
// names, one for its selector.
func PolicyTargets(o *Owner) []PolicyTarget {
	base := PolicyName(o.Name)
	hasNames := len(o.Match.Validating)+len(o.Match.Mutating) > 0
	var out []PolicyTarget
	if hasNames {
		out = append(out, PolicyTarget{Name: base})
	}
	if o.Match.LabelSelector != nil {
		name := base
		if hasNames {
			name += policySelectedSuffix
		}
		out = append(out, PolicyTarget{Name: name, BySelector: true})
	}
	return out
}

// generatedNames are the names an owner may generate: each target, and its
// CA policy. Whether the CA policy exists depends on the CA source the guard
// resolves at run time (a Secret key), so the check counts it always: a
// rename is cheap, a live policy flipping between two mappings is not.
func generatedNames(o *Owner) []string {
	var out []string
	for _, t := range PolicyTargets(o) {
		out = append(out, t.Name, CAPolicyName(t.Name))
	}
	return out
}

// validateGeneratedNames reports a mapping whose generated policy name is
// not a valid object name, and two mappings that would generate one name
// (mapping "app" with names and a selector generates
// webhook-guard-app-selected, as does a mapping named "app-selected").
func validateGeneratedNames(ownersPath *field.Path, owners []Owner) field.ErrorList {
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
		for _, name := range generatedNames(o) {
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
	for _, name := range PolicyNames(mapping) {
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			return fmt.Sprintf("the policy name %q generated from it is invalid: %s", name, strings.Join(msgs, "; "))
		}
	}
	return ""
}
