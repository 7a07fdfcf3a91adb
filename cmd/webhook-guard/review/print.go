package review

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/review"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// reviewTable is the findings table: it fits 120 columns for the common
// names (ages instead of times, service accounts as sa:ns:name); -o wide
// adds the configuration (kind abbreviated), the webhook entry and first
// seen.
func reviewTable(res review.Result, now time.Time) *metav1.Table {
	col := cmdutil.Column
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		col("MAPPING", false), col("SUBJECT", false), col("RULE", false), col("DECISION", false),
		col("FOUND CA", false), col("COUNT", false), col("LAST SEEN", false),
		col("CONFIGURATION", true), col("WEBHOOK", true), col("FIRST SEEN", true),
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
			f.Mapping, cmdutil.OrDash(subject), f.Rule, decision, cmdutil.OrDash(f.FoundCA), f.Count, age(f.LastSeen, now),
			shortConfiguration(f.Configuration), cmdutil.OrDash(f.Webhook), f.FirstSeen,
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
	return policy.GuardedKind(kind).ShortName() + "/" + name
}

// age is an RFC 3339 time as kubectl prints ages (5m, 3h2m, 4d).
func age(ts string, now time.Time) string {
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return cmdutil.OrDash(ts)
	}
	return duration.HumanDuration(now.Sub(t))
}

func printReview(out io.Writer, o *cmdutil.OutputFlags, res review.Result, now time.Time) error {
	if !o.IsTable() {
		names := make([]string, 0, len(res.Findings))
		for _, f := range res.Findings {
			names = append(names, "clusterreport.openreports.io/"+f.Report)
		}
		return o.Print(out, res, nil, names)
	}
	if res.AuditLog != nil && !o.NoHeaders {
		fmt.Fprintf(out, "Audit log: %d event(s) read, %d with a webhook-guard decision.\n", res.AuditLog.Events, res.AuditLog.Decisions)
		for _, note := range res.AuditLog.Notes() {
			fmt.Fprintf(out, "Audit log: %s.\n", note)
		}
	}
	if len(res.Findings) == 0 {
		if o.NoHeaders {
			return nil
		}
		fmt.Fprintln(out, "No findings: nothing was or would be denied.")
		printTrustPaths(out, res.TrustPaths, now)
		return nil
	}
	if err := o.Print(out, res, reviewTable(res, now), nil); err != nil {
		return err
	}
	if o.NoHeaders {
		return nil
	}
	printFooter(out, res)
	printTrustPaths(out, res.TrustPaths, now)
	return nil
}

// printTrustPaths prints the prober's last round: the count of verified
// paths, and each path that did not verify with its fix.
func printTrustPaths(out io.Writer, tp *review.TrustPaths, now time.Time) {
	if tp == nil {
		return
	}
	fmt.Fprintf(out, "\nTrust paths (the guard's probe %s ago): %d verified, %d not.\n", age(tp.ProbedAt, now), tp.Verified, len(tp.NotVerified))
	if t, err := time.Parse(time.RFC3339, tp.ProbedAt); err == nil && now.Sub(t) > records.TrustPathsStaleAfter {
		fmt.Fprintf(out, "  The report is older than %s: the guard's leader is not probing (stopped, or --probe-interval 0).\n", duration.HumanDuration(records.TrustPathsStaleAfter))
	}
	for _, p := range tp.NotVerified {
		fmt.Fprintf(out, "  - %s %s (mapping %s, failurePolicy %s), for %s: %s\n    fix: %s\n",
			shortConfiguration(p.Configuration), p.Webhook, p.Mapping, p.FailurePolicy, age(p.Since, now), p.Message, p.Suggestion)
	}
}

// printFooter prints each distinct suggestion once, then the counts.
func printFooter(out io.Writer, res review.Result) {
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
		fmt.Fprintf(out, "\n%d finding(s) were or would be denied in enforce mode.\n", res.WouldDeny)
		return
	}
	fmt.Fprintln(out, "\nNothing was or would be denied.")
}
