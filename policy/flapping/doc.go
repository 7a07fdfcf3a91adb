// Package flapping finds caBundle flapping: more distinct caBundle values
// written to one configuration within a window than a rotation ever needs,
// the signature of several replicas, each with its own CA, fighting over
// one configuration. It is found across many requests, not decided on one,
// so it is no rule of the decision; Suggestion is what `webhook-guard
// review` prints for it.
//
// It does no I/O and takes the time as an argument.
package flapping
