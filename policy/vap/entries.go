package vap

import (
	"fmt"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/webhook-guard/webhook-guard/policy"
)

// The entry rules in CEL: the two caBundle rules that need no CA, decided
// as the static shape decides them (policy.UnfilledEntries, and the removed
// entries of policy.ChangedBundles).
//
//   - An entry without a caBundle (absent: a zero-length caBundle is omitted
//     from the object CEL sees) on a CREATE, or new or renamed in an UPDATE,
//     makes kube-apiserver trust its system roots for the webhook. A writer
//     may leave one only while cainjector will fill it: the mapping's CA is
//     injectedByCertManager and the object carries one of cainjector's
//     annotations (read from the stored object on UPDATE, from the created
//     one on CREATE, as the static shape reads them).
//   - An entry that carried a caBundle and is gone from the object (removed,
//     or renamed: names are unique in a configuration) takes its CA away
//     with it, as if emptied.
//
// Both are writers' rules: a non-writer is denied not-owner alone.

const (
	// oldHasEntry says entry w of the request's object has a stored entry
	// of the same name.
	oldHasEntry = `(request.operation == "UPDATE" && oldObject != null && has(oldObject.webhooks) && oldObject.webhooks.exists(o, o.name == w.name))`
	// unfilledWebhooks are the entries of the object with no caBundle and
	// no stored entry of their name.
	unfilledWebhooks = `object != null && has(object.webhooks) ? object.webhooks.filter(w, !` + newHasBundle + ` && !` + oldHasEntry + `).map(w, w.name) : []`
	// newNames are the entry names of the request's object.
	newNames = `object != null && has(object.webhooks) ? object.webhooks.map(w, w.name) : []`
	// removedWebhooks are the stored entries that carried a caBundle and
	// whose name is gone. Entries usually keep their names and order, which
	// one list comparison shows; only otherwise is each stored entry looked
	// up among the new names.
	removedWebhooks = `request.operation == "UPDATE" && oldObject != null && has(oldObject.webhooks) && variables.newNames != oldObject.webhooks.map(o, o.name) ? ` +
		`oldObject.webhooks.filter(o, has(o.clientConfig) && has(o.clientConfig.caBundle) && !(o.name in variables.newNames)).map(o, o.name) : []`
	// storedAnnotations are the annotations a fill is decided on: the
	// stored object's on UPDATE, the created object's on CREATE.
	storedAnnotations = `request.operation == "UPDATE" ? ` +
		`(oldObject != null && has(oldObject.metadata) && has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}) : ` +
		`(object != null && has(object.metadata) && has(object.metadata.annotations) ? object.metadata.annotations : {})`
)

// fillComing is CEL that is true when cainjector will fill the object's
// empty caBundles, as policy.FillComing decides it.
var fillComing = fmt.Sprintf(`(%[1]s in variables.annotations && variables.annotations[%[1]s] != "") || `+
	`(%[2]s in variables.annotations && variables.annotations[%[2]s] != "") || `+
	`(%[3]s in variables.annotations && variables.annotations[%[3]s] == "true")`,
	CELString(policy.AnnotationInjectCAFrom), CELString(policy.AnnotationInjectCAFromSecret), CELString(policy.AnnotationInjectAPIServerCA))

// injected says the mapping's CA is injectedByCertManager: only then can a
// fill be coming.
func (m mappingPolicy) injected() bool { return m.owner.CA.InjectedByCertManager != nil }

// entryVariables are the variables of the entry rules.
func (m mappingPolicy) entryVariables() []admv1.Variable {
	vars := []admv1.Variable{
		{Name: "unfilledWebhooks", Expression: unfilledWebhooks},
		{Name: "newNames", Expression: newNames},
		{Name: "removedWebhooks", Expression: removedWebhooks},
	}
	if m.injected() {
		vars = append(vars,
			admv1.Variable{Name: "annotations", Expression: storedAnnotations},
			admv1.Variable{Name: "fillComing", Expression: fillComing})
	}
	return vars
}

// entryValidations are the entry rules, for writers.
func (m mappingPolicy) entryValidations() []admv1.Validation {
	unfilled := `!variables.isWriter || size(variables.unfilledWebhooks) == 0`
	if m.injected() {
		unfilled += ` || variables.fillComing`
	}
	return []admv1.Validation{
		{
			Expression: unfilled,
			Message:    fallbackMessage(policy.RuleCAMismatch, m.owner.Name),
			MessageExpression: m.prefix() + ` + ` + CELString(string(policy.RuleCAMismatch)+": webhook(s) ") + ` + variables.unfilledWebhooks.join(", ") + ` +
				CELString(" have no caBundle; kube-apiserver would trust its system roots for them, so any host with a publicly trusted certificate could serve them; hint: "+policy.UnfilledHint),
			Reason: ptr.To(metav1.StatusReasonForbidden),
		},
		{
			Expression: `!variables.isWriter || size(variables.removedWebhooks) == 0`,
			Message:    fallbackMessage(policy.RuleCAMismatch, m.owner.Name),
			MessageExpression: m.prefix() + ` + ` + CELString(string(policy.RuleCAMismatch)+": webhooks: the entry(ies) ") + ` + variables.removedWebhooks.join(", ") + ` +
				CELString(", which carried a caBundle, were removed or renamed; that empties their caBundle; hint: keep the entry (and its name) with the owner's CA; removing it is a break-glass change"),
			Reason: ptr.To(metav1.StatusReasonForbidden),
		},
	}
}
