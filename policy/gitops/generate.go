package gitops

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Tool is the GitOps tool the rules are for.
type Tool string

// The tools.
const (
	ToolArgoCD Tool = "argocd"
	ToolFlux   Tool = "flux"
)

// Tools lists the tools, in the order messages name them.
func Tools() []Tool { return []Tool{ToolArgoCD, ToolFlux} }

// The objects a patch is written for.
const (
	argoCDAPIVersion = "argoproj.io/v1alpha1"
	argoCDKind       = "Application"
	fluxAPIVersion   = "kustomize.toolkit.fluxcd.io/v1"
	fluxKind         = "Kustomization"
)

// Input is what Generate needs.
type Input struct {
	// Config is the GuardConfig, defaults applied.
	Config *guardapi.GuardConfig
	Tool   Tool
	// WebhookEntries is how many entries per configuration the Flux rules
	// cover (0: DefaultWebhookEntries).
	WebhookEntries int
	// Patch names the Application or Kustomization ("namespace/name") to
	// write a whole object for; empty: only the fields to paste under its
	// spec.
	Patch string
}

// Output is the generated YAML and the warnings about what it cannot
// cover.
type Output struct {
	YAML     []byte
	Warnings []string
}

// Generate writes the ignore rules of in.Tool for what in.Config gives to
// another writer, with a comment saying where they go and, per
// configuration, who writes its caBundle.
func Generate(in Input) (Output, error) {
	if err := in.validate().ToAggregate(); err != nil {
		return Output{}, err
	}
	owned, kept, err := OwnedFields(in.Config)
	if err != nil {
		return Output{}, err
	}
	var doc any
	var header string
	var warnings []string
	switch in.Tool {
	case ToolArgoCD:
		var rules []ArgoCDIgnoreDifference
		rules, warnings = ArgoCD(owned)
		doc, header = argoCDDocument(rules, in.Patch)
	case ToolFlux:
		entries := in.WebhookEntries
		if entries == 0 {
			entries = DefaultWebhookEntries
		}
		doc, header = fluxDocument(Flux(owned, entries), in.Patch)
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		return Output{}, err
	}
	var out strings.Builder
	out.WriteString(header)
	for _, o := range owned {
		if o.Name != "" {
			fmt.Fprintf(&out, "# %s %s: caBundle written by %s\n", o.Kind, o.Name, o.Writer)
		} else {
			fmt.Fprintf(&out, "# %s selected by %q: caBundle written by %s\n", o.Kind, o.LabelSelector, o.Writer)
		}
	}
	for _, k := range kept {
		fmt.Fprintf(&out, "# mapping %s: no rule, %s\n", k.Mapping, k.Reason)
	}
	out.Write(b)
	return Output{YAML: []byte(out.String()), Warnings: warnings}, nil
}

func (in Input) validate() field.ErrorList {
	var errs field.ErrorList
	if in.Config == nil {
		errs = append(errs, field.Required(field.NewPath("config"), "the GuardConfig"))
	}
	switch in.Tool {
	case ToolArgoCD, ToolFlux:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("tool"), in.Tool, Tools()))
	}
	if in.WebhookEntries < 0 {
		errs = append(errs, field.Invalid(field.NewPath("webhookEntries"), in.WebhookEntries, "must be at least 1 (0: the default)"))
	}
	if in.Patch != "" {
		if _, _, ok := splitPatch(in.Patch); !ok {
			errs = append(errs, field.Invalid(field.NewPath("patch"), in.Patch, `must be "namespace/name"`))
		}
	}
	return errs
}

// splitPatch splits "namespace/name".
func splitPatch(s string) (namespace, name string, ok bool) {
	namespace, name, ok = strings.Cut(s, "/")
	return namespace, name, ok && namespace != "" && name != "" && !strings.Contains(name, "/")
}

// patchObject is a whole Application or Kustomization holding spec, as a
// merge patch.
type patchObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec any `json:"spec"`
}

// patchDocument is the patch of the object patch names ("namespace/name")
// and its header: the kubectl command that applies it.
func patchDocument(tool, apiVersion, kind, patch string, spec any) (any, string) {
	ns, name, _ := splitPatch(patch)
	obj := patchObject{APIVersion: apiVersion, Kind: kind, Spec: spec}
	obj.Metadata.Name, obj.Metadata.Namespace = name, ns
	resource := strings.ToLower(kind)
	return obj, fmt.Sprintf("# %s: a merge patch of %s %s/%s:\n"+
		"#   kubectl patch %s %s -n %s --type merge --patch-file FILE\n"+
		"# A merge patch replaces the lists it sets: merge them with the %s's own first.\n", tool, kind, ns, name, resource, name, ns, kind)
}

func argoCDDocument(rules []ArgoCDIgnoreDifference, patch string) (any, string) {
	type syncPolicy struct {
		SyncOptions []string `json:"syncOptions"`
	}
	type spec struct {
		IgnoreDifferences []ArgoCDIgnoreDifference `json:"ignoreDifferences"`
		SyncPolicy        *syncPolicy              `json:"syncPolicy,omitempty"`
	}
	if patch == "" {
		return spec{IgnoreDifferences: rules}, "# Argo CD: paste under the Application's spec, and add " + ArgoCDSyncOption + "\n" +
			"# to its spec.syncPolicy.syncOptions: without it a sync still writes Git's value.\n"
	}
	return patchDocument("Argo CD", argoCDAPIVersion, argoCDKind, patch, spec{rules, &syncPolicy{[]string{ArgoCDSyncOption}}})
}

func fluxDocument(rules []FluxIgnoreRule, patch string) (any, string) {
	type spec struct {
		Ignore []FluxIgnoreRule `json:"ignore"`
	}
	if patch == "" {
		return spec{Ignore: rules}, "# Flux: paste under the Kustomization's spec (kustomize-controller's ignore rules).\n"
	}
	return patchDocument("Flux", fluxAPIVersion, fluxKind, patch, spec{rules})
}
