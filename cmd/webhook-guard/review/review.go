// Package review is `webhook-guard review`: what the guard denied or would
// deny, from its ClusterReports (and kube-apiserver's audit log), with the
// config change that fixes it.
package review

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/auditlog"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/review"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// Options are review's flags.
type Options struct {
	// In is read for --audit-log -.
	genericiooptions.IOStreams

	Kube     *cmdutil.KubeFlags
	Mapping  string
	Since    string
	Decision string
	Output   cmdutil.OutputFlags
	// AuditLog is a kube-apiserver audit log (JSON lines), "-" for stdin.
	AuditLog string

	// Client reads the reports; Run builds it from Kube unless a test
	// gave one.
	Client client.Client
	// Now is the time --since durations and ages count from; Complete
	// sets it unless a test did.
	Now time.Time

	filter review.Filter
}

// NewCmdReview is `webhook-guard review`.
func NewCmdReview(ctx context.Context, streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{IOStreams: streams, Kube: cmdutil.NewKubeFlags()}
	cmd := &cobra.Command{
		Use:   "review [--mapping NAME] [--since TIME|DURATION] [--decision DECISION] [-o table|wide|json|yaml|name|jsonpath=...]",
		Short: "Show what the guard denied or would deny, with the config change that fixes it",
		Long: `Read the OpenReports ClusterReports the guard keeps (source webhook-guard, one
per guarded configuration) and show, per mapping and subject, the rule, the
count, first and last seen, and a concrete suggestion: the writer to add to
the mapping, or the second CA writer to stop.

--since keeps findings last seen at or after a time (RFC 3339) or within a
duration (1h, 30m): run it with the moment you switched to enforce.

--audit-log FILE|- also reads kube-apiserver audit events (audit.k8s.io/v1,
JSON lines, as managed clusters export them) and folds in the decisions
about webhook configurations with the real user names: the static webhook's
audit annotations and the policy shape's validation_failure annotations (and
denials) of webhook-guard's policies. Malformed lines are counted and listed
by line number, never fatal. Findings the guard's observer recorded (marked
observed) name field managers; the audit log names users.

It also prints the guard's last trust-path probe round (the ClusterReport
webhook-guard.trust-paths the leader keeps): how many guarded entries'
caBundles verify what their endpoints serve, and each that does not, with
the reason and the fix. That is state, not a denial: it never changes the
exit code, and --decision leaves it out.

Exit codes: 0 nothing was or would be denied, 1 something was or would be
denied (a pipeline can gate the switch to enforce on it), 2 invalid input or
the reports could not be read.`,
		Example: `  # What would be denied since the switch to enforce was planned
  webhook-guard review --since 24h

  # One mapping's findings, with the users from an exported audit log
  webhook-guard review --mapping koordinator --audit-log audit.jsonl -o wide`,
		Args: cobra.NoArgs,
		RunE: cmdutil.Runner(ctx, o),
	}
	o.Kube.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.Mapping, "mapping", "", "Only this owner mapping.")
	cmd.Flags().StringVar(&o.Since, "since", "", "Only findings last seen at or after this time (RFC 3339) or within this duration (e.g. 1h).")
	cmd.Flags().StringVar(&o.Decision, "decision", "", "Only this decision: deny, audit, break-glass or flapping.")
	o.Output.AddFlags(cmd)
	cmd.Flags().StringVar(&o.AuditLog, "audit-log", "", "Also read kube-apiserver audit events (JSON lines) from this file, or - for stdin, for the users behind the decisions.")
	return cmd
}

// Complete takes the time --since counts from.
func (o *Options) Complete(_ []string) error {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	return nil
}

// Validate checks the flags and fills the filter.
func (o *Options) Validate() error {
	if err := o.Output.Validate(); err != nil {
		return err
	}
	if o.Decision != "" && !slices.Contains(review.Decisions, o.Decision) {
		return cmdutil.Invalid("--decision must be deny, audit, break-glass or flapping, got %q", o.Decision)
	}
	since, err := parseSince(o.Since, o.Now)
	if err != nil {
		return err
	}
	o.filter = review.Filter{Mapping: o.Mapping, Decision: o.Decision, Since: since}
	return nil
}

func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, cmdutil.Invalid("--since must be an RFC 3339 time (2026-01-02T15:04:05Z) or a positive duration (1h), got %q", s)
}

// Run builds the client, reads the reports (and the audit log) and prints the review; a
// finding that was or would be denied exits 1.
func (o *Options) Run(ctx context.Context) error {
	if err := o.Kube.CompleteClient(&o.Client); err != nil {
		return err
	}
	var list reportsv1alpha1.ClusterReportList
	if err := o.Client.List(ctx, &list, client.MatchingLabels{records.LabelManagedBy: records.Source}); err != nil {
		return &cmdutil.ExitError{Code: cmdutil.ExitInvalid, Err: fmt.Errorf("list openreports.io ClusterReports (are the OpenReports CRDs installed and the guard running?): %w", err)}
	}
	res := review.FromReports(list.Items, o.filter)
	if o.AuditLog != "" {
		if err := o.addAuditLog(&res); err != nil {
			return err
		}
	}
	if err := printReview(o.Out, &o.Output, res, o.Now); err != nil {
		return err
	}
	if res.WouldDeny > 0 {
		return cmdutil.Denied()
	}
	return nil
}

// addAuditLog reads --audit-log into the review.
func (o *Options) addAuditLog(res *review.Result) error {
	r := o.In
	if o.AuditLog != "-" {
		f, err := os.Open(o.AuditLog)
		if err != nil {
			return cmdutil.Invalid("--audit-log: %v", err)
		}
		defer func() { _ = f.Close() }() // read-only: a close error loses nothing
		r = f
	}
	decisions, sum, err := auditlog.Read(r)
	if err != nil {
		return &cmdutil.ExitError{Code: cmdutil.ExitInvalid, Err: fmt.Errorf("--audit-log %s: %w", o.AuditLog, err)}
	}
	res.AddAuditLog(decisions, sum, o.filter)
	return nil
}
