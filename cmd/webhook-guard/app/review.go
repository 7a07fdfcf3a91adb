package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/flapping"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

type reviewOptions struct {
	kube     kubeFlags
	mapping  string
	since    string
	decision string
	out      outputFlags
	// auditLog is a kube-apiserver audit log (JSON lines), "-" for stdin.
	auditLog string
	stdin    io.Reader
}

func newReviewCommand() *cobra.Command {
	o := &reviewOptions{}
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

Exit codes: 0 nothing was or would be denied, 1 something was or would be
denied (a pipeline can gate the switch to enforce on it), 2 invalid input or
the reports could not be read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			c, err := o.kube.client()
			if err != nil {
				return invalid("%v", err)
			}
			o.stdin = cmd.InOrStdin()
			return runReview(cmd.Context(), c, o, time.Now(), cmd.OutOrStdout())
		},
	}
	o.kube.add(cmd)
	cmd.Flags().StringVar(&o.mapping, "mapping", "", "Only this owner mapping.")
	cmd.Flags().StringVar(&o.since, "since", "", "Only findings last seen at or after this time (RFC 3339) or within this duration (e.g. 1h).")
	cmd.Flags().StringVar(&o.decision, "decision", "", "Only this decision: deny, audit, break-glass or flapping.")
	o.out.add(cmd)
	cmd.Flags().StringVar(&o.auditLog, "audit-log", "", "Also read kube-apiserver audit events (JSON lines) from this file, or - for stdin, for the users behind the decisions.")
	return cmd
}

func (o *reviewOptions) validate() error {
	if err := o.out.validate(); err != nil {
		return err
	}
	switch o.decision {
	case "", string(policy.OutcomeDeny), string(policy.OutcomeAudit), string(policy.OutcomeBreakGlass), records.DecisionFlapping:
	default:
		return invalid("--decision must be deny, audit, break-glass or flapping, got %q", o.decision)
	}
	if _, err := parseSince(o.since, time.Now()); err != nil {
		return err
	}
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
	return time.Time{}, invalid("--since must be an RFC 3339 time (2026-01-02T15:04:05Z) or a positive duration (1h), got %q", s)
}

// ReviewFinding is one line of the review: one result of one report.
type ReviewFinding struct {
	Mapping       string `json:"mapping"`
	Subject       string `json:"subject,omitempty"`
	Rule          string `json:"rule"`
	Decision      string `json:"decision"`
	Mode          string `json:"mode,omitempty"`
	Configuration string `json:"configuration"`
	Webhook       string `json:"webhook,omitempty"`
	ExpectedCA    string `json:"expectedCA,omitempty"`
	FoundCA       string `json:"foundCA,omitempty"`
	Writers       string `json:"writers,omitempty"`
	Count         int64  `json:"count"`
	FirstSeen     string `json:"firstSeen"`
	LastSeen      string `json:"lastSeen"`
	// WouldDeny is true for what enforce mode denies (or denied).
	WouldDeny  bool   `json:"wouldDeny"`
	Suggestion string `json:"suggestion"`
	// report is the ClusterReport holding the finding (-o name).
	report string
	// Origin is empty for requests the guard decided, "observed" for
	// changes its observer saw in a watch, "audit-log" for decisions read
	// from kube-apiserver's audit log.
	Origin string `json:"origin,omitempty"`
	// FieldManagers own the changed caBundles (observed findings).
	FieldManagers string `json:"fieldManagers,omitempty"`
}

// ReviewResult is the whole review, as -o json|yaml prints it.
type ReviewResult struct {
	Findings []ReviewFinding `json:"findings"`
	// WouldDeny counts the findings enforce mode denies.
	WouldDeny int `json:"wouldDeny"`
	// DroppedResults counts results the reports dropped to stay bounded.
	DroppedResults int `json:"droppedResults,omitempty"`
	// AuditLog says what --audit-log read.
	AuditLog *AuditLogSummary `json:"auditLog,omitempty"`
}

func runReview(ctx context.Context, c client.Reader, o *reviewOptions, now time.Time, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	since, err := parseSince(o.since, now)
	if err != nil {
		return err
	}
	var list reportsv1alpha1.ClusterReportList
	if err := c.List(ctx, &list, client.MatchingLabels{records.LabelManagedBy: records.Source}); err != nil {
		return &exitError{code: ExitInvalid, err: fmt.Errorf("list openreports.io ClusterReports (are the OpenReports CRDs installed and the guard running?): %w", err)}
	}
	res := reviewFindings(list.Items, o, since)
	if o.auditLog != "" {
		if err := foldAuditLog(&res, o, since); err != nil {
			return err
		}
	}
	if err := printReview(out, &o.out, res, now); err != nil {
		return err
	}
	if res.WouldDeny > 0 {
		return &exitError{code: ExitDenied}
	}
	return nil
}

func reviewFindings(reports []reportsv1alpha1.ClusterReport, o *reviewOptions, since time.Time) ReviewResult {
	res := ReviewResult{Findings: []ReviewFinding{}}
	for _, rep := range reports {
		if rep.Source != records.Source {
			continue
		}
		dropped, _ := strconv.Atoi(rep.Annotations[records.AnnotationDroppedResults])
		res.DroppedResults += dropped
		conf := rep.Name
		if rep.Scope != nil {
			conf = rep.Scope.Kind + "/" + rep.Scope.Name
		}
		for _, r := range rep.Results {
			p := r.Properties
			f := ReviewFinding{
				Mapping: r.Policy, Subject: p[records.PropSubject], Rule: r.Rule, Decision: p[records.PropDecision], Mode: p[records.PropMode],
				Configuration: conf, Webhook: p[records.PropWebhook], ExpectedCA: p[records.PropExpected], FoundCA: p[records.PropFound],
				Writers: p[records.PropWriters], FirstSeen: p[records.PropFirstSeen], LastSeen: p[records.PropLastSeen], report: rep.Name,
				Origin: p[records.PropOrigin], FieldManagers: p[records.PropFieldManagers],
			}
			if c := p[records.PropConfiguration]; c != "" { // a report of absent configurations
				f.Configuration = c
			}
			f.Count, _ = strconv.ParseInt(p[records.PropCount], 10, 64)
			// The recorder's result says it: fail is an enforce denial,
			// warn an audit would-deny or flapping (records.resultOf).
			res.add(f, r.Result == "fail" || r.Result == "warn", o, since)
		}
	}
	sortFindings(res.Findings)
	return res
}

// add keeps a finding that passes the filters, with its suggestion.
func (res *ReviewResult) add(f ReviewFinding, wouldDeny bool, o *reviewOptions, since time.Time) {
	if o.mapping != "" && f.Mapping != o.mapping || o.decision != "" && f.Decision != o.decision {
		return
	}
	if !since.IsZero() {
		if last, err := time.Parse(time.RFC3339, f.LastSeen); err == nil && last.Before(since) {
			return
		}
	}
	f.WouldDeny = wouldDeny
	f.Suggestion = suggest(f)
	if f.WouldDeny {
		res.WouldDeny++
	}
	res.Findings = append(res.Findings, f)
}

func sortFindings(fs []ReviewFinding) {
	slices.SortFunc(fs, func(a, b ReviewFinding) int {
		return slices.Compare(
			[]string{a.Mapping, a.Subject, a.Rule, a.Configuration, a.Webhook, a.Decision, a.FoundCA, a.Origin},
			[]string{b.Mapping, b.Subject, b.Rule, b.Configuration, b.Webhook, b.Decision, b.FoundCA, b.Origin})
	})
}

// foldAuditLog adds the decisions of an audit log to the review, filtered
// like the reports' findings.
func foldAuditLog(res *ReviewResult, o *reviewOptions, since time.Time) error {
	r := o.stdin
	if o.auditLog != "-" {
		f, err := os.Open(o.auditLog)
		if err != nil {
			return invalid("--audit-log: %v", err)
		}
		defer func() { _ = f.Close() }() // read-only: a close error loses nothing
		r = f
	}
	found, sum, err := readAuditLog(r)
	if err != nil {
		return &exitError{code: ExitInvalid, err: fmt.Errorf("--audit-log %s: %w", o.auditLog, err)}
	}
	res.AuditLog = &sum
	for _, f := range found {
		res.add(f, f.Decision == string(policy.OutcomeDeny) || f.Decision == string(policy.OutcomeAudit), o, since)
	}
	sortFindings(res.Findings)
	return nil
}

// suggest fills the finding's facts into its rule's suggestion from the
// rule table; flapping, found across many requests rather than decided on
// one, is no rule and has its own.
func suggest(f ReviewFinding) string {
	facts := policy.FindingFacts{
		Mapping: f.Mapping, Subject: f.Subject, Configuration: f.Configuration,
		ExpectedCA: f.ExpectedCA, FoundCA: f.FoundCA,
		Observed: f.Origin == records.OriginObserved, FieldManagers: f.FieldManagers, Writers: f.Writers,
	}
	if f.Rule == records.RuleFlapping {
		return flapping.Suggestion(facts)
	}
	if s := policy.Rule(f.Rule).Info().Suggest; s != nil {
		return s(facts)
	}
	return "see the guard's log for this rule"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// reviewTable is the findings table: it fits 120 columns for the common
// names (ages instead of times, service accounts as sa:ns:name); -o wide
// adds the configuration (kind abbreviated), the webhook entry and first
// seen.
func reviewTable(res ReviewResult, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("MAPPING", false), column("SUBJECT", false), column("RULE", false), column("DECISION", false),
		column("FOUND CA", false), column("COUNT", false), column("LAST SEEN", false),
		column("CONFIGURATION", true), column("WEBHOOK", true), column("FIRST SEEN", true),
	}}
	for _, f := range res.Findings {
		subject := f.Subject
		if subject == "" {
			subject = f.Writers
		}
		if ns, name, ok := guardapi.ServiceAccountOf(subject); ok {
			subject = "sa:" + ns + ":" + name
		}
		decision := f.Decision
		if f.Origin != "" {
			decision += " (" + f.Origin + ")"
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			f.Mapping, orDash(subject), f.Rule, decision, orDash(f.FoundCA), f.Count, age(f.LastSeen, now),
			shortConfiguration(f.Configuration), orDash(f.Webhook), f.FirstSeen,
		}})
	}
	return t
}

// shortConfiguration abbreviates the kind of "Kind/name" (vwc/name).
func shortConfiguration(c string) string {
	kind, name, ok := strings.Cut(c, "/")
	if !ok {
		return c
	}
	return policy.ConfigKind(kind).ShortName() + "/" + name
}

// age is an RFC 3339 time as kubectl prints ages (5m, 3h2m, 4d).
func age(ts string, now time.Time) string {
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return orDash(ts)
	}
	return duration.HumanDuration(now.Sub(t))
}

func printReview(out io.Writer, o *outputFlags, res ReviewResult, now time.Time) error {
	if !o.isTable() {
		names := make([]string, 0, len(res.Findings))
		for _, f := range res.Findings {
			names = append(names, "clusterreport.openreports.io/"+f.report)
		}
		return o.print(out, res, nil, names)
	}
	if res.AuditLog != nil && !o.noHeaders {
		fmt.Fprintf(out, "Audit log: %d event(s) read, %d with a webhook-guard decision.\n", res.AuditLog.Events, res.AuditLog.Decisions)
		for _, note := range res.AuditLog.notes() {
			fmt.Fprintf(out, "Audit log: %s.\n", note)
		}
	}
	if len(res.Findings) == 0 {
		if o.noHeaders {
			return nil
		}
		_, err := fmt.Fprintln(out, "No findings: nothing was or would be denied.")
		return err
	}
	if err := o.print(out, res, reviewTable(res, now), nil); err != nil {
		return err
	}
	if o.noHeaders {
		return nil
	}
	fmt.Fprintln(out, "\nSuggestions:")
	var seen []string
	for _, f := range res.Findings {
		if slices.Contains(seen, f.Suggestion) {
			continue
		}
		seen = append(seen, f.Suggestion)
		fmt.Fprintf(out, "  - %s\n", f.Suggestion)
	}
	if res.DroppedResults > 0 {
		fmt.Fprintf(out, "\n%d older results were dropped to keep the reports bounded.\n", res.DroppedResults)
	}
	if res.WouldDeny > 0 {
		_, err := fmt.Fprintf(out, "\n%d finding(s) were or would be denied in enforce mode.\n", res.WouldDeny)
		return err
	}
	_, err := fmt.Fprintln(out, "\nNothing was or would be denied.")
	return err
}
