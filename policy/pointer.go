package policy

import (
	"fmt"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// AnnotationInjectAPIServerCA is cainjector's third annotation: it injects
// kube-apiserver's own CA, which no mapping can name.
const AnnotationInjectAPIServerCA = cmapi.WantInjectAPIServerCAAnnotation

// PointerAnnotations are the annotations that tell cert-manager's cainjector
// which CA to write into an object's caBundles: the CA pointer. Changing
// one moves the trust as surely as writing the caBundle, one reconcile
// later, so the guard decides a change of the pointer as a trust change.
var PointerAnnotations = []string{AnnotationInjectCAFrom, AnnotationInjectCAFromSecret, AnnotationInjectAPIServerCA}

// Pointer is an object's CA pointer: the value of each of
// PointerAnnotations, "" where unset (an empty value points nowhere, as
// cainjector reads it).
type Pointer struct {
	CAFrom, CAFromSecret, APIServerCA string
}

// PointerOf reads the CA pointer from an object's annotations.
func PointerOf(annotations map[string]string) Pointer {
	return Pointer{
		CAFrom:       annotations[AnnotationInjectCAFrom],
		CAFromSecret: annotations[AnnotationInjectCAFromSecret],
		APIServerCA:  annotations[AnnotationInjectAPIServerCA],
	}
}

// IsSet reports whether the pointer names any CA.
func (p Pointer) IsSet() bool { return p != Pointer{} }

// NamesSource reports whether the pointer names a CA the guard can read:
// inject-ca-from or inject-ca-from-secret. inject-apiserver-ca names
// kube-apiserver's own CA, which no CA source holds.
func (p Pointer) NamesSource() bool { return p.CAFrom != "" || p.CAFromSecret != "" }

// PinOf is the pointer a pinned injectedByCertManager source requires; false
// when the source is not injectedByCertManager or not pinned.
func PinOf(ca guardapi.CASource) (Pointer, bool) {
	pin := ca.InjectedByCertManager
	switch {
	case pin == nil:
		return Pointer{}, false
	case pin.Certificate != nil:
		return Pointer{CAFrom: pin.Certificate.Namespace + "/" + pin.Certificate.Name}, true
	case pin.Secret != nil:
		return Pointer{CAFromSecret: pin.Secret.Namespace + "/" + pin.Secret.Name}, true
	}
	return Pointer{}, false
}

// PointerDiff is the first annotation whose value differs between two
// pointers, with both values; "" when they are equal.
func PointerDiff(was, is Pointer) (annotation, old, cur string) {
	switch {
	case was.CAFrom != is.CAFrom:
		return AnnotationInjectCAFrom, was.CAFrom, is.CAFrom
	case was.CAFromSecret != is.CAFromSecret:
		return AnnotationInjectCAFromSecret, was.CAFromSecret, is.CAFromSecret
	case was.APIServerCA != is.APIServerCA:
		return AnnotationInjectAPIServerCA, was.APIServerCA, is.APIServerCA
	}
	return "", "", ""
}

// pointerChanged reports whether the request sets the CA pointer: on an
// UPDATE, any of its annotations added, changed or removed; on a CREATE,
// any set at all. A DELETE moves nothing.
func pointerChanged(in *Input) bool {
	switch in.Operation {
	case OperationUpdate:
		return PointerOf(in.Annotations) != PointerOf(in.newAnnotations())
	case OperationCreate:
		return PointerOf(in.newAnnotations()).IsSet()
	case OperationDelete:
	}
	return false
}

// pointerIsPin reports whether the request's new object points exactly at
// the mapping's pin: then whoever wrote the pointer chose nothing.
func pointerIsPin(ca guardapi.CASource, in *Input) bool {
	pin, ok := PinOf(ca)
	return ok && PointerOf(in.newAnnotations()) == pin
}

// PointerMoves reports whether the request is a trust change through the CA
// pointer under the mapping's CA source: the pointer changes (or a CREATE
// sets one) to anything but the mapping's pin.
func PointerMoves(ca guardapi.CASource, in *Input) bool {
	return pointerChanged(in) && !pointerIsPin(ca, in)
}

// checkPointer decides a writer's change of the CA pointer. Under
// injectedByCertManager the pointer chooses the CA cainjector writes and the
// guard then checks against, so a writer that could move it would choose
// the owner's CA itself, in two steps (the annotation, then cainjector's
// write) where one step (annotation and caBundle together) is denied. A
// pinned mapping's pointer must be the pin; an unpinned one's is its
// creator's choice, fixed from then on. Under any other CA source the
// pointer chooses nothing the guard accepts (cainjector is no writer).
func checkPointer(co *compiledOwner, in *Input) []Violation {
	ca := co.spec.CA
	if ca.InjectedByCertManager == nil || !PointerMoves(ca, in) {
		return nil
	}
	_, pinned := PinOf(ca)
	if !pinned && in.Operation == OperationCreate {
		return nil
	}
	annotation, was, is := PointerDiff(PointerOf(in.Annotations), PointerOf(in.newAnnotations()))
	if in.Operation == OperationCreate {
		annotation, was, is = PointerDiff(Pointer{}, PointerOf(in.newAnnotations()))
	}
	v := Violation{
		Rule:    RuleCAMismatch,
		Field:   "metadata.annotations[" + annotation + "]",
		Summary: "the CA pointer names another CA than the owner's",
		Hint:    fmt.Sprintf("pin the CA in owners[%s].ca.injectedByCertManager and point the annotation at the pin; any other change of it is a break-glass change", co.spec.Name),
	}
	if pin, ok := PinOf(ca); ok {
		v.Detail = fmt.Sprintf("%s is %q where the mapping pins %s; cert-manager's cainjector would write the CA it names", annotation, is, describePointer(pin))
	} else {
		v.Detail = fmt.Sprintf("%s changed from %q to %q; the CA cert-manager's cainjector writes is fixed when the object is created", annotation, was, is)
	}
	return []Violation{v}
}

// describePointer names the one annotation a pin sets, with its value.
func describePointer(p Pointer) string {
	a, _, v := PointerDiff(Pointer{}, p)
	return fmt.Sprintf("%s: %s", a, v)
}
