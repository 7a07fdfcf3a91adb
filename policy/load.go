package policy

import (
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Defaults applied by Load.
const (
	DefaultCAInjectorServiceAccount = "cert-manager/cert-manager-cainjector"
	DefaultClusterResourceNamespace = "cert-manager"
	DefaultMaxDistinctBundles       = 3
	DefaultFlappingWindow           = 10 * time.Minute
	DefaultCAKey                    = "ca.crt"
)

// Config is a loaded, validated and indexed GuardConfig. It is immutable and
// safe for concurrent use; a reload builds a new one.
type Config struct {
	// Spec is the configuration as written, with defaults applied.
	Spec GuardConfig

	owners     []compiledOwner
	byName     map[ConfigKind]map[string]int
	selectors  []int
	breakGlass subjectSet
}

type compiledOwner struct {
	spec     *Owner
	mode     Mode
	writers  subjectSet
	selector labels.Selector
	inlineCA *CASet
}

// Load decodes, defaults and validates a GuardConfig document (YAML or
// JSON). Decoding is strict: an unknown or misspelled field is an error
// naming its path, and a field given twice is an error naming its key and
// line. Every validation problem is reported at once, each with its field path.
func Load(data []byte) (*Config, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, errors.New("the configuration is empty")
	}
	// Strict: the lenient conversion keeps the last of two equal keys, so a
	// second "writers:" would silently replace the first.
	jsonData, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	var spec GuardConfig
	strictErrs, err := sigsjson.UnmarshalStrict(jsonData, &spec, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("cannot decode GuardConfig: %w", err)
	}
	if len(strictErrs) > 0 {
		msgs := make([]string, 0, len(strictErrs))
		for _, e := range strictErrs {
			msgs = append(msgs, e.Error())
		}
		return nil, fmt.Errorf("cannot decode GuardConfig: %s", strings.Join(msgs, "; "))
	}
	applyDefaults(&spec)
	if errs := validate(&spec); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return compile(spec), nil
}

func applyDefaults(spec *GuardConfig) {
	if spec.DefaultMode == "" {
		spec.DefaultMode = ModeAudit
	}
	if spec.Unmanaged == "" {
		spec.Unmanaged = UnmanagedAllow
	}
	if spec.CertManager.CAInjectorServiceAccount == "" {
		spec.CertManager.CAInjectorServiceAccount = DefaultCAInjectorServiceAccount
	}
	if spec.CertManager.ClusterResourceNamespace == "" {
		spec.CertManager.ClusterResourceNamespace = DefaultClusterResourceNamespace
	}
	if spec.Flapping.MaxDistinctBundles == 0 {
		spec.Flapping.MaxDistinctBundles = DefaultMaxDistinctBundles
	}
	if spec.Flapping.Window.Duration == 0 {
		spec.Flapping.Window = metav1.Duration{Duration: DefaultFlappingWindow}
	}
	for i := range spec.Owners {
		for _, k := range spec.Owners[i].CA.setKinds() {
			k.setDefaults()
		}
	}
}

// compile builds the indexes. It runs only on a validated spec.
func compile(spec GuardConfig) *Config {
	c := &Config{
		Spec:       spec,
		byName:     map[ConfigKind]map[string]int{KindValidating: {}, KindMutating: {}},
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
			set, _ := NewCASet("inline pem of owners["+o.Name+"]", []byte(o.CA.PEM)) // validated
			co.inlineCA = &set
		}
		for _, n := range o.Match.Validating {
			c.byName[KindValidating][n] = i
		}
		for _, n := range o.Match.Mutating {
			c.byName[KindMutating][n] = i
		}
		c.owners[i] = co
	}
	return c
}
