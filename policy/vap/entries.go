package vap

import (
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/webhook-guard/webhook-guard/policy"
)

// The entry rule in CEL: the caBundle rule that needs no CA, decided as the
// static shape decides it (policy.UnfilledEntries).
//
// An entry without a caBundle (absent: a zero-length caBundle is omitted
// from the object CEL sees) on a CREATE, or new or renamed in an UPDATE,
// makes kube-apiserver trust its system roots for the webhook. A writer may
// leave one only while cainjector will fill it: the mapping's CA is
// injectedByCertManager, the guard's last sync read it, and the new
// object's annotation names a source (the pin, when the mapping pins one;
// fillComing in pointer.go).
//
// An entry the writer removes breaks no rule: it takes its trust away with
// it (kube-apiserver stops calling that endpoint), and writers remove
// entries in normal operation. A rename is a removal plus a new entry, held
// to the rule above and, for its caBundle, to the rotation rule.
//
// It is a writers' rule: a non-writer is denied not-owner alone.

const (
	// oldHasEntry says entry w of the request's object has a stored entry
	// of the same name.
	oldHasEntry = `(request.operation == "UPDATE" && oldObject != null && has(oldObject.webhooks) && oldObject.webhooks.exists(o, o.name == w.name))`
	// unfilledWebhooks are the entries of the object with no caBundle and
	// no stored entry of their name.
	unfilledWebhooks = `object != null && has(object.webhooks) ? object.webhooks.filter(w, !` + newHasBundle + ` && !` + oldHasEntry + `).map(w, w.name) : []`
)

// injected says the mapping's CA is injectedByCertManager: only then can a
// fill be coming.
func (m mappingPolicy) injected() bool { return m.owner.CA.InjectedByCertManager != nil }

// entryVariables are the variables of the entry rule.
func (m mappingPolicy) entryVariables() []admv1.Variable {
	vars := []admv1.Variable{
		// sameNames says the request is an UPDATE that keeps every entry's
		// name and position: then no entry is new, so the rule cannot
		// fail. It is the common write (a caBundle or another field
		// changed), and one comparison of the name lists decides it, so
		// the rule costs an ordinary write one pass over the names, not a
		// lookup of each entry in the other object. The changes-trust
		// matchCondition, which cannot read variables, spells the same
		// piece.
		{Name: "sameNames", Expression: sameEntryNames},
		{Name: "unfilledWebhooks", Expression: unfilledWebhooks},
	}
	return append(vars, m.fillVariables()...)
}

// fillVariables decide whether cainjector will fill an empty caBundle, and
// whether a writer moves the CA pointer: only under injectedByCertManager
// (pointer.go).
func (m mappingPolicy) fillVariables() []admv1.Variable {
	if !m.injected() {
		return nil
	}
	return append(m.pointerVariables(), admv1.Variable{Name: "fillComing", Expression: m.fillComing()})
}

// entriesKept is CEL that is true when the entry rule holds. On an
// ordinary write sameNames decides it alone.
func (m mappingPolicy) entriesKept() string {
	unfilled := `size(variables.unfilledWebhooks) == 0`
	if m.injected() {
		unfilled = `(` + unfilled + ` || variables.fillComing)`
	}
	return `variables.sameNames || ` + unfilled
}

// entriesMessage is the entry rule's message. It names the rule and the
// subject but not the entries: kube-apiserver evaluates every
// messageExpression of a policy on every request, allowed ones included, so
// a message that listed the entries would pay for the rule's lookup on
// every ordinary write (which otherwise pays only for sameNames).
func (m mappingPolicy) entriesMessage() string {
	return m.prefix() + ` + ` + CELString(string(policy.RuleCAMismatch)+": "+entriesDetail)
}

// entriesDetail words the entry rule as the static shape words it.
const entriesDetail = "webhooks: an entry of a CREATE, or a new or renamed entry, has no caBundle " +
	"(kube-apiserver would trust its system roots for it, so any host with a publicly trusted certificate could serve it); " +
	"hint: " + policy.UnfilledHint

// entryValidation is the entry rule as a validation of its own, for the
// policy that checks no caBundle against a CA (partOwner). partAll folds
// it into its caBundle validation instead, whose message evaluates
// badWebhooks anyway, so that an ordinary write there pays for sameNames
// and nothing else.
func (m mappingPolicy) entryValidation() admv1.Validation {
	return admv1.Validation{
		Expression:        `!variables.isWriter || ` + m.entriesKept(),
		Message:           fallbackMessage(policy.RuleCAMismatch, m.owner.Name),
		MessageExpression: m.entriesMessage(),
		Reason:            ptr.To(metav1.StatusReasonForbidden),
	}
}
