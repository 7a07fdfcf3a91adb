package policysync

import (
	"context"
	"fmt"
	"maps"
	"slices"

	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// specElement is the spec of a generated object in managed fields.
var specElement = fieldpath.PathElement{FieldName: new("spec")}

// foreignSpecFields are the fields of live's spec that another field
// manager set and the guard does not own, by manager. Server-side apply
// never removes them: an element added to a list or map of the spec that
// the guard does not own wholesale (a matchCondition of a policy, a
// validation action, a selector of a binding) stays through every apply,
// and may switch enforcement off. Fields kube-apiserver defaulted belong to
// no manager and are not foreign.
func foreignSpecFields(live client.Object) (map[string][]string, error) {
	ours := &fieldpath.Set{}
	theirs := map[string]*fieldpath.Set{}
	for _, e := range live.GetManagedFields() {
		if e.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(e.FieldsV1.GetRawReader()); err != nil {
			return nil, fmt.Errorf("managed fields of %s: %w", e.Manager, err)
		}
		spec := set.WithPrefix(specElement)
		if e.Manager == FieldManager {
			ours = ours.Union(spec)
			continue
		}
		if prev, ok := theirs[e.Manager]; ok {
			spec = prev.Union(spec)
		}
		theirs[e.Manager] = spec
	}
	out := map[string][]string{}
	for m, set := range theirs {
		only := set.Difference(ours).Leaves()
		if only.Empty() {
			continue
		}
		for p := range only.All() {
			out[m] = append(out[m], ".spec"+p.String())
		}
		slices.Sort(out[m])
	}
	return out, nil
}

// removeForeign makes the object's spec exactly the generated one when
// another manager holds fields of it the guard does not own: an update of
// the spec as read now (a newer version than the watch's is a conflict,
// retried at the next pass). A change is counted and reported as a fight,
// like an apply conflict.
func (s *Syncer) removeForeign(ctx context.Context, mapping, kind string, desired client.Object) error {
	obj, ok := desired.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("%s %s is not an object", kind, desired.GetName())
	}
	if err := s.Reader.Get(ctx, types.NamespacedName{Name: desired.GetName()}, obj); err != nil {
		return fmt.Errorf("get %s %s: %w", kind, desired.GetName(), err)
	}
	foreign, err := foreignSpecFields(obj)
	if err != nil || len(foreign) == 0 {
		return err
	}
	if err := setSpec(obj, desired); err != nil {
		return err
	}
	before := obj.GetResourceVersion()
	if err := s.Client.Update(ctx, obj, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("update %s %s: %w", kind, desired.GetName(), err)
	}
	if obj.GetResourceVersion() == before {
		// The other managers' fields hold what the guard generates
		// (kube-apiserver's defaults written back): nothing to fight, and
		// kube-apiserver stored nothing, so those managers still own the
		// fields. Until the object changes, the next passes skip it
		// (isSettled): one Get and one Update per object version, not per
		// pass.
		s.settle(kind, obj)
		s.Log.V(1).Info("policy shape: fields other managers own in a generated object hold what the guard generates", "kind", kind, "name", desired.GetName(), "fields", foreign)
		return nil
	}
	managers := slices.Sorted(maps.Keys(foreign))
	var fields []string
	for _, m := range managers {
		fields = append(fields, foreign[m]...)
	}
	s.reportFight(mapping, kind, desired.GetName(), managers, fields, "the guard removed what it does not generate")
	s.wrote(kind, VerbUpdate, obj.GetName(), obj.GetResourceVersion())
	return nil
}

// setSpec sets obj's spec to desired's.
func setSpec(obj, desired client.Object) error {
	switch o := obj.(type) {
	case *admv1.ValidatingAdmissionPolicy:
		if d, ok := desired.(*admv1.ValidatingAdmissionPolicy); ok {
			o.Spec = *d.Spec.DeepCopy()
			return nil
		}
	case *admv1.ValidatingAdmissionPolicyBinding:
		if d, ok := desired.(*admv1.ValidatingAdmissionPolicyBinding); ok {
			o.Spec = *d.Spec.DeepCopy()
			return nil
		}
	}
	return fmt.Errorf("the syncer does not generate %T", obj)
}

// settle notes that obj, at its resourceVersion, holds the generated spec
// although other managers own fields of it.
func (s *Syncer) settle(kind string, obj client.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settled[kind+"/"+obj.GetName()] = obj.GetResourceVersion()
}

// isSettled reports whether live is the version settle noted.
func (s *Syncer) isSettled(kind string, live client.Object) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rv, ok := s.settled[kind+"/"+live.GetName()]
	return ok && rv == live.GetResourceVersion()
}
