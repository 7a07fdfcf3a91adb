package vap

import (
	"strings"

	admv1 "k8s.io/api/admissionregistration/v1"
)

// What each expression of a generated policy is for, in words: `render
// policy --explain` prints it beside the policy, so that an administrator
// reading a policy in the cluster, or a reviewer reading a golden's diff,
// can tell which guarantee a piece of CEL holds up. Test_Explain holds
// every name the generator writes to an entry here, and every entry to a
// name the generator writes.

// Explanation is what one expression of a policy enforces.
type Explanation struct {
	// Field is where the expression is: matchConditions, variables or
	// validations.
	Field string
	// Name is the matchCondition's or variable's name; for a validation,
	// the rule it enforces.
	Name string
	// Guarantee says what the expression holds, or why it is there.
	Guarantee string
	// Expression is the CEL.
	Expression string
}

// conditionGuarantees explain the matchConditions, by name.
var conditionGuarantees = map[string]string{
	"owned-configuration": "The policy runs only for the configurations the mapping claims by name (its label selector, when it has one, is the binding's objectSelector instead).",
	"owned-object":        "The policy runs only for the CRDs or APIServices the mapping names.",
	"changes-trust": "Skips the policy for a writer's write that no rule can deny: the entries keep their names and positions, every caBundle is the stored one or the owner's CA (or a uniform rotation to it), and the CA pointer stays. " +
		"It cannot read variables, so it spells its own pieces; kube-apiserver's generation check comes first, so a label or annotation write costs one field read.",
	"not-break-glass": "Break-glass subjects are never evaluated: their writes pass, as the static webhook's matchCondition lets them through (without the webhook's warning and record).",
}

// variableGuarantees explain the variables, by name.
var variableGuarantees = map[string]string{
	"name":             "The request's object name, read only where present (a deletecollection or a generateName CREATE carries none).",
	"username":         "The request's username, or \"\" when absent.",
	"isWriter":         "The subject is a writer of the mapping: the not-owner rule.",
	"denial":           "The start of every denial message: operation, kind, name, subject, mapping, mode.",
	"sameNames":        "The UPDATE keeps every entry's name and position, so no entry is new and the entry rule cannot fail.",
	"unfilledWebhooks": "Entries without a caBundle and without a stored entry of their name: kube-apiserver would trust its system roots for them (the entry rule).",
	"pointer":          "The CA pointer (cert-manager's inject-ca-from annotations) of the request's object.",
	"pointerMoves":     "The write sets a CA pointer other than the stored one (or the mapping's pin): cainjector would write another CA.",
	"fillComing":       "cainjector will fill an empty caBundle: the mapping's CA is injectedByCertManager, was readable at the guard's last sync, and the object points at it.",
	"syncedCA":         "The owner's CA as the guard last synced it (base64), held once: the param's fallback, and the CA a writer may still be writing while the param rotates.",
	"ca":               "The owner's current CA as base64 text: the CA Secret read as the param, else the literal the guard synced. \"\" when unresolved: caBundle changes fail closed.",
	"caIsPEM":          "The CA starts with a PEM BEGIN line: only then can a merge be parsed back to the stored certificates plus the CA.",
	"b64":              "Each base64 character's 6-bit value, to shift a CA read from a param.",
	"b64chars":         "The base64 characters by value, to shift a CA read from a param.",
	"caValues":         "The 6-bit values of the param CA's text.",
	"caLen":            "The param CA's length in bytes.",
	"caShift1":         "The CA's base64 text without its first byte: how the CA reads after a stored bundle of 2 bytes modulo 3 (a merge).",
	"caShift2":         "The CA's base64 text without its first two bytes: how the CA reads after a stored bundle of 1 byte modulo 3 (a merge).",
	"uniformRotation":  "Every stored entry holds one bundle K and every new one holds K, the CA, or K followed by the CA: a rotation decided in one pass, with no lookup per entry.",
	"oldBundles":       "The stored caBundles by entry name, built once per request so that each entry is looked up in constant cost.",
	"badWebhooks":      "The entries whose changed caBundle is neither the owner's CA, nor the stored one, nor the stored one followed by the CA (cainjector's merge): the rotation rule's denials.",
	"hasEntry":         "The object has the entry (a CRD's conversion webhook, an APIService's service); false for a DELETE.",
	"hadEntry":         "The stored object had the entry; false for a CREATE.",
	"bundle":           "The object's caBundle as base64 text (\"\" for none or a DELETE).",
	"oldBundle":        "The stored caBundle as base64 text (\"\" unless an UPDATE).",
	"insecure":         "The write sets insecureSkipTLSVerify, which trusts any certificate.",
	"changesTrust":     "The write changes the caBundle or sets insecureSkipTLSVerify.",
	"unfilled":         "The entry has no caBundle and had none stored: kube-apiserver would trust its system roots (the entry rule).",
	"endpointMoves":    "The write chooses where the entry's traffic goes: a new entry or another endpoint.",
	"movesTrust":       "What a subject that is not a writer may not do: change the caBundle or insecureSkipTLSVerify, move the endpoint, or move the CA pointer.",
}

// validationGuarantees explain the validations by the variable that tells
// each apart, tried in order.
var validationGuarantees = []struct {
	rule, reads, guarantee string
}{
	{"ca-mismatch (pointer)", "variables.pointerMoves", "A writer may not move the CA pointer (off the pin, or at all without one): cainjector would write the CA it names."},
	{"ca-mismatch (entry)", "!variables.unfilled ", "An entry may not be left without a caBundle unless cainjector will fill it (fillComing); a non-writer's such write is not-owner's."},
	{"not-owner", "variables.movesTrust", "Only a writer may change the trust of a named CRD or APIService; any other write of it passes."},
	{"ca-mismatch (caBundle)", "variables.changesTrust", "A writer's changed caBundle is the owner's CA, or the stored one followed by it; insecureSkipTLSVerify is never set."},
	{"ca-mismatch", "variables.badWebhooks", "A writer's changed caBundles are each the owner's CA, the stored one, or the stored one followed by the CA (badWebhooks is empty); with the entry rule folded in where the policy checks both."},
	{"ca-mismatch (entry)", "variables.unfilledWebhooks", "No new entry is left without a caBundle unless cainjector will fill it."},
	{"not-owner", "variables.isWriter", "Only a writer of the mapping may write a configuration it claims."},
}

// Explain lists each matchCondition, variable and validation of p, in the
// policy's order, with the guarantee it enforces; an expression the tables
// do not know is listed with an empty Guarantee.
func Explain(p *admv1.ValidatingAdmissionPolicy) []Explanation {
	var out []Explanation
	for _, c := range p.Spec.MatchConditions {
		out = append(out, Explanation{Field: "matchConditions", Name: c.Name, Guarantee: conditionGuarantees[c.Name], Expression: c.Expression})
	}
	for _, v := range p.Spec.Variables {
		out = append(out, Explanation{Field: "variables", Name: v.Name, Guarantee: variableGuarantees[v.Name], Expression: v.Expression})
	}
	for _, v := range p.Spec.Validations {
		e := Explanation{Field: "validations", Expression: v.Expression}
		for _, g := range validationGuarantees {
			if strings.Contains(v.Expression, g.reads) {
				e.Name, e.Guarantee = g.rule, g.guarantee
				break
			}
		}
		out = append(out, e)
	}
	return out
}
