package policy

import (
	"errors"
	"fmt"
	"time"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/writebudget"
)

// Evaluate is the one way a request is decided: admission (serve and check,
// through webhook.Handler) and the observer call it alike, and differ only
// in what they hand it: how the owner's CA is looked up and whether a write
// budget applies. It matches the input once, asks for the owner's CA only
// when the decision needs it (never for a subject that may not write),
// asks once more when the first answer may lag its source and found a
// ca-mismatch (a CA rotated just before the request), and counts an
// allowed caBundle change against the writer's budget last, so that only
// what would be written is counted.
//
// Evaluate itself does no I/O: whatever its lookup and budget do is theirs.
func (c *Mappings) Evaluate(in *Input, env Env) Decision {
	m := c.MatchInput(in)
	d := c.decideWithCA(m, in, env.CA)
	var unverified []ServingFailure
	if env.Serving != nil && d.Allowed() {
		unverified = servingFailures(&d, in, env.Serving)
	}
	// A refusal for the served chain comes before the budget, so that a
	// write that will not land spends none of it.
	refused := len(unverified) > 0 && m.Owner != nil && m.Owner.VerifyServing == guardapi.VerifyServingDeny && d.Outcome == OutcomeAllow
	if refused {
		d.FailServing(unverified)
	}
	if env.Budget != nil && m.Owner != nil {
		applyWriteBudget(&d, m.Owner, env.Budget)
	}
	if !refused && d.Allowed() {
		d.Notices = append(d.Notices, servingNotices(unverified)...)
	}
	return d
}

// Env is what a caller of Evaluate provides.
type Env struct {
	// CA looks up the owner's CA; nil answers every lookup with an error
	// (ca-unavailable), which only a decision that needs the CA sees.
	CA CALookup
	// Budget counts a writer's caBundle changes; nil: no budget applies
	// (the observer judges writes already stored).
	Budget Budget
	// Serving says whether a caBundle verifies what its entry's endpoint
	// served when last probed; nil: nothing was probed (check, the
	// observer, a guard with the prober off).
	Serving ServingCheck
}

// ServingCheck compares an entry's caBundle with what the entry's endpoint
// served at the last probe, without a network call. entry is as the write
// sets it: its name, its new caBundle and its endpoint. known is false when
// nothing was kept for the entry; detail says where and why it does not
// verify.
type ServingCheck interface {
	CheckServing(kind GuardedKind, name string, entry Entry) (verified, known bool, detail string)
}

// CALookup answers the owner's CA for Evaluate.
type CALookup interface {
	LookupCA(q CAQuery) CAAnswer
}

// CAQuery is one ask for an owner's CA.
type CAQuery struct {
	Owner *guardapi.Owner
	// Annotations are the object's (an injectedByCertManager source is
	// named by them).
	Annotations map[string]string
	// ClusterResourceNamespace holds ClusterIssuers' CA Secrets.
	ClusterResourceNamespace string
	// Recheck, on the second ask, is the decision the first answer led
	// to: a ca-mismatch on an answer that may lag its source. The lookup
	// may read the source live, or wait for it, or answer as before (it
	// confirmed the same mismatch moments ago).
	Recheck *Decision
}

// CAAnswer is a lookup's answer.
type CAAnswer struct {
	CAResult
	// MayLag is true when the answer came from a cache or a watch that
	// may not yet hold a change made just before the request: a
	// ca-mismatch on it is asked about once more.
	MayLag bool
}

// Budget is a writer's caBundle write budget: the limiter's verdict on one
// more write of key, at most perMinute a minute, and when to retry.
type Budget interface {
	Take(key writebudget.Key, perMinute int) (ok bool, retryAfter time.Duration)
}

// errNoCALookup answers a decision that needs the owner's CA when its
// caller gave no way to look it up.
var errNoCALookup = errors.New("the owner's CA cannot be looked up here")

// noCA answers every lookup with an error.
type noCA struct{}

func (noCA) LookupCA(CAQuery) CAAnswer {
	return CAAnswer{CAResult: CAResult{Resolved: true, Err: errNoCALookup}}
}

// decideWithCA decides in against its match, looking the owner's CA up
// first when the decision needs it, and once more on a ca-mismatch found
// on an answer that may lag.
func (c *Mappings) decideWithCA(m MatchResult, in *Input, ca CALookup) Decision {
	if !c.needsOwnerCA(m, in) {
		return c.decideMatched(m, in)
	}
	if ca == nil {
		ca = noCA{}
	}
	q := CAQuery{Owner: m.Owner, Annotations: in.Annotations, ClusterResourceNamespace: c.Spec.CertManager.ClusterResourceNamespace}
	first := ca.LookupCA(q)
	in.CA = first.CAResult
	d := c.decideMatched(m, in)
	if !first.MayLag || !d.HasRule(RuleCAMismatch) {
		return d
	}
	q.Recheck = &d
	in.CA = ca.LookupCA(q).CAResult
	return c.decideMatched(m, in)
}

// applyWriteBudget counts a writer's allowed caBundle change against its
// own budget for that configuration (the mapping's writeBudget, per
// writer: one writer's loop must not refuse another writer's genuine
// rotation) and, beyond it, turns the decision into a write-budget refusal
// (enforce) or would-deny (audit). Only a change the ownership decision
// allowed is counted: break-glass is never limited, a denial writes
// nothing, a dry run persists nothing, and a write that leaves every
// caBundle alone is not what a storm is made of.
func applyWriteBudget(d *Decision, owner *guardapi.Owner, budget Budget) {
	if owner.WriteBudget == nil || d.Outcome != OutcomeAllow || d.DryRun || len(d.Changes) == 0 {
		return
	}
	perMinute := owner.WriteBudget.PerMinute
	key := writebudget.Key{Mapping: d.Mapping, Kind: string(d.Kind), Name: d.Name, Writer: d.Subject}
	if ok, retryAfter := budget.Take(key, int(perMinute)); !ok {
		d.ExceedWriteBudget(perMinute, retryAfter)
	}
}

// maxServingNotices bounds the notices of one write (one per entry whose
// new caBundle does not verify), so that kubectl's output stays readable.
const maxServingNotices = 5

// ServingFailure is an entry whose new caBundle does not verify what its
// endpoint served at the last probe.
type ServingFailure struct {
	Change BundleChange
	// Detail says where and why (reason at address for server name).
	Detail string
}

// servingFailures lists, of the entries whose caBundle the allowed write
// sets, those whose new caBundle does not verify the certificate the
// endpoint served at the last probe: kube-apiserver's calls to them will
// fail TLS once the write lands, unless the endpoint serves a new
// certificate by then (a rotator that publishes its CA first and serves
// later). An entry the last probe did not reach is not listed.
func servingFailures(d *Decision, in *Input, serving ServingCheck) []ServingFailure {
	var out []ServingFailure
	for _, c := range d.Changes {
		if c.Removed || c.Index >= len(in.Entries) {
			continue
		}
		entry := in.Entries[c.Index]
		entry.CABundle = c.New
		if verified, known, detail := serving.CheckServing(d.Kind, d.Name, entry); known && !verified {
			out = append(out, ServingFailure{Change: c, Detail: detail})
		}
	}
	return out
}

// servingNotices words the warnings of verifyServing: warn.
func servingNotices(unverified []ServingFailure) []string {
	var out []string
	for i, u := range unverified {
		if i == maxServingNotices {
			out = append(out, fmt.Sprintf("webhook-guard: and %d more entries whose caBundle does not verify the certificate their endpoint served", len(unverified)-maxServingNotices))
			break
		}
		out = append(out, fmt.Sprintf("webhook-guard: the caBundle of entry %q does not verify the certificate its endpoint served at the last probe (%s)",
			u.Change.Webhook, u.Detail))
	}
	return out
}
