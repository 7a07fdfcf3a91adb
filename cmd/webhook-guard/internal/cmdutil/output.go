package cmdutil

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"
)

// The -o words every command takes, as kubectl spells them. A command
// takes all of them (review, scan, test) or, when one result has no rows
// to widen, name or select (check), the first three.
const (
	OutputTable = "table"
	OutputWide  = "wide"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
	OutputName  = "name"
	// OutputJSONPath is the prefix of jsonpath=TEMPLATE.
	OutputJSONPath = "jsonpath="
)

// OutputFlags are the one output vocabulary of the commands that print
// findings, as kubectl spells it: -o table (default), wide, json, yaml,
// name, jsonpath=TEMPLATE, and --no-headers. Tables, jsonpath and name are
// cli-runtime's printers.
type OutputFlags struct {
	Format    string
	NoHeaders bool
}

// AddFlags adds -o and --no-headers.
func (o *OutputFlags) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.Format, "output", "o", OutputTable, "Output: table, wide, json, yaml, name or jsonpath=TEMPLATE.")
	cmd.Flags().BoolVar(&o.NoHeaders, "no-headers", false, "Table output: print the rows only (no header, no summary lines).")
}

// Validate checks -o.
func (o *OutputFlags) Validate() error {
	switch o.Format {
	case OutputTable, OutputWide, OutputJSON, OutputYAML, OutputName:
		return nil
	}
	if tmpl, ok := strings.CutPrefix(o.Format, OutputJSONPath); ok {
		if _, err := printers.NewJSONPathPrinter(tmpl); err != nil {
			return Invalid("--output jsonpath: %v", err)
		}
		return nil
	}
	return Invalid("--output must be table, wide, json, yaml, name or jsonpath=TEMPLATE, got %q", o.Format)
}

// IsTable is true for table and wide, the outputs with summary lines.
func (o *OutputFlags) IsTable() bool { return o.Format == OutputTable || o.Format == OutputWide }

// Print prints v (json, yaml, jsonpath), table (table, wide: columns of
// priority 1 only in wide) or names (name, one per line, each once).
func (o *OutputFlags) Print(out io.Writer, v any, table *metav1.Table, names []string) error {
	switch o.Format {
	case OutputJSON, OutputYAML:
		return PrintStructured(out, o.Format, v)
	case OutputName:
		// Each object once, as kubectl -o name prints it, however many
		// findings it holds.
		seen := make(map[string]bool, len(names))
		for _, n := range names {
			if seen[n] {
				continue
			}
			seen[n] = true
			if _, err := fmt.Fprintln(out, n); err != nil {
				return err
			}
		}
		return nil
	case OutputTable, OutputWide:
		return printers.NewTablePrinter(printers.PrintOptions{NoHeaders: o.NoHeaders, Wide: o.Format == OutputWide}).PrintObj(table, out)
	}
	p, err := printers.NewJSONPathPrinter(strings.TrimPrefix(o.Format, OutputJSONPath))
	if err != nil {
		return Invalid("--output jsonpath: %v", err)
	}
	// The JSONPath printer reads maps; v is a plain struct.
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	return p.PrintObj(&unstructured.Unstructured{Object: m}, out)
}

// ValidateStructured checks -o for a command printing one result: table,
// json or yaml.
func ValidateStructured(format string) error {
	switch format {
	case OutputTable, OutputJSON, OutputYAML:
		return nil
	}
	return Invalid("--output must be table, json or yaml, got %q", format)
}

// PrintStructured prints v as JSON or YAML.
func PrintStructured(out io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == OutputYAML {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
	} else {
		b = append(b, '\n')
	}
	_, err = out.Write(b)
	return err
}

// Column is a table column; wide ones show with -o wide only.
func Column(name string, wide bool) metav1.TableColumnDefinition {
	c := metav1.TableColumnDefinition{Name: name, Type: "string"}
	if wide {
		c.Priority = 1
	}
	return c
}

// OrDash is s, or "-" for an empty table cell.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
