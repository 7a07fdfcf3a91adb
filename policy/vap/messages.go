package vap

import (
	"fmt"
	"strings"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// prefix is the start of every message: the variable denial.
func (m mappingPolicy) prefix() string { return `variables.denial` }

// denial is CEL for the start of every message, worded as the webhook's.
func (m mappingPolicy) denial() string {
	verb := "webhook-guard denied "
	if m.mode == guardapi.ModeAudit {
		verb = "webhook-guard (audit) would deny "
	}
	return fmt.Sprintf(`%s + request.operation + " of " + request.kind.kind + " \"" + variables.name + "\" by \"" + variables.username + "\" " + %s`,
		CELString(verb), CELString(fmt.Sprintf("(mapping %q, %s, policy shape); ", m.owner.Name, m.mode)))
}

func (m mappingPolicy) notOwnerMessage() string {
	return m.prefix() + ` + ` + CELString(string(policy.RuleNotOwner)+`: userInfo: "`) + ` + variables.username + "\" is not a writer" + ` +
		`(request.operation == "DELETE" ? "; deleting it (and recreating it) is a takeover" : "") + ` +
		CELString(fmt.Sprintf("; hint: if it should own this configuration, add it to owners[%s].writers", m.owner.Name))
}

// fallbackMessage is a validation's static message: the rule and its
// summary from the rule table, as every report of the rule words it.
func fallbackMessage(rule policy.Rule, mapping string) string {
	return fmt.Sprintf("webhook-guard: %s (mapping %q): %s", rule, mapping, rule.Info().Summary)
}

// caMismatchFallback is the message kube-apiserver uses if the message
// expression cannot be evaluated.
func (m mappingPolicy) caMismatchFallback() string {
	if len(m.ca.PEM) == 0 {
		return fallbackMessage(policy.RuleCAUnavailable, m.owner.Name)
	}
	return fallbackMessage(policy.RuleCAMismatch, m.owner.Name)
}

// unresolvedReason says why the mapping has no CA, on one line:
// kube-apiserver ignores a message expression whose result holds a line
// break and denies with the static message, and a reason may quote an
// error of several lines (a refused policy's CEL error, an API error).
func (m mappingPolicy) unresolvedReason() string {
	if m.ca.Err == "" {
		return "the owner's CA is empty"
	}
	return strings.ReplaceAll(m.ca.Err, "\n", " ")
}

func (m mappingPolicy) caMismatchMessage() string {
	if len(m.ca.PEM) == 0 {
		reason := m.unresolvedReason()
		return m.prefix() + ` + ` + CELString(string(policy.RuleCAUnavailable)+": the caBundle of webhook(s) ") + ` + variables.badWebhooks.join(", ") + ` +
			CELString(fmt.Sprintf(" cannot be verified: the guard could not resolve the owner's CA (%s); caBundle changes fail closed until the source can be read; hint: %s", reason, policy.RuleCAUnavailable.Info().Hint))
	}
	return m.prefix() + ` + ` + CELString(string(policy.RuleCAMismatch)+": the caBundle of webhook(s) ") + ` + variables.badWebhooks.join(", ") + ` +
		CELString(fmt.Sprintf(" is neither the owner's CA from %s [expected CA %s] as its source holds it, nor the stored caBundle followed by it; "+
			"hint: write the owner's CA exactly as its source holds it, or append it to the stored caBundle as cert-manager's cainjector does (policy shape compares bytes, it cannot parse PEM); an emptied caBundle is a mismatch too",
			m.ca.Source, joinShort(m.ca.Fingerprints)))
}
