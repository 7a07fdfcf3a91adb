package policysync

import (
	"context"
	"encoding/json"
	"fmt"

	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	admv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager is the one field manager every write of the syncer is
// applied under: the fields it lists in a generated object are the
// guard's, and a change of one of them by anyone else is a conflict at the
// guard's next apply.
const FieldManager = "webhook-guard"

// applyObject makes the live object hold desired in every field the guard
// owns, with server-side apply, and nothing else in its spec. live is the
// object as the watch shows it (nil when it shows none). An object whose
// fields owned by the guard already hold desired is not applied: an
// unchanged cluster costs no request. A conflict (another manager changed
// a field the guard owns) is counted and reported, then applied again with
// force; fields another manager added to the spec are removed
// (removeForeign): the guard always wins on its own objects.
func (s *Syncer) applyObject(ctx context.Context, mapping, kind string, desired, live client.Object) error {
	if live == nil {
		found, err := s.unwatched(ctx, kind, desired)
		if err != nil {
			return err
		}
		live = found
	}
	same, foreign, err := s.compare(desired, live)
	if err != nil {
		return fmt.Errorf("%s %s: %w", kind, desired.GetName(), err)
	}
	if !same {
		if err := s.applyForced(ctx, mapping, kind, desired, live); err != nil {
			return err
		}
	}
	if foreign && same && s.isSettled(kind, live) {
		// Another manager's fields were found to hold the generated
		// values at this version: removing them again would cost a Get
		// and an Update per pass for nothing.
		return nil
	}
	if foreign {
		return s.removeForeign(ctx, mapping, kind, desired)
	}
	return nil
}

// compare reports whether the fields of live the guard owns hold desired
// (false when there is no live object), and whether another manager holds
// fields of its spec the guard does not own (foreignSpecFields).
func (s *Syncer) compare(desired, live client.Object) (same, foreign bool, err error) {
	if live == nil {
		return false, false, nil
	}
	want, owned, err := applyConfigs(desired, live)
	if err != nil {
		return false, false, err
	}
	others, err := foreignSpecFields(live)
	if err != nil {
		return false, false, err
	}
	return equality.Semantic.DeepEqual(want, owned), len(others) > 0, nil
}

// applyForced applies desired; on a conflict it reports the managers it
// is with and applies again with force.
func (s *Syncer) applyForced(ctx context.Context, mapping, kind string, desired, live client.Object) error {
	rv, err := s.apply(ctx, desired, false)
	if managers := conflictManagers(err); managers != nil {
		s.reportConflict(mapping, kind, desired.GetName(), managers, err)
		rv, err = s.apply(ctx, desired, true)
	}
	if err != nil {
		return fmt.Errorf("apply %s %s: %w", kind, desired.GetName(), err)
	}
	verb := VerbCreate
	if live != nil {
		verb = VerbUpdate
		if rv == live.GetResourceVersion() {
			s.Log.V(1).Info("policy shape: applied a generated object; kube-apiserver changed nothing", "kind", kind, "name", desired.GetName())
			return nil
		}
	}
	s.wrote(kind, verb, desired.GetName(), rv)
	return nil
}

// unwatched reads an object the watch does not show straight from the API
// server: nil when it does not exist (or is being deleted), else the
// object, which the apply makes the generated one again. The name is one
// the guard's configuration generates (vapname), unique to one mapping, so
// the object at it is the guard's whatever its labels, owner references
// and managed fields say: an editor who clears them all (the watch, which
// filters on the managed-by label, then no longer shows it) has not made
// it someone else's, and refusing it would leave the editor's version,
// a binding switched to Audit say, in force.
func (s *Syncer) unwatched(ctx context.Context, kind string, desired client.Object) (client.Object, error) {
	obj, ok := desired.DeepCopyObject().(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s %s is not an object", kind, desired.GetName())
	}
	err := s.Reader.Get(ctx, types.NamespacedName{Name: desired.GetName()}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil //nolint:nilnil // no object of that name: the apply creates it
	case err != nil:
		return nil, fmt.Errorf("get %s %s: %w", kind, desired.GetName(), err)
	}
	return obj, nil
}

// apply applies desired under FieldManager and returns the
// resourceVersion kube-apiserver answered with.
func (s *Syncer) apply(ctx context.Context, desired client.Object, force bool) (string, error) {
	ac, meta, err := applyConfigOf(desired)
	if err != nil {
		return "", err
	}
	opts := []client.ApplyOption{client.FieldOwner(FieldManager)}
	if force {
		opts = append(opts, client.ForceOwnership)
	}
	if err := s.Client.Apply(ctx, ac, opts...); err != nil {
		return "", err
	}
	if m := meta(); m != nil && m.ResourceVersion != nil {
		return *m.ResourceVersion, nil
	}
	return "", nil
}

// applyConfigs are desired as the apply configuration the guard sends, and
// the fields of live that the guard owns (its managed fields) in the same
// form: equal, the guard has nothing to apply.
func applyConfigs(desired, live client.Object) (want, owned runtime.ApplyConfiguration, err error) {
	want, _, err = applyConfigOf(desired)
	if err != nil {
		return nil, nil, err
	}
	switch l := live.(type) {
	case *admv1.ValidatingAdmissionPolicy:
		var p *admv1ac.ValidatingAdmissionPolicyApplyConfiguration
		p, err = admv1ac.ExtractValidatingAdmissionPolicy(l, FieldManager)
		if p != nil {
			// Status is kube-apiserver's, never applied (applyConfigOf).
			p.Status = nil
		}
		owned = p
	case *admv1.ValidatingAdmissionPolicyBinding:
		owned, err = admv1ac.ExtractValidatingAdmissionPolicyBinding(l, FieldManager)
	default:
		err = fmt.Errorf("the syncer does not generate %T", live)
	}
	return want, owned, err
}

// applyConfigOf is a generated object as an apply configuration (every
// field the generator sets, nothing else), and a function returning its
// metadata, which holds kube-apiserver's answer once applied.
func applyConfigOf(obj client.Object) (runtime.ApplyConfiguration, func() *metav1ac.ObjectMetaApplyConfiguration, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, nil, err
	}
	switch obj.(type) {
	case *admv1.ValidatingAdmissionPolicy:
		ac := &admv1ac.ValidatingAdmissionPolicyApplyConfiguration{}
		if err := json.Unmarshal(raw, ac); err != nil {
			return nil, nil, err
		}
		// Status is kube-apiserver's (the type checker's), never applied.
		ac.Status = nil
		return ac, func() *metav1ac.ObjectMetaApplyConfiguration { return ac.ObjectMetaApplyConfiguration }, nil
	case *admv1.ValidatingAdmissionPolicyBinding:
		ac := &admv1ac.ValidatingAdmissionPolicyBindingApplyConfiguration{}
		if err := json.Unmarshal(raw, ac); err != nil {
			return nil, nil, err
		}
		return ac, func() *metav1ac.ObjectMetaApplyConfiguration { return ac.ObjectMetaApplyConfiguration }, nil
	}
	return nil, nil, fmt.Errorf("the syncer does not generate %T", obj)
}

// wrote counts and logs a write that changed the object, once per
// resourceVersion: an apply answered with the resourceVersion of the
// guard's own last write changed nothing.
func (s *Syncer) wrote(kind, verb, name, rv string) {
	key := kind + "/" + name
	s.mu.Lock()
	seen := rv != "" && s.written[key] == rv
	s.written[key] = rv
	s.mu.Unlock()
	if seen {
		return
	}
	s.Metrics.Writes.WithLabelValues(kind, verb).Inc()
	s.Log.Info("policy shape: wrote a generated object", "kind", kind, "name", name, "verb", verb, "resourceVersion", rv)
}

// delete deletes a generated object no mapping produces anymore, as the
// watch showed it (a newer version is left for the next pass).
func (s *Syncer) delete(ctx context.Context, kind string, obj client.Object) error {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	err := s.Client.Delete(ctx, obj, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete %s %s: %w", kind, obj.GetName(), err)
	}
	s.Metrics.Writes.WithLabelValues(kind, VerbDelete).Inc()
	s.mu.Lock()
	delete(s.written, kind+"/"+obj.GetName())
	delete(s.settled, kind+"/"+obj.GetName())
	s.mu.Unlock()
	s.Log.Info("policy shape: deleted a generated object no mapping produces anymore", "kind", kind, "name", obj.GetName())
	return nil
}
