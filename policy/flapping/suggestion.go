package flapping

import (
	"cmp"
	"fmt"

	"github.com/webhook-guard/webhook-guard/policy"
)

// Suggestion is the suggestion for a flapping finding. Flapping is
// no Rule: it is found across many requests (Detector), not decided on
// one, so it has no entry in the rule table.
func Suggestion(f policy.FindingFacts) string {
	return fmt.Sprintf("caBundle flapping: distinct CAs written by %s; replicas each generating their own CA fight over %s: make them share one CA (owners[%s].ca) and let one writer inject it",
		cmp.Or(f.Writers, "-"), f.Configuration, f.Mapping)
}
