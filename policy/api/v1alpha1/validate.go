package v1alpha1

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks a defaulted spec (SetDefaults) and returns every problem
// with its path.
func Validate(spec *GuardConfig) field.ErrorList {
	var errs field.ErrorList
	if spec.APIVersion != APIVersion {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), spec.APIVersion, "must be "+APIVersion))
	}
	if spec.Kind != Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), spec.Kind, "must be "+Kind))
	}
	errs = append(errs, validateMode(field.NewPath("defaultMode"), spec.DefaultMode)...)
	if spec.Unmanaged != UnmanagedAllow && spec.Unmanaged != UnmanagedAudit {
		errs = append(errs, field.NotSupported(field.NewPath("unmanaged"), spec.Unmanaged, []UnmanagedAction{UnmanagedAllow, UnmanagedAudit}))
	}
	errs = append(errs, validateSubjects(field.NewPath("breakGlass"), spec.BreakGlass)...)
	errs = append(errs, validateServiceAccount(field.NewPath("certManager", "caInjectorServiceAccount"), spec.CertManager.CAInjectorServiceAccount)...)
	for _, msg := range validation.IsDNS1123Label(spec.CertManager.ClusterResourceNamespace) {
		errs = append(errs, field.Invalid(field.NewPath("certManager", "clusterResourceNamespace"), spec.CertManager.ClusterResourceNamespace, msg))
	}
	if spec.Flapping.MaxDistinctBundles < 2 {
		errs = append(errs, field.Invalid(field.NewPath("flapping", "maxDistinctBundles"), spec.Flapping.MaxDistinctBundles, "must be >= 2: a CA rotation legitimately writes old+new, then new"))
	}
	if spec.Flapping.Window.Duration <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("flapping", "window"), spec.Flapping.Window.Duration.String(), "must be a positive duration such as 10m"))
	}

	ownersPath := field.NewPath("owners")
	names := map[string]int{}
	claimed := map[string]map[string]int{}
	for i := range spec.Owners {
		o := &spec.Owners[i]
		p := ownersPath.Index(i)
		errs = append(errs, validateOwner(p, o)...)
		if first, dup := names[o.Name]; dup && o.Name != "" {
			errs = append(errs, field.Duplicate(p.Child("name"), fmt.Sprintf("%s (also owners[%d].name)", o.Name, first)))
		} else {
			names[o.Name] = i
		}
		for _, named := range o.Match.Named() {
			errs = append(errs, claimNames(p.Child("match", named.Field), spec, i, named.Kind, named.Names, claimed)...)
		}
	}
	return errs
}

// claimNames reports a configuration name claimed by two mappings: single
// ownership is the point of the product, so it is a load-time error.
func claimNames(p *field.Path, spec *GuardConfig, owner int, kind string, names []string, claimed map[string]map[string]int) field.ErrorList {
	var errs field.ErrorList
	if claimed[kind] == nil {
		claimed[kind] = map[string]int{}
	}
	for j, n := range names {
		if n == "" {
			errs = append(errs, field.Required(p.Index(j), "a configuration name"))
			continue
		}
		for _, msg := range validation.IsDNS1123Subdomain(n) {
			errs = append(errs, field.Invalid(p.Index(j), n, msg))
		}
		if first, dup := claimed[kind][n]; dup {
			if first == owner {
				errs = append(errs, field.Duplicate(p.Index(j), n))
				continue
			}
			errs = append(errs, field.Duplicate(p.Index(j), fmt.Sprintf("%s %q is already owned by owners[%d] (%s); a configuration must have a single owner: remove it from one of %q and %q",
				kind, n, first, spec.Owners[first].Name, spec.Owners[first].Name, spec.Owners[owner].Name)))
			continue
		}
		claimed[kind][n] = owner
	}
	return errs
}

func validateOwner(p *field.Path, o *Owner) field.ErrorList {
	var errs field.ErrorList
	if o.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "used in messages, metrics and reports"))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(o.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), o.Name, msg))
		}
	}
	if o.Mode != "" {
		errs = append(errs, validateMode(p.Child("mode"), o.Mode)...)
	}
	m := o.Match
	if !m.HasNames() && m.LabelSelector == nil {
		errs = append(errs, field.Required(p.Child("match"), "at least one of "+matchFields()))
	}
	errs = append(errs, validateTrustObjectNames(p.Child("match"), &m)...)
	if m.LabelSelector != nil {
		sp := p.Child("match", "labelSelector")
		if len(m.LabelSelector.MatchLabels) == 0 && len(m.LabelSelector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(sp, "{}", "an empty selector would match every webhook configuration; name the labels to match"))
		} else if _, err := metav1.LabelSelectorAsSelector(m.LabelSelector); err != nil {
			errs = append(errs, field.Invalid(sp, m.LabelSelector.String(), err.Error()))
		}
	}
	errs = append(errs, validateSubjects(p.Child("writers"), o.Writers)...)
	if o.CA.InjectedByCertManager == nil && len(o.Writers.ServiceAccounts)+len(o.Writers.Users)+len(o.Writers.Groups) == 0 {
		errs = append(errs, field.Required(p.Child("writers"), "at least one service account, user or group; hint: the owner's controller usually runs as a service account \"namespace/name\""))
	}
	errs = append(errs, validateCASource(p.Child("ca"), &o.CA)...)
	errs = append(errs, validateWriteBudget(p.Child("writeBudget"), o.WriteBudget)...)
	errs = append(errs, validateVerifyServing(p.Child("verifyServing"), o.VerifyServing)...)
	return errs
}

func validateMode(p *field.Path, m Mode) field.ErrorList {
	if m != ModeAudit && m != ModeEnforce {
		return field.ErrorList{field.NotSupported(p, m, []Mode{ModeAudit, ModeEnforce})}
	}
	return nil
}

func validateSubjects(p *field.Path, s Subjects) field.ErrorList {
	var errs field.ErrorList
	for i, sa := range s.ServiceAccounts {
		errs = append(errs, validateServiceAccount(p.Child("serviceAccounts").Index(i), sa)...)
	}
	for i, u := range s.Users {
		if strings.TrimSpace(u) == "" {
			errs = append(errs, field.Required(p.Child("users").Index(i), "a username"))
		}
	}
	for i, g := range s.Groups {
		if strings.TrimSpace(g) == "" {
			errs = append(errs, field.Required(p.Child("groups").Index(i), "a group name"))
		}
	}
	return errs
}

// validateServiceAccount accepts exactly "namespace/name".
func validateServiceAccount(p *field.Path, sa string) field.ErrorList {
	ns, name, ok := SplitServiceAccount(sa)
	if !ok {
		hint := ""
		if strings.HasPrefix(sa, "system:serviceaccount:") {
			hint = "; hint: write it as \"namespace/name\", not as a username"
		}
		return field.ErrorList{field.Invalid(p, sa, "must be \"namespace/name\""+hint)}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(ns) {
		errs = append(errs, field.Invalid(p, sa, "namespace: "+msg))
	}
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(p, sa, "name: "+msg))
	}
	return errs
}

// validateCASource checks that exactly one kind is set, then that kind's
// own fields. The kinds (casource_kinds.go) word both messages, so a new
// kind is named in them without touching this function.
func validateCASource(p *field.Path, ca *CASource) field.ErrorList {
	set := ca.setKinds()
	switch len(set) {
	case 0:
		fields := make([]string, len(caSourceKinds))
		for i, k := range caSourceKinds {
			fields[i] = string(k.kind)
		}
		return field.ErrorList{field.Required(p, "exactly one CA source: one of "+strings.Join(fields, ", "))}
	case 1:
	default:
		names := sets.New[string]()
		for _, k := range set {
			names.Insert(string(k.kind))
		}
		return field.ErrorList{field.Invalid(p, strings.Join(sets.List(names), ", "), "exactly one CA source may be set; the owner's CA must come from a single place")}
	}
	if set[0].validate == nil {
		return nil
	}
	return set[0].validate(ca, p.Child(string(set[0].kind)))
}

func validateKeyRef(p *field.Path, r *KeyRef) field.ErrorList {
	errs := validateObjectRef(p, r.Namespace, r.Name)
	for _, msg := range validation.IsConfigMapKey(r.Key) {
		errs = append(errs, field.Invalid(p.Child("key"), r.Key, msg))
	}
	return errs
}

func validateObjectRef(p *field.Path, namespace, name string) field.ErrorList {
	var errs field.ErrorList
	if namespace == "" {
		errs = append(errs, field.Required(p.Child("namespace"), ""))
	} else if namespace != "-" {
		for _, msg := range validation.IsDNS1123Label(namespace) {
			errs = append(errs, field.Invalid(p.Child("namespace"), namespace, msg))
		}
	}
	if name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(p.Child("name"), name, msg))
		}
	}
	return errs
}
