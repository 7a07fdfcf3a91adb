package webhook

import (
	"context"
	"time"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/writebudget"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

// admissionLookup is how admission looks an owner's CA up for
// policy.Evaluate, one per request: the resolver's cached or watched
// answer first; on a ca-mismatch, a live read (or a short wait for the
// watches), so a CA rotation racing the cache is never denied, unless the
// same foreign CA was confirmed moments ago against the same CA set (a
// storm of replicas each writing its own CA waits once per CA, not per
// write). A source that has rotated since is waited for again.
type admissionLookup struct {
	ctx context.Context //nolint:containedctx // one request's lookup, discarded with it
	h   *Handler
	// first is the first answer; reread the live one after a
	// ca-mismatch, nil when none was read.
	first  casource.Result
	reread *casource.Result
}

// LookupCA implements policy.CALookup.
func (l *admissionLookup) LookupCA(q policy.CAQuery) policy.CAAnswer {
	req := casource.Request{Owner: q.Owner, Annotations: q.Annotations, ClusterResourceNamespace: q.ClusterResourceNamespace}
	if q.Recheck == nil {
		l.first = l.h.resolve(l.ctx, q.Owner, req, false)
		return policy.CAAnswer{CAResult: l.first.CAResult, MayLag: l.first.Cached || l.first.Watched}
	}
	if l.h.mismatches.recent(mismatchKey(q.Recheck, l.first.Set), time.Now()) {
		l.h.Metrics.CALiveRereads.WithLabelValues("recent").Inc()
		return policy.CAAnswer{CAResult: l.first.CAResult}
	}
	live := l.h.resolve(l.ctx, q.Owner, req, true)
	l.reread = &live
	return policy.CAAnswer{CAResult: live.CAResult}
}

// settle counts what the live re-read found (the source had rotated, or
// the mismatch is confirmed) and remembers a confirmed mismatch.
func (l *admissionLookup) settle(d *policy.Decision) {
	if l.reread == nil {
		return
	}
	outcome := "rotated"
	if d.HasRule(policy.RuleCAMismatch) {
		outcome = "confirmed"
		l.h.mismatches.add(mismatchKey(d, l.reread.Set), time.Now())
	}
	l.h.Metrics.CALiveRereads.WithLabelValues(outcome).Inc()
}

// limiterBudget is the handler's write budgets (one limiter for the
// process, per writer and configuration) on the handler's clock.
type limiterBudget struct{ h *Handler }

// Take implements policy.Budget.
func (b limiterBudget) Take(key writebudget.Key, perMinute int) (bool, time.Duration) {
	return b.h.budgets.Take(key, perMinute, b.h.now())
}
