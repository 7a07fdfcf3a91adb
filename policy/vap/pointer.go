package vap

import (
	"fmt"
	"slices"
	"strings"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/webhook-guard/webhook-guard/policy"
)

// The CA pointer and the endpoint in CEL, decided as the static shape
// decides them (policy.PointerMoves, policy.EndpointMoves, policy.FillComing):
//
//   - The CA pointer is cainjector's three annotations. Under
//     injectedByCertManager it chooses the CA cainjector writes and the
//     policy then accepts, so a writer may not move it (ca-mismatch): with a
//     pin it must be exactly the pin, without one it is fixed when the
//     object is created. The pin is a literal in the policy.
//   - For a CRD or an APIService a non-writer may write what is not the
//     trust, but neither the pointer (off the pin) nor the endpoint the
//     entry's traffic goes to (not-owner), and a CREATE of the object with
//     the entry chooses the endpoint.
//   - An entry without a caBundle passes only while a fill is coming: the
//     subject is a writer, the new object's pointer names a source the
//     guard reads (the pin, when pinned), and the guard's last sync found
//     the owner's CA.
//
// Each comparison is a few map lookups and one list comparison, and it is
// generated only where it can decide something: the pointer of a webhook
// configuration only under injectedByCertManager, the endpoint only for the
// two kinds whose trust alone a mapping owns.

// noPointer is the pointer of an object without cainjector's annotations.
var noPointer = celList(make([]string, len(policy.PointerAnnotations)))

// pointerOf is CEL for the CA pointer of the object obj: the values of
// policy.PointerAnnotations in order, "" where unset.
func pointerOf(obj string) string {
	return fmt.Sprintf(`(%[1]s != null && has(%[1]s.metadata) && has(%[1]s.metadata.annotations) ? `+
		`%[2]s.map(k, k in %[1]s.metadata.annotations ? %[1]s.metadata.annotations[k] : "") : %[3]s)`,
		obj, celList(policy.PointerAnnotations), noPointer)
}

// pointerLiteral is p in pointerOf's form.
func pointerLiteral(p policy.Pointer) string {
	return celList([]string{p.CAFrom, p.CAFromSecret, p.APIServerCA})
}

// pin is the mapping's pinned pointer, if any.
func (m mappingPolicy) pin() (policy.Pointer, bool) { return policy.PinOf(m.owner.CA) }

// pointerVariables: pointer is the new object's pointer; pointerMoves says
// the request sets a pointer other than the mapping's pin (on an UPDATE,
// changes it; on a CREATE, sets one), policy.PointerMoves.
func (m mappingPolicy) pointerVariables() []admv1.Variable {
	moves := `request.operation != "DELETE" && variables.pointer != (request.operation == "UPDATE" ? ` + pointerOf("oldObject") + ` : ` + noPointer + `)`
	if pin, ok := m.pin(); ok {
		moves += ` && variables.pointer != ` + pointerLiteral(pin)
	}
	return []admv1.Variable{
		{Name: "pointer", Expression: `request.operation == "DELETE" ? ` + noPointer + ` : ` + pointerOf("object")},
		{Name: "pointerMoves", Expression: moves},
	}
}

// fillComing is CEL that is true while cainjector will fill the object's
// empty caBundles, as policy.FillComing and the decision's fill rule decide
// it: never without injectedByCertManager or without a CA the guard could
// read at its last sync (an annotation naming a missing source would leave
// the entry empty, trusting the system roots, for good); only for a writer
// (a non-writer's entry names an endpoint, which is not-owner); under a
// pin, when the new object points exactly at the pin; else when it points
// at a source the guard resolved that CA from (CA.Pointers;
// inject-apiserver-ca names none the guard reads).
func (m mappingPolicy) fillComing() string {
	if !m.injected() || len(m.ca.PEM) == 0 {
		return "false"
	}
	if pin, ok := m.pin(); ok {
		return `variables.isWriter && variables.pointer == ` + pointerLiteral(pin)
	}
	var synced []string
	for _, p := range m.ca.Pointers {
		if p.NamesSource() && !slices.Contains(synced, pointerLiteral(p)) {
			synced = append(synced, pointerLiteral(p))
		}
	}
	if len(synced) == 0 {
		return "false"
	}
	return `variables.isWriter && variables.pointer in [` + strings.Join(synced, ", ") + `]`
}

// pointerValidation is rule 2 of the pointer: a writer's move of the
// pointer is ca-mismatch under injectedByCertManager; without a pin a
// CREATE chooses it (the creator is a writer).
func (m mappingPolicy) pointerValidation() admv1.Validation {
	expr := `!variables.isWriter || !variables.pointerMoves`
	var detail string
	if pin, ok := m.pin(); ok {
		a, _, v := policy.PointerDiff(policy.Pointer{}, pin)
		detail = fmt.Sprintf("the CA pointer (%s) is not the mapping's pin %s: %s; cert-manager's cainjector would write the CA it names",
			strings.Join(policy.PointerAnnotations, ", "), a, v)
	} else {
		expr += ` || request.operation == "CREATE"`
		detail = fmt.Sprintf("the CA pointer (%s) changed; the CA cert-manager's cainjector writes is fixed when the object is created",
			strings.Join(policy.PointerAnnotations, ", "))
	}
	return admv1.Validation{
		Expression: expr,
		Message:    fallbackMessage(policy.RuleCAMismatch, m.owner.Name),
		MessageExpression: m.prefix() + ` + ` + CELString(fmt.Sprintf("%s: metadata.annotations: %s; hint: pin the CA in owners[%s].ca.injectedByCertManager and point the annotation at the pin; any other change of it is a break-glass change",
			policy.RuleCAMismatch, detail, m.owner.Name)),
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}
}

// endpointMoves is CEL that is true when the request chooses where the
// entry's traffic goes (policy.EndpointMoves): a CREATE of an object with
// the entry (the guard keeps nothing across a DELETE, so a recreated
// object's endpoint is a new choice), or an UPDATE whose new object has
// the entry where the stored one had none (a CRD switched to strategy
// Webhook) or another endpoint. A removed entry is decided by its
// caBundle.
func (k trustKind) endpointMoves() string {
	return `variables.hasEntry && (request.operation == "CREATE" || !variables.hadEntry || !(` + k.sameEndpoint("object", "oldObject") + `))`
}

// crdSameEndpoint is CEL that is true when CRDs a and b, whose conversion
// webhooks both exist, call the same endpoint: the same url and service
// (namespace, name, path, port), each an optional value, so that an
// absent field equals only an absent one.
func crdSameEndpoint(a, b string) string {
	cc := func(o string) string { return o + ".spec.conversion.webhook.?clientConfig" }
	return fmt.Sprintf(`%[1]s.?url == %[2]s.?url && %[1]s.?service == %[2]s.?service`, cc(a), cc(b))
}

// apiServiceSameEndpoint is CEL that is true when APIServices a and b,
// which both name a service, name the same one (namespace, name, port).
func apiServiceSameEndpoint(a, b string) string {
	return fmt.Sprintf(`%[1]s.spec.service == %[2]s.spec.service`, a, b)
}
