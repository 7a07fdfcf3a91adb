package app

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"
)

// outputFlags are the one output vocabulary of the commands that print
// findings, as kubectl spells it: -o table (default), wide, json, yaml,
// name, jsonpath=TEMPLATE, and --no-headers. Tables, jsonpath and name are
// cli-runtime's printers.
type outputFlags struct {
	format    string
	noHeaders bool
}

func (o *outputFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.format, "output", "o", "table", "Output: table, wide, json, yaml, name or jsonpath=TEMPLATE.")
	cmd.Flags().BoolVar(&o.noHeaders, "no-headers", false, "Table output: print the rows only (no header, no summary lines).")
}

func (o *outputFlags) validate() error {
	switch o.format {
	case "table", "wide", "json", "yaml", "name":
		return nil
	}
	if tmpl, ok := strings.CutPrefix(o.format, "jsonpath="); ok {
		if _, err := printers.NewJSONPathPrinter(tmpl); err != nil {
			return invalid("--output jsonpath: %v", err)
		}
		return nil
	}
	return invalid("--output must be table, wide, json, yaml, name or jsonpath=TEMPLATE, got %q", o.format)
}

// isTable is true for table and wide, the outputs with summary lines.
func (o *outputFlags) isTable() bool { return o.format == "table" || o.format == "wide" }

// print prints v (json, yaml, jsonpath), table (table, wide: columns of
// priority 1 only in wide) or names (name, one per line, each once).
func (o *outputFlags) print(out io.Writer, v any, table *metav1.Table, names []string) error {
	switch o.format {
	case "json", "yaml":
		return printStructured(out, o.format, v)
	case "name":
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
	case "table", "wide":
		return printers.NewTablePrinter(printers.PrintOptions{NoHeaders: o.noHeaders, Wide: o.format == "wide"}).PrintObj(table, out)
	}
	p, err := printers.NewJSONPathPrinter(strings.TrimPrefix(o.format, "jsonpath="))
	if err != nil {
		return invalid("--output jsonpath: %v", err)
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

// column is a table column; wide ones show with -o wide only.
func column(name string, wide bool) metav1.TableColumnDefinition {
	c := metav1.TableColumnDefinition{Name: name, Type: "string"}
	if wide {
		c.Priority = 1
	}
	return c
}
