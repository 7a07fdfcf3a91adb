package vap

import (
	"fmt"
	"strings"
)

// The early exit of an ordinary write.
//
// Most writes of a guarded configuration are its writers' own and leave
// every caBundle alone: a label, a rule, a timeout, or nothing at all while
// cainjector keeps the old CA merged beside the new one. No rule of a policy
// can fail for such a write: the subject is a writer (not-owner passes),
// every entry keeps its name and position (the entry rules pass), every
// caBundle is the owner's CA or the stored one (the rotation rule allows
// both) and, under injectedByCertManager, the CA pointer stays where it
// was. A matchCondition that skips the policy for exactly those writes
// costs them a pass or two over the entries instead of the whole policy,
// whose lookups of each entry in the stored object grow with the square of
// the entries. Every other request (a non-writer's, a CREATE or DELETE
// where the part checks entries, a write that changes an entry, the
// pointer, or a caBundle to anything but the CA) evaluates the policy whole.
//
// The same holds for a writer's rotation when every stored entry holds one
// caBundle K (uniformRotation): each entry that becomes K, the CA, or K
// followed by the CA passes the rotation rule, so cainjector's merge of
// the new CA into every entry is skipped too, after one pass over each
// object, instead of a lookup of every entry in the stored object.
//
// Before any of that, the cheapest test: kube-apiserver itself says whether
// the entries changed. Its update path (rest.BeforeUpdate) copies the stored
// generation into the request's object, and a webhook configuration's
// PrepareForUpdate adds one when the webhooks differ in any field; both run
// before validating admission. So an UPDATE whose generation is the stored
// one changed labels, annotations or nothing at all: every entry, name and
// caBundle is as stored, and a writer's such write is skipped reading one
// field of each object (with the pointer check under
// injectedByCertManager, as the pointer is an annotation). Nothing a client
// sends can forge it: BeforeUpdate overwrites the generation the request
// carries.
//
// Each part skips on what its own rules read: partOwner (not-owner, the
// entry rules, the pointer) on names and the pointer, and never on a CA;
// partCA (caBundles only) on every caBundle being the CA without reading
// the stored object, else on every caBundle kept; partAll on both, and on
// a uniform rotation.

// bundleOf is CEL for the caBundle of entry e as base64 text ("" when
// absent).
func bundleOf(e string) string {
	return fmt.Sprintf(`(has(%[1]s.clientConfig) && has(%[1]s.clientConfig.caBundle) ? string(%[1]s.clientConfig.caBundle) : "")`, e)
}

// uniformRotation is CEL that is true when every stored entry holds the
// same caBundle K (the common case: one writer wrote them all) and every
// entry of the request's object holds K, the CA, or K followed by the CA
// as a merging writer writes it: each entry then passes the rotation rule
// (unchanged, current, or merged; mergedAfterOf), and the check costs a
// pass over each list and one merged text, not a lookup of every entry in
// the stored object (which grows with the square of the entries, and put
// cainjector's merge of a few hundred entries over kube-apiserver's cost
// limit). "false" when the CA literal is unknown. Only for a literal CA:
// a param's shifted texts would be computed in CEL on every write.
//
// Under the CA Secret param (part partCA) it reads the param's CA and
// holds only while that is the CA the guard synced, whose shifted texts it
// holds as literals; another CA (a rotation the guard has not synced yet)
// is checked by the policy's variables (uniformRotationVariable).
func (r rotation) uniformRotation(part policyPart) string {
	if len(r.ca.PEM) == 0 {
		return "false"
	}
	canMerge := strings.HasPrefix(string(r.ca.PEM), pemHeader)
	bind := `[` + CELString(r.literal()) + `].all(ca, `
	if part == partCA {
		bind = `[` + r.caExpression(part) + `].all(ca, ca == ` + CELString(r.literal()) + ` && `
	}
	return `size(oldObject.webhooks) > 0 && ` + bind +
		uniformUnder("ca", CELString("Ci0t"+shiftedText(r.ca.PEM, 2)), CELString("LQot"+shiftedText(r.ca.PEM, 1)), "", canMerge) + `)`
}

// uniformRotationVariable is uniformRotation as a policy variable, for the
// writes the matchCondition could not skip: under a CA Secret param (whose
// shifted texts kube-apiserver derives once per request, as the variables
// caShift1 and caShift2), and under a literal CA too large for the
// matchCondition. badWebhooks is empty when it holds, without the lookup
// of each entry in the stored object. sameNames is CEL that is true when
// every entry keeps its name and position: a new or renamed entry has no
// stored bundle to keep or merge after, and must be checked alone.
func uniformRotationVariable(sameNames string) string {
	return `variables.ca != "" && ` + sameNames + ` && size(oldObject.webhooks) > 0 && ` +
		uniformUnder("variables.ca", `"Ci0t" + variables.caShift2`, `"LQot" + variables.caShift1`, ` && `+caStartsWithHeader, true)
}

// uniformUnder is the uniform rotation of the CA whose base64 text is the
// CEL expression ca: every stored entry holds the first one's bundle K,
// and every entry of the request's object holds K, the CA, or (canMerge)
// K followed by the CA. The merged text is K's whole groups, then the CA
// as it continues K's last group (mergedAfterOf): afterOne or afterTwo
// for K's length modulo 3 (mergedTail); mergeIf is CEL the merge also
// requires ("" for none).
func uniformUnder(ca, afterOne, afterTwo, mergeIf string, canMerge bool) string {
	merge := "false"
	if canMerge {
		// K's length in bytes, bound once to q (see mergedAfterOf).
		merged := `k.substring(0, q / 3 * 4) + ` + mergedTail("q", ca, afterOne, afterTwo)
		merge = `k != "" && ` + endsWithFooter("k") + mergeIf + ` && [` + byteLength("k") + `].all(q, [` + merged + `].all(m, object.webhooks.all(w, ` + bundleOf("w") + ` in [k, ` + ca + `, m])))`
	}
	return `[` + bundleOf("oldObject.webhooks[0]") + `].all(k, oldObject.webhooks.all(o, ` + bundleOf("o") + ` == k) && ` +
		`(object.webhooks.all(w, ` + bundleOf("w") + ` in [k, ` + ca + `]) || ` + merge + `))`
}

// sameEntryNames is CEL that is true for an UPDATE that keeps every entry's
// name and position.
const sameEntryNames = `request.operation == "UPDATE" && object != null && oldObject != null && ` +
	`has(object.webhooks) && has(oldObject.webhooks) && object.webhooks.map(e, e.name) == oldObject.webhooks.map(e, e.name)`

// sameWebhooks is CEL that is true for an UPDATE that leaves the webhooks
// as stored, read from the generation kube-apiserver computed for it.
const sameWebhooks = `request.operation == "UPDATE" && object != null && oldObject != null && ` + sameGeneration

// sameGeneration is sameWebhooks for a caller that knows the request is
// an UPDATE.
const sameGeneration = `has(object.metadata.generation) && has(oldObject.metadata.generation) && object.metadata.generation == oldObject.metadata.generation`

// sameBundles is CEL that is true when, entry by entry, the caBundles of
// the request's object are the stored ones ("" when absent: a zero-length
// caBundle is omitted, and no other encodes to "").
var sameBundles = `object.webhooks.map(e, ` + bundleOf("e") + `) == oldObject.webhooks.map(e, ` + bundleOf("e") + `)`

// allBundlesAre is CEL that is true when every entry of the request's
// object carries the caBundle whose base64 text is the CEL expression ca.
// A matchCondition has no variables: ca is evaluated once and bound to a
// name by a macro over the one-element list [ca], not once per entry (a
// param's key is a lookup and a conversion).
func allBundlesAre(ca string) string {
	return fmt.Sprintf(`object != null && has(object.webhooks) && [%s].all(ca, object.webhooks.all(e, has(e.clientConfig) && has(e.clientConfig.caBundle) && string(e.clientConfig.caBundle) == ca))`, ca)
}

// writerKeepsTrust is the matchCondition that skips part for a writer's
// write its rules cannot deny; false when the mapping has no writers
// (every write is then denied not-owner).
func (m mappingPolicy) writerKeepsTrust(part policyPart) (string, bool) {
	isWriter, ok := SubjectsExpression(m.spec.OwnerWriters(m.owner))
	if !ok {
		return "", false
	}
	// The writer first: a non-writer's write evaluates the policy whole
	// and need not pay for the entries here too.
	skip := func(keeps string) string { return `!((` + isWriter + `) && (` + keeps + `))` }
	switch part {
	case partCA:
	case partOwner:
		return skip(`(` + sameWebhooks + ` || ` + sameEntryNames + `)` + m.samePointer()), true
	case partAll:
	}
	keeps := func(uniform string) string {
		if part == partCA {
			return sameWebhooks + ` || ` + allBundlesAre(m.rotation.caExpression(part)) + ` || ` + sameEntryNames + ` && (` + sameBundles + ` || ` + uniform + `)`
		}
		return keepsEntries(allBundlesAre(m.rotation.caExpression(part))+` || `+uniform+` || `+sameBundles) + m.samePointer()
	}
	// The uniform rotation holds the CA three times more (as it is and
	// shifted by one and two bytes): with a CA so large that the expression
	// would pass kube-apiserver's limit, the policy goes without it rather
	// than be refused.
	if cond := skip(keeps(m.rotation.uniformRotation(part))); len(cond) <= maxExpressionCodePoints {
		return cond, true
	}
	return skip(keeps("false")), true
}

// maxExpressionCodePoints is the longest CEL expression kube-apiserver
// accepts in a policy, in code points ("expression code point size exceeds
// limit"); the generated expressions are ASCII, so bytes.
const maxExpressionCodePoints = 100000

// samePointer requires the CA pointer unchanged under injectedByCertManager.
func (m mappingPolicy) samePointer() string {
	if !m.injected() {
		return ""
	}
	return ` && ` + pointerOf("object") + ` == ` + pointerOf("oldObject")
}
