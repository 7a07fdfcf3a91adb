package scan

import (
	"fmt"
	"io"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/scan"
	"github.com/webhook-guard/webhook-guard/policy"
)

// printScan prints the findings in the output vocabulary of review: a
// table (wide adds the webhook entry and each finding's fix) followed by
// the suggestions and the problem count, or json, yaml, jsonpath, or the
// configurations with findings as kubectl -o name spells them.
func printScan(out io.Writer, o *cmdutil.OutputFlags, res scan.Result) error {
	if !o.IsTable() {
		names := make([]string, 0, len(res.Findings))
		for _, f := range res.Findings {
			names = append(names, configurationName(f.Configuration))
		}
		return o.Print(out, res, nil, names)
	}
	if len(res.Findings) == 0 {
		if o.NoHeaders {
			return nil
		}
		_, err := fmt.Fprintln(out, "No findings.")
		return err
	}
	if err := o.Print(out, res, scanTable(res), nil); err != nil {
		return err
	}
	if o.NoHeaders {
		return nil
	}
	var sugg []string
	for _, f := range res.Findings {
		if f.Suggestion != "" && f.Level != scan.LevelInfo && !slices.Contains(sugg, f.Suggestion) {
			sugg = append(sugg, f.Suggestion)
		}
	}
	if len(sugg) > 0 {
		fmt.Fprintln(out, "\nSuggestions:")
		for _, s := range sugg {
			fmt.Fprintf(out, "  - %s\n", s)
		}
	}
	_, err := fmt.Fprintf(out, "\n%d problem(s) (warn or fail).\n", res.Problems)
	return err
}

// scanTable is the findings table; -o wide adds the webhook entry and the
// fix of each finding.
func scanTable(res scan.Result) *metav1.Table {
	col, dash := cmdutil.Column, cmdutil.OrDash
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		col("LEVEL", false), col("CHECK", false), col("MAPPING", false), col("CONFIGURATION", false),
		col("FIELD", false), col("DETAIL", false), col("WEBHOOK", true), col("FIX", true),
	}}
	for _, f := range res.Findings {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			string(f.Level), f.Check, dash(f.Mapping), f.Configuration, dash(f.Field), f.Detail, dash(f.Webhook), dash(f.Suggestion),
		}})
	}
	return t
}

// configurationName is "Kind/name" as kubectl -o name prints it
// (validatingwebhookconfiguration.admissionregistration.k8s.io/name,
// customresourcedefinition.apiextensions.k8s.io/name).
func configurationName(c string) string {
	kind, name, ok := strings.Cut(c, "/")
	if !ok {
		return c
	}
	group, _, _ := strings.Cut(policy.GuardedKind(kind).APIVersion(), "/")
	return strings.ToLower(kind) + "." + group + "/" + name
}
