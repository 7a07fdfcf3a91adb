package vapengine

import (
	"testing"

	"github.com/stretchr/testify/assert"
	admv1 "k8s.io/api/admissionregistration/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
)

// Test_withGenerations: the engine's objects carry the generations
// kube-apiserver gives them before validating admission, whatever the
// request sent, and the caller's objects are left as they were.
func Test_withGenerations(t *testing.T) {
	config := func(gen int64, timeout int32) *admv1.ValidatingWebhookConfiguration {
		return &admv1.ValidatingWebhookConfiguration{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
			ObjectMeta: metav1.ObjectMeta{Name: "app", Generation: gen},
			Webhooks:   []admv1.ValidatingWebhook{{Name: "a.app.io", TimeoutSeconds: new(timeout)}},
		}
	}
	annotated := func(c *admv1.ValidatingWebhookConfiguration) *admv1.ValidatingWebhookConfiguration {
		c.Annotations = map[string]string{"example.io/touched": "yes"}
		return c
	}
	crd := func(gen int64) *apiextv1.CustomResourceDefinition {
		return &apiextv1.CustomResourceDefinition{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
			ObjectMeta: metav1.ObjectMeta{Name: "things.app.io", Generation: gen},
		}
	}
	cases := map[string]struct {
		op               admission.Operation
		obj, old         runtime.Object
		wantObj, wantOld int64
		objNil, oldNil   bool
	}{
		"if an UPDATE changes only an annotation, the object keeps the stored generation": {
			op: admission.Update, obj: annotated(config(3, 10)), old: config(3, 10), wantObj: 3, wantOld: 3},
		"if an UPDATE changes an entry, the object gets the stored generation plus one": {
			op: admission.Update, obj: config(3, 11), old: config(3, 10), wantObj: 4, wantOld: 3},
		"if the request sends the stored generation and changes an entry, it is overwritten": {
			op: admission.Update, obj: config(7, 11), old: config(7, 10), wantObj: 8, wantOld: 7},
		"if the request sends another generation and changes nothing, it is overwritten": {
			op: admission.Update, obj: config(9, 10), old: config(2, 10), wantObj: 2, wantOld: 2},
		"if the stored object has no generation, it has the one kube-apiserver stores at creation": {
			op: admission.Update, obj: config(0, 10), old: config(0, 10), wantObj: 1, wantOld: 1},
		"if the write is a CREATE, the object is as sent": {
			op: admission.Create, obj: config(0, 10), wantObj: 0, oldNil: true},
		"if the write is a DELETE, the stored object has its generation": {
			op: admission.Delete, old: config(5, 10), wantOld: 5, objNil: true},
		"if the object is not a webhook configuration, nothing is set": {
			op: admission.Update, obj: crd(0), old: crd(0), wantObj: 0, wantOld: 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var objBefore, oldBefore runtime.Object
			if c.obj != nil {
				objBefore = c.obj.DeepCopyObject()
			}
			if c.old != nil {
				oldBefore = c.old.DeepCopyObject()
			}
			obj, old := withGenerations(c.op, c.obj, c.old)
			assert.Equal(t, objBefore, c.obj, "the caller's object is modified")
			assert.Equal(t, oldBefore, c.old, "the caller's stored object is modified")
			if c.objNil {
				assert.Nil(t, obj)
			} else {
				assert.Equal(t, c.wantObj, generationOf(obj), "object")
			}
			if c.oldNil {
				assert.Nil(t, old)
			} else {
				assert.Equal(t, c.wantOld, generationOf(old), "stored object")
			}
		})
	}
}
