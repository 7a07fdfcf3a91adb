package policy

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	cabundle "github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/policy/vap/vapname"
)

// Mappings is a loaded, validated and indexed GuardConfig: the owner
// mappings, break-glass subjects and unmanaged action the decision applies. It is immutable and
// safe for concurrent use; a reload builds a new one.
type Mappings struct {
	// Spec is the configuration as written, with defaults applied.
	Spec guardapi.GuardConfig

	owners     []compiledOwner
	byName     map[GuardedKind]map[string]int
	selectors  []int
	breakGlass subjectSet
}

type compiledOwner struct {
	spec     *guardapi.Owner
	mode     guardapi.Mode
	writers  subjectSet
	selector labels.Selector
	inlineCA *cabundle.CASet
}

// Load decodes, defaults and validates a GuardConfig document (YAML or
// JSON) as the API package does (guardapi.Decode, SetDefaults, Validate),
// refuses a configuration whose mappings would generate one policy name,
// and indexes it. Every validation problem is reported at once, each with
// its field path.
func Load(data []byte) (*Mappings, error) {
	spec, err := guardapi.Decode(data)
	if err != nil {
		return nil, err
	}
	guardapi.SetDefaults(spec)
	errs := guardapi.Validate(spec)
	errs = append(errs, vapname.ValidateOwners(field.NewPath("owners"), spec.Owners)...)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return compile(*spec), nil
}

// compile builds the indexes. It runs only on a validated spec.
func compile(spec guardapi.GuardConfig) *Mappings {
	c := &Mappings{
		Spec:       spec,
		byName:     make(map[GuardedKind]map[string]int, len(guardapi.Kinds)),
		breakGlass: compileSubjects(spec.BreakGlass),
	}
	c.owners = make([]compiledOwner, len(spec.Owners))
	for i := range c.Spec.Owners {
		o := &c.Spec.Owners[i]
		co := compiledOwner{spec: o, mode: spec.OwnerMode(o), writers: compileSubjects(spec.OwnerWriters(o))}
		if o.Match.LabelSelector != nil {
			co.selector, _ = metav1.LabelSelectorAsSelector(o.Match.LabelSelector) // validated
			c.selectors = append(c.selectors, i)
		}
		if o.CA.PEM != "" {
			set, _ := cabundle.NewCASet("inline pem of owners["+o.Name+"]", []byte(o.CA.PEM)) // validated
			co.inlineCA = &set
		}
		for _, named := range o.Match.Named() {
			kind := GuardedKind(named.Kind)
			if c.byName[kind] == nil {
				c.byName[kind] = map[string]int{}
			}
			for _, n := range named.Names {
				c.byName[kind][n] = i
			}
		}
		c.owners[i] = co
	}
	return c
}
