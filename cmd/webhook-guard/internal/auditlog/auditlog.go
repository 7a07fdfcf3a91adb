// Package auditlog reads kube-apiserver's audit log (audit.k8s.io/v1 events,
// JSON lines) for the decisions webhook-guard left there: the static
// webhook's audit annotations and the policy shape's validation failures
// and denials, with the real user behind each.
package auditlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/static"
	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// Origin marks findings read from kube-apiserver's audit log: they name the
// real user, which the guard's own records of observed changes cannot
// (managedFields names field managers).
const Origin = "audit-log"

// vapFailureKey is the audit annotation kube-apiserver writes for a
// ValidatingAdmissionPolicy binding with validationActions Audit.
const vapFailureKey = "validation.policy.admission.k8s.io/validation_failure"

// maxListedMalformed bounds the line numbers a summary lists.
const maxListedMalformed = 20

// maxAuditLineBytes bounds one line of an audit log held in memory. The
// events kube-apiserver writes for webhook configurations are a few KiB at
// the Metadata level and tens of KiB with request and response bodies; a
// longer line is not one of them, and reading it whole would let one line
// of a log (or of whatever was piped in by mistake) take all the memory.
const maxAuditLineBytes = 1 << 20

// Summary says what an audit log held.
type Summary struct {
	// Events is how many audit events were read.
	Events int `json:"events"`
	// Decisions is how many of them carry a webhook-guard decision.
	Decisions int `json:"decisions"`
	// Malformed counts lines that are not audit.k8s.io/v1 Events; their
	// line numbers are in MalformedLines (the first 20).
	Malformed      int   `json:"malformed"`
	MalformedLines []int `json:"malformedLines,omitempty"`
	// TooLong counts lines longer than 1 MiB, skipped unread; their line
	// numbers are in TooLongLines (the first 20).
	TooLong      int   `json:"tooLong"`
	TooLongLines []int `json:"tooLongLines,omitempty"`
}

// Decision is one webhook-guard decision about a webhook configuration,
// aggregated over the events that record it (by mapping, user, rule,
// configuration, decision, webhook and CA found).
type Decision struct {
	Mapping       string
	Subject       string
	Rule          string
	Decision      string
	Configuration string
	Webhook       string
	FoundCA       string
	Count         int64
	FirstSeen     string
	LastSeen      string
}

// vapFailure is one entry of the validation_failure annotation.
type vapFailure struct {
	Message           string   `json:"message"`
	Policy            string   `json:"policy"`
	Binding           string   `json:"binding"`
	ValidationActions []string `json:"validationActions"`
}

// decisionRe finds a ValidatingAdmissionPolicy denial in a response message.
var decisionRe = regexp.MustCompile(`ValidatingAdmissionPolicy '([^']+)' with binding '[^']*' denied request: (.*)`)

// foundRe finds the foreign CA fingerprints in a violation's text.
var foundRe = regexp.MustCompile(`found ([0-9a-f,]+|none)\]`)

// Read reads audit events (JSON lines) and returns a Decision per
// webhook-guard decision about a webhook configuration, aggregated by
// mapping, user, rule, configuration and decision. A line that does not
// decode as an audit.k8s.io/v1 Event, or that is longer than
// maxAuditLineBytes, is counted with its line number and skipped; only a read
// error of r itself is returned.
func Read(r io.Reader) ([]Decision, Summary, error) {
	var sum Summary
	agg := map[string]*Decision{}
	var order []string
	br := bufio.NewReaderSize(r, 64<<10)
	var raw []byte
	for line := 1; ; line++ {
		var cut bool
		var err error
		raw, cut, err = readBoundedLine(br, maxAuditLineBytes, raw)
		if cut {
			sum.TooLong++
			if len(sum.TooLongLines) < maxListedMalformed {
				sum.TooLongLines = append(sum.TooLongLines, line)
			}
		} else if len(bytes.TrimSpace(raw)) > 0 {
			var ev auditv1.Event
			if jerr := json.Unmarshal(raw, &ev); jerr != nil || ev.Kind != "Event" || ev.APIVersion != auditv1.SchemeGroupVersion.String() {
				sum.Malformed++
				if len(sum.MalformedLines) < maxListedMalformed {
					sum.MalformedLines = append(sum.MalformedLines, line)
				}
			} else {
				sum.Events++
				found := decisionsOf(&ev)
				if len(found) > 0 {
					sum.Decisions++
				}
				for _, f := range found {
					key := strings.Join([]string{f.Mapping, f.Subject, f.Rule, f.Configuration, f.Decision, f.Webhook, f.FoundCA}, "\x00")
					if prev, ok := agg[key]; ok {
						prev.Count++
						prev.FirstSeen = minTime(prev.FirstSeen, f.FirstSeen)
						prev.LastSeen = maxTime(prev.LastSeen, f.LastSeen)
						continue
					}
					f.Count = 1
					agg[key] = &f
					order = append(order, key)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, sum, fmt.Errorf("read the audit log at line %d: %w", line, err)
		}
	}
	out := make([]Decision, 0, len(order))
	for _, k := range order {
		out = append(out, *agg[k])
	}
	return out, sum, nil
}

// readBoundedLine reads one line into buf (reused) and returns it, or, when
// the line without its newline is longer than limit, discards the rest of
// it and reports it cut: memory stays within limit plus the reader's buffer
// whatever the line's length.
func readBoundedLine(br *bufio.Reader, limit int, buf []byte) ([]byte, bool, error) {
	buf = buf[:0]
	cut := false
	for {
		frag, err := br.ReadSlice('\n')
		if !cut {
			content := len(buf) + len(frag)
			if len(frag) > 0 && frag[len(frag)-1] == '\n' {
				content--
			}
			if content > limit {
				cut, buf = true, buf[:0]
			} else {
				buf = append(buf, frag...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, cut, err
	}
}

// decisionsOf are the webhook-guard decisions one event records: the
// static shape's audit annotations (prefixed with the guard's webhook
// names), the policy shape's validation_failure annotation (Audit) and a
// policy's denial in the response status (Deny). Only the final stage of a
// write of one of the guarded kinds counts, so a request is counted once.
func decisionsOf(ev *auditv1.Event) []Decision {
	if ev.ObjectRef == nil || (ev.Stage != auditv1.StageResponseComplete && ev.Stage != auditv1.StagePanic) {
		return nil
	}
	kind, ok := guardedKindOf(ev.ObjectRef.Resource)
	if !ok {
		return nil
	}
	user := ev.User.Username
	if ev.ImpersonatedUser != nil && ev.ImpersonatedUser.Username != "" {
		user = ev.ImpersonatedUser.Username
	}
	at := ev.StageTimestamp.UTC().Format(time.RFC3339)
	base := Decision{Subject: user, Configuration: string(kind) + "/" + ev.ObjectRef.Name, FirstSeen: at, LastSeen: at}

	return append(staticDecisions(ev, base), policyDecisions(ev, base)...)
}

// guardedKindOf is the guarded kind (a row of guardapi.Kinds) kube-apiserver
// serves as resource; false for any other resource, whose writes the guard
// does not decide.
func guardedKindOf(resource string) (policy.GuardedKind, bool) {
	for _, k := range guardapi.Kinds {
		if k.Resource == resource {
			return policy.GuardedKind(k.Kind), true
		}
	}
	return "", false
}

// staticDecisions are the static shape's: the audit annotations the
// guard's webhooks (prefixed with their names) leave, one per violation.
func staticDecisions(ev *auditv1.Event, base Decision) []Decision {
	var out []Decision
	for _, webhook := range []string{static.WebhookName, static.BreakGlassWebhookName} {
		decision := ev.Annotations[webhook+"/decision"]
		if decision == "" {
			continue
		}
		f := base
		f.Mapping, f.Decision, f.Rule = orUnmanaged(ev.Annotations[webhook+"/mapping"]), decision, ev.Annotations[webhook+"/rule"]
		if decision == string(policy.OutcomeBreakGlass) || ev.Annotations[webhook+"/violations"] == "" {
			out = append(out, f)
			continue
		}
		// One finding per listed violation ("rule: field: detail | ...").
		for v := range strings.SplitSeq(ev.Annotations[webhook+"/violations"], " | ") {
			rule, _, ok := strings.Cut(v, ": ")
			if !ok {
				continue // "and N more"
			}
			vf := f
			vf.Rule = rule
			if m := foundRe.FindStringSubmatch(v); m != nil && m[1] != "none" {
				vf.FoundCA = m[1]
			}
			out = append(out, vf)
		}
	}
	return out
}

// policyDecisions are the policy shape's: the validation_failure
// annotation of a binding with Audit, and a policy's denial in the
// response status.
func policyDecisions(ev *auditv1.Event, base Decision) []Decision {
	var out []Decision
	if raw := ev.Annotations[vapFailureKey]; raw != "" {
		var failures []vapFailure
		if err := json.Unmarshal([]byte(raw), &failures); err == nil {
			for _, vf := range failures {
				if mapping, ok := mappingOfPolicy(vf.Policy, vf.Message); ok {
					decision := string(policy.OutcomeAudit)
					if slices.Contains(vf.ValidationActions, "Deny") {
						decision = string(policy.OutcomeDeny)
					}
					out = append(out, vapDecision(base, mapping, decision, vf.Message))
				}
			}
		}
	}
	if ev.ResponseStatus != nil && ev.ResponseStatus.Code == 403 {
		if m := decisionRe.FindStringSubmatch(ev.ResponseStatus.Message); m != nil {
			if mapping, ok := mappingOfPolicy(m[1], m[2]); ok {
				out = append(out, vapDecision(base, mapping, string(policy.OutcomeDeny), m[2]))
			}
		}
	}
	return out
}

// mappingOfPolicy is the mapping a generated policy decides for. A mapping
// has several policies (-selected, -ca), so the name its message gives wins
// over the policy's name; the name is only for a message without one.
func mappingOfPolicy(name, message string) (string, bool) {
	mapping, ok := strings.CutPrefix(name, vap.NamePrefix)
	if !ok || mapping == "" {
		return "", false
	}
	if m := mappingRe.FindStringSubmatch(message); m != nil {
		return m[1], true
	}
	return mapping, true
}

// mappingRe finds the mapping a generated policy's message names.
var mappingRe = regexp.MustCompile(`\(mapping "([^"]+)"[,)]`)

// vapDecision is a policy-shape decision; its rule is the one the generated
// message names.
func vapDecision(base Decision, mapping, decision, message string) Decision {
	f := base
	f.Mapping, f.Decision, f.Rule = mapping, decision, "policy"
	for _, r := range []policy.Rule{policy.RuleNotOwner, policy.RuleCAMismatch, policy.RuleCAUnavailable} {
		if strings.Contains(message, string(r)+":") {
			f.Rule = string(r)
			break
		}
	}
	return f
}

func orUnmanaged(mapping string) string {
	if mapping == "" {
		return "(unmanaged)"
	}
	return mapping
}

func minTime(a, b string) string {
	if b < a {
		return b
	}
	return a
}

func maxTime(a, b string) string {
	if b > a {
		return b
	}
	return a
}

// malformedNote says which lines were skipped.
func (s Summary) malformedNote() string {
	return fmt.Sprintf("%d malformed line(s) skipped (not audit.k8s.io/v1 Events): line %s", s.Malformed, listLines(s.Malformed, s.MalformedLines))
}

// tooLongNote says which lines were skipped for their length.
func (s Summary) tooLongNote() string {
	return fmt.Sprintf("%d line(s) longer than %d MiB skipped unread (audit events are far smaller): line %s", s.TooLong, maxAuditLineBytes>>20, listLines(s.TooLong, s.TooLongLines))
}

// Notes are the summary's warnings, one a line, for the table output.
func (s Summary) Notes() []string {
	var out []string
	if s.Malformed > 0 {
		out = append(out, s.malformedNote())
	}
	if s.TooLong > 0 {
		out = append(out, s.tooLongNote())
	}
	return out
}

// listLines lists the first line numbers of count, and how many more.
func listLines(count int, listed []int) string {
	lines := make([]string, len(listed))
	for i, l := range listed {
		lines[i] = strconv.Itoa(l)
	}
	more := ""
	if count > len(listed) {
		more = fmt.Sprintf(" and %d more", count-len(listed))
	}
	return strings.Join(lines, ", ") + more
}
