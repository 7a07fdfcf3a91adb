package policysync

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// generatedHere reports whether obj is an object this guard generated,
// whatever its labels say: the managed-by label is a filter for the watch,
// not an identity (anyone who may edit the object may remove it, and every
// release of the guard sets the same one). An object is this guard's when
//   - it is owned by this guard's anchor ClusterRole (by name: an anchor
//     deleted and created again has a new uid, and the pass moves the
//     reference on to it), or
//   - it has no owner at all and the guard's field manager applied it (an
//     object written before an anchor was set, or by a guard without one).
//
// It decides what the guard deletes as an orphan (a name no mapping
// generates any more): another release's objects are owned by its own
// anchor, so they are never deleted as this guard's. An object at a name
// the configuration generates is the guard's by that name (unwatched).
// Two releases without an anchor cannot be told apart and still fight.
func generatedHere(obj client.Object, anchor string) bool {
	refs := obj.GetOwnerReferences()
	for _, r := range refs {
		if anchor != "" && r.Kind == "ClusterRole" && r.Name == anchor {
			return true
		}
	}
	if len(refs) > 0 {
		return false
	}
	for _, f := range obj.GetManagedFields() {
		if f.Manager == FieldManager && f.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}
