package policysync

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// round applies the objects of a pass, policies first, bindings next, so
// that a binding never points at a policy that does not exist yet. With
// only set, it applies only the objects of those mappings. A refused write
// is recorded in refusals (by mapping, the first one) and the mapping's
// other objects are not written in this round; other errors are returned.
type round struct {
	s    *Syncer
	live live
	// keep names the live policies left as they are (keepTransient).
	keep map[string]bool
	// owners names the mapping of each object name (mappingOf).
	owners   map[string]string
	only     map[string]error
	refusals map[string]error

	done map[string]bool
	errs []error
}

// run applies objs. The object refused at the previous pass (retryFirst,
// by mapping) is tried before the mapping's others: while kube-apiserver
// still refuses it, the mapping's live fail-closed objects are not first
// rewritten to their normal form and then back (two writes per pass for
// nothing).
func (r *round) run(ctx context.Context, objs *vap.Objects, retryFirst map[string]string) []error {
	r.done = map[string]bool{}
	for _, name := range retryFirst {
		for _, d := range objs.Policies {
			if d.Name == name {
				r.apply(ctx, kindAdmissionPolicy, d, r.live.policy(d.Name))
			}
		}
		for _, d := range objs.Bindings {
			if d.Name == name {
				r.apply(ctx, kindAdmissionPolicyBinding, d, r.live.binding(d.Name))
			}
		}
	}
	for _, d := range objs.Policies {
		r.apply(ctx, kindAdmissionPolicy, d, r.live.policy(d.Name))
	}
	for _, d := range objs.Bindings {
		r.apply(ctx, kindAdmissionPolicyBinding, d, r.live.binding(d.Name))
	}
	return r.errs
}

// apply applies one object unless the round skips it. live is nil when
// the watch shows none.
func (r *round) apply(ctx context.Context, kind string, desired, live client.Object) {
	key := kind + "/" + desired.GetName()
	if r.skip(key, desired.GetName()) {
		return
	}
	r.done[key] = true
	r.fail(desired.GetName(), r.s.applyObject(ctx, r.owners[desired.GetName()], kind, desired, live))
}

// skip reports whether the round leaves the object alone: kept, already
// applied, its mapping waiting for its fail-closed objects, or not one of
// the mappings the round is for.
func (r *round) skip(key, name string) bool {
	if r.keep[name] || r.done[key] {
		return true
	}
	mapping := r.owners[name]
	if _, ok := r.refusals[mapping]; ok && mapping != "" {
		return true
	}
	if r.only == nil {
		return false
	}
	_, ok := r.only[mapping]
	return !ok
}

// fail records err: a refusal of a mapping's object, or an error of the pass.
func (r *round) fail(name string, err error) {
	if err == nil {
		return
	}
	mapping, ok := r.owners[name]
	if !ok || !refused(err) {
		r.errs = append(r.errs, err)
		return
	}
	r.s.Metrics.Refusals.WithLabelValues(mapping).Inc()
	if _, seen := r.refusals[mapping]; !seen {
		r.refusals[mapping] = &refusal{object: name, err: err}
	}
}

// policy is the live policy called name, nil when there is none.
func (l live) policy(name string) client.Object {
	if p, ok := l.policies[name]; ok {
		return p
	}
	return nil
}

// binding is the live binding called name, nil when there is none.
func (l live) binding(name string) client.Object {
	if b, ok := l.bindings[name]; ok {
		return b
	}
	return nil
}
