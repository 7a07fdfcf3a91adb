// Package test is `webhook-guard test`: declarative suites of reviews and
// expected verdicts, for CI.
package test

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/testsuite"
)

// Options are test's flags and argument.
type Options struct {
	genericiooptions.IOStreams

	// Dir holds the suite files.
	Dir    string
	Output cmdutil.OutputFlags
}

// NewCmdTest is `webhook-guard test`.
func NewCmdTest(ctx context.Context, streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "test DIR [-o table|wide|json|yaml|name|jsonpath=...]",
		Short: "Run declarative suites of reviews and expected verdicts (for CI)",
		Long: `Run every TestSuite file (kind: TestSuite, *.yaml) under DIR: each names a
GuardConfig, optional objects, and AdmissionReviews with the outcome
(allow, deny, audit, break-glass) and optionally the rule each must get.
Reviews are decided offline by the same handler as 'serve' and 'check'.

Exit codes: 0 every case passed, 1 a case failed, 2 invalid input.`,
		Example: `  # Run the suites under a directory, one row per case
  webhook-guard test tests/

  # The results as JSON, for a CI step that reads them
  webhook-guard test tests/ -o json`,
		Args: cobra.ExactArgs(1),
		RunE: cmdutil.Runner(ctx, o),
	}
	o.Output.AddFlags(cmd)
	return cmd
}

// Complete takes DIR from the arguments.
func (o *Options) Complete(args []string) error {
	o.Dir = args[0]
	return nil
}

// Validate checks -o.
func (o *Options) Validate() error { return o.Output.Validate() }

// Run runs the suites and prints one row per case; a failed case exits 1.
func (o *Options) Run(ctx context.Context) error {
	w := o.Out
	results, err := testsuite.RunDir(ctx, o.Dir)
	if err != nil {
		return cmdutil.Invalid("%v", err)
	}
	table := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		cmdutil.Column("SUITE", false), cmdutil.Column("TEST", false), cmdutil.Column("RESULT", false),
		cmdutil.Column("WANT", false), cmdutil.Column("GOT", false), cmdutil.Column("MESSAGE", true),
	}}
	names := make([]string, 0, len(results))
	failed := 0
	for _, r := range results {
		result := "pass"
		if !r.Pass {
			result, failed = "FAIL", failed+1
		}
		table.Rows = append(table.Rows, metav1.TableRow{Cells: []any{r.Suite, r.Test, result, r.Want, r.Got, cmdutil.OrDash(r.Message)}})
		names = append(names, r.Suite+"/"+r.Test)
	}
	if err := o.Output.Print(w, map[string]any{"results": results}, table, names); err != nil {
		return err
	}
	if o.Output.IsTable() && !o.Output.NoHeaders {
		fmt.Fprintf(w, "\n%d passed, %d failed.\n", len(results)-failed, failed)
	}
	if failed > 0 {
		return cmdutil.Denied()
	}
	return nil
}
