package discover

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Format is how a proposal is written.
type Format string

// Proposal formats.
const (
	// FormatValues is Helm values of the chart (config.owners).
	FormatValues Format = "values"
	// FormatConfig is a GuardConfig file.
	FormatConfig Format = "config"
)

// Render prints a proposal as Helm values or a GuardConfig file,
// with its evidence as YAML comments. The document is marshalled from the
// config types (so it is what Load and the chart's schema read), then its
// node tree gets the comments.
func Render(p Proposal, format Format, caInjector string) ([]byte, error) {
	owners := make([]guardapi.Owner, 0, len(p.Mappings))
	for _, m := range p.Mappings {
		owners = append(owners, m.Owner)
	}
	// Maps, not a GuardConfig, so that unset settings are left out rather
	// than marshalled as zero values.
	cfg := map[string]any{"defaultMode": guardapi.ModeAudit, "owners": owners}
	if caInjector != guardapi.DefaultCAInjectorServiceAccount {
		cfg["certManager"] = map[string]any{"caInjectorServiceAccount": caInjector}
	}
	header := []string{
		"Owner mappings proposed by `webhook-guard discover` from the live cluster, in audit mode.",
		"Review each mapping's evidence, run the guard in audit mode, then read `webhook-guard review`",
		"before switching a mapping to enforce.",
	}
	var doc any = map[string]any{"config": cfg}
	if format == FormatConfig {
		cfg["apiVersion"], cfg["kind"] = guardapi.APIVersion, guardapi.Kind
		cfg["breakGlass"] = guardapi.Subjects{Groups: []string{"system:masters"}}
		cfg["unmanaged"] = guardapi.UnmanagedAllow
		doc = cfg
	} else {
		header = append(header, "Helm values: helm upgrade --install ... -f this-file.yaml (lists replace the chart's defaults).")
	}
	plain, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("marshal the proposal: %w", err)
	}
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(plain, &root); err != nil {
		return nil, fmt.Errorf("re-read the proposal: %w", err)
	}
	top := root.Content[0]
	top.HeadComment = comment(header)
	reorder(top, "apiVersion", "kind", "config", "defaultMode", "breakGlass", "unmanaged", "certManager", "owners")
	if format != FormatConfig {
		if _, top = mapEntry(top, "config"); top == nil {
			return nil, fmt.Errorf("the marshalled proposal has no config")
		}
	}
	ownersKey, ownersNode := mapEntry(top, "owners")
	if ownersNode == nil || len(ownersNode.Content) != len(p.Mappings) {
		return nil, fmt.Errorf("the marshalled proposal has no owners list of %d mappings", len(p.Mappings))
	}
	for i, item := range ownersNode.Content {
		annotateOwner(item, p.Mappings[i].Evidence)
	}
	if len(p.Mappings) == 0 {
		ownersKey.HeadComment = comment([]string{"No configuration could be mapped: see the undecided ones below."})
	}
	if len(p.Undecided) > 0 {
		root.Content[0].FootComment = comment(undecidedLines(p.Undecided))
	}
	var buf bytes.Buffer
	enc := yamlv3.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return nil, fmt.Errorf("encode the proposal: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// annotateOwner orders an owner mapping's keys as a person reads them and
// heads it with its evidence.
func annotateOwner(item *yamlv3.Node, evidence []string) {
	reorder(item, "name", "match", "writers", "ca")
	if _, match := mapEntry(item, "match"); match != nil {
		reorder(match, "validating", "mutating", "customResourceDefinitions", "apiServices")
	}
	if _, ca := mapEntry(item, "ca"); ca != nil && len(ca.Content) == 2 && ca.Content[1].Kind == yamlv3.MappingNode {
		reorder(ca.Content[1], "kind", "namespace", "name", "key")
	}
	item.HeadComment = comment(append([]string{"Evidence:"}, indent(evidence)...))
}

// undecidedLines list the configurations left unmapped, with why and what
// was found.
func undecidedLines(undecided []Undecided) []string {
	lines := []string{"Undecided: left unmapped (unmanaged), for you to map by hand."}
	for _, u := range undecided {
		lines = append(lines, "- "+u.Configuration+":")
		for _, r := range u.Reasons {
			lines = append(lines, "    undecided: "+r)
		}
		for _, e := range u.Evidence {
			lines = append(lines, "    found: "+e)
		}
	}
	return lines
}

func comment(lines []string) string {
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("# " + l)
	}
	return b.String()
}

func indent(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = "  " + l
	}
	return out
}

// reorder puts a mapping node's keys in the order a person reads them
// (the marshaller sorts them); keys not named keep their place after these.
func reorder(m *yamlv3.Node, keys ...string) {
	rank := func(k string) int {
		for i, want := range keys {
			if k == want {
				return i
			}
		}
		return len(keys)
	}
	type pair struct{ k, v *yamlv3.Node }
	pairs := make([]pair, 0, len(m.Content)/2)
	for i := 0; i+1 < len(m.Content); i += 2 {
		pairs = append(pairs, pair{m.Content[i], m.Content[i+1]})
	}
	slices.SortStableFunc(pairs, func(a, b pair) int { return rank(a.k.Value) - rank(b.k.Value) })
	m.Content = m.Content[:0]
	for _, p := range pairs {
		m.Content = append(m.Content, p.k, p.v)
	}
}

// mapEntry returns the key and value nodes of key in a mapping node, or nils.
func mapEntry(m *yamlv3.Node, key string) (*yamlv3.Node, *yamlv3.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}
