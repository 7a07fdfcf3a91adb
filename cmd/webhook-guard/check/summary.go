package check

import (
	"fmt"
	"io"
	"strings"

	"github.com/webhook-guard/webhook-guard/policy"
)

// printSummary is -o table: the decision in a few labelled lines.
func printSummary(out io.Writer, d *policy.Decision) {
	mode := ""
	if d.Mode != "" {
		mode = " (" + string(d.Mode) + ")"
	}
	fmt.Fprintf(out, "decision: %s%s\n", d.Outcome, mode)
	fmt.Fprintf(out, "request:  %s %s %q by %q", d.Operation, d.Kind, d.Name, d.Subject)
	if d.DryRun {
		fmt.Fprint(out, " (dry run)")
	}
	fmt.Fprintln(out)
	mapping := d.Mapping
	switch {
	case mapping != "":
	case d.Kind == policy.KindAdmissionPolicy || d.Kind == policy.KindAdmissionPolicyBinding:
		mapping = "(none: an object the policy shape generates)"
	default:
		mapping = "(none: unmanaged)"
	}
	fmt.Fprintf(out, "mapping:  %s\n", mapping)
	fmt.Fprintf(out, "rule:     %s (%s)\n", d.Rule, d.Rule.Info().Summary)
	if len(d.Violations) > 0 {
		fmt.Fprintln(out, "violations:")
		for _, v := range d.Violations {
			fmt.Fprintf(out, "  - %s\n", v.String())
		}
	}
	if w := d.Warnings(); len(w) > 0 {
		fmt.Fprintf(out, "warnings:\n  - %s\n", strings.Join(w, "\n  - "))
	}
	fmt.Fprintf(out, "recorded: %t\n", d.Record)
}
