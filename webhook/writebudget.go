package webhook

import (
	"context"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/writebudget"
)

// applyWriteBudget counts a writer's caBundle change against its mapping's
// writeBudget and, beyond it, turns the decision into a write-budget
// refusal (enforce) or would-deny (audit). Only a change the ownership
// decision allowed is counted: break-glass is never limited, a denial
// writes nothing, a dry run persists nothing, and a write that leaves
// every caBundle alone is not what a storm is made of.
func (h *Handler) applyWriteBudget(ctx context.Context, d *policy.Decision, owner *guardapi.Owner) {
	if owner == nil || owner.WriteBudget == nil || d.Outcome != policy.OutcomeAllow || d.DryRun || len(d.Changes) == 0 {
		return
	}
	budget := owner.WriteBudget
	key := writebudget.Key{Mapping: d.Mapping, Kind: string(d.Kind), Name: d.Name}
	ok, retryAfter := h.budgets.Take(key, int(budget.PerMinute), h.now())
	if ok {
		return
	}
	d.ExceedWriteBudget(budget.PerMinute, retryAfter)
	h.Metrics.WriteBudgetExceeded.WithLabelValues(d.Mapping, string(d.Mode)).Inc()
	requestLog(ctx).V(1).Info("write budget exceeded", "mapping", d.Mapping, "perMinute", budget.PerMinute, "retryAfterSeconds", d.RetryAfterSeconds)
}
