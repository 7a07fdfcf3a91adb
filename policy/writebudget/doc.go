// Package writebudget limits the caBundle-changing writes each of an
// owner's writers makes to one webhook configuration: a sliding window of
// one minute. An owner's own
// hot loop passes every ownership rule; the budget is what stops it. The
// limit is state across requests, so it is no rule of the pure decision.
//
// It does no I/O and takes the time as an argument.
package writebudget
