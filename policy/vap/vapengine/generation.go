package vapengine

import (
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
)

// storedGeneration is what kube-apiserver stores as a webhook
// configuration's generation when it creates one (PrepareForCreate).
const storedGeneration = 1

// withGenerations returns the objects of a webhook configuration's write
// with the generations kube-apiserver gives them before validating
// admission sees them: the stored object's (storedGeneration when the
// caller set none, as every object kube-apiserver stored has one), and for
// an UPDATE the request's object the stored generation, one more when the
// webhooks differ (rest.BeforeUpdate overwrites what the request carries,
// then the kind's PrepareForUpdate compares the webhooks). Generated
// policies read it to skip writes that leave the webhooks alone, so an
// engine that skipped this step would decide writes kube-apiserver never
// sees. Other kinds, and objects whose webhooks cannot be read, are
// returned as they are; the caller's objects are never modified.
func withGenerations(op admission.Operation, obj, old runtime.Object) (runtime.Object, runtime.Object) {
	if old == nil || !isWebhookConfiguration(obj, old) {
		return obj, old
	}
	if m, err := meta.Accessor(old); err != nil || m.GetGeneration() == 0 {
		if err != nil {
			return obj, old
		}
		old = old.DeepCopyObject()
		setGeneration(old, storedGeneration)
	}
	if op != admission.Update || obj == nil {
		return obj, old
	}
	newHooks, okNew := webhooksOf(obj)
	oldHooks, okOld := webhooksOf(old)
	if !okNew || !okOld {
		return obj, old
	}
	gen := generationOf(old)
	if !reflect.DeepEqual(newHooks, oldHooks) {
		gen++
	}
	obj = obj.DeepCopyObject()
	setGeneration(obj, gen)
	return obj, old
}

// isWebhookConfiguration: the write's object (or the stored one) is a
// mutating or validating webhook configuration, whose PrepareForUpdate sets
// the generation from the webhooks.
func isWebhookConfiguration(obj, old runtime.Object) bool {
	gvk, _ := kindOf(obj, old)
	return gvk.Group == ValidatingGVK.Group && (gvk.Kind == "ValidatingWebhookConfiguration" || gvk.Kind == "MutatingWebhookConfiguration")
}

// webhooksOf is the object's webhooks in unstructured form, so that typed
// and unstructured objects compare alike; false when it has no metadata
// to carry a generation.
func webhooksOf(obj runtime.Object) (any, bool) {
	if _, err := meta.Accessor(obj); err != nil {
		return nil, false
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, false
	}
	return u["webhooks"], true
}

// generationOf and setGeneration read and write the generation of an
// object that has metadata (checked by the caller).
func generationOf(obj runtime.Object) int64 {
	m, _ := meta.Accessor(obj)
	return m.GetGeneration()
}

func setGeneration(obj runtime.Object, gen int64) {
	m, _ := meta.Accessor(obj)
	m.SetGeneration(gen)
}
