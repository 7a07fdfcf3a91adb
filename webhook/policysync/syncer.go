package policysync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	admv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/vap"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// DefaultInterval is how often the leader re-resolves the owners' CAs and
// compares the generated objects with the live ones.
const DefaultInterval = 2 * time.Second

// Syncer keeps policy mode's objects in step. It is a manager.Runnable that
// needs leader election: only the leader writes; followers run nothing, so
// a handover costs the new leader one pass of reads and no write.
type Syncer struct {
	// Client writes (create, update, delete); it never reads.
	Client client.Client
	// Reader reads straight from the API server (no informers): the live
	// generated objects (listed by label) and the CA sources.
	Reader client.Reader
	// Config is the configuration in force.
	Config func() *policy.Mappings
	// CA resolves the owners' CA sources; every pass reads them live.
	CA CAResolver
	// Anchor, when set, names the ClusterRole every generated object is
	// owned by (vap.Input.Anchor): deleting it (helm uninstall) makes the
	// garbage collector delete them. While it does not exist the syncer
	// writes nothing: an object created then would outlive the guard.
	Anchor string
	// ProtectAnchor adds the anchor's own policy, which denies deleting the
	// anchor (or giving it rules) to everyone but break-glass. Off, a
	// non-break-glass `helm uninstall` works and the anchor is as safe as
	// RBAC makes it.
	ProtectAnchor bool
	// Interval between passes.
	Interval time.Duration
	Metrics  *Metrics
	Log      logr.Logger
	// Events, when set, receives a Warning Event when a mapping's objects
	// are first refused (or refused for another reason) and when the
	// anchor goes missing: once per change, not once per pass.
	Events records.EventRecorder

	trigger chan struct{}
	once    sync.Once

	mu sync.Mutex
	// written remembers, per object, the desired state the guard last wrote
	// and the resourceVersion the write returned. If the live object still
	// "differs" afterwards while neither side moved (a default the generator
	// does not know about), the guard does not write again: a comparison bug
	// must never turn into a write loop.
	written map[string]writeMark
	// warned keeps that situation from being logged every pass.
	warned map[string]bool
	// secretParams is the last answer of mayUseSecretParams and
	// secretParamsAsked when it was given.
	secretParams      *bool
	secretParamsAsked time.Time
	// reported are the mappings refused at the last pass, each with the
	// name of its object kube-apiserver refused; anchorMissing whether the
	// anchor was last seen missing.
	reported      map[string]string
	anchorMissing bool
}

// secretParamsRecheck is how long the answer to "may the guard get every
// Secret" is used before it is asked again.
const secretParamsRecheck = 10 * time.Minute

type writeMark struct {
	desired         string
	resourceVersion string
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (s *Syncer) NeedLeaderElection() bool { return true }

// Trigger asks for a pass now (the configuration was reloaded). It never
// blocks; triggers during a pass coalesce into one more pass.
func (s *Syncer) Trigger() {
	s.init()
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

func (s *Syncer) init() {
	s.once.Do(func() {
		s.trigger = make(chan struct{}, 1)
		s.written = map[string]writeMark{}
		s.warned = map[string]bool{}
		s.reported = map[string]string{}
		if s.Interval <= 0 {
			s.Interval = DefaultInterval
		}
	})
}

// Start runs passes until ctx ends. It implements manager.Runnable.
func (s *Syncer) Start(ctx context.Context) error {
	s.init()
	s.Log.Info("policy mode: syncing the generated objects", "interval", s.Interval.String())
	tick := time.NewTicker(s.Interval)
	defer tick.Stop()
	for {
		if err := s.Sync(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.Metrics.Syncs.WithLabelValues("error").Inc()
			s.Log.Error(err, "policy mode: sync failed; retrying at the next interval")
		} else {
			s.Metrics.Syncs.WithLabelValues("success").Inc()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-s.trigger:
		}
	}
}

// Sync makes one pass: resolve, generate, compare, write what differs,
// delete what no mapping produces anymore.
func (s *Syncer) Sync(ctx context.Context) error {
	s.init()
	cfg := s.Config()
	anchor, err := s.anchor(ctx)
	if err != nil {
		return err
	}
	res := ResolveCAs(ctx, cfg, s.CA, s.Reader)
	if !s.mayUseSecretParams(ctx) {
		res.DropParams()
	}
	objs, err := s.generate(cfg, res, anchor)
	if err != nil {
		return err
	}
	managed := client.MatchingLabels{vap.LabelManagedBy: vap.ManagedBy}
	var policies admv1.ValidatingAdmissionPolicyList
	if err := s.Reader.List(ctx, &policies, managed); err != nil {
		return fmt.Errorf("list ValidatingAdmissionPolicies: %w", err)
	}
	var bindings admv1.ValidatingAdmissionPolicyBindingList
	if err := s.Reader.List(ctx, &bindings, managed); err != nil {
		return fmt.Errorf("list ValidatingAdmissionPolicyBindings: %w", err)
	}
	livePolicies := index(policies.Items)
	liveBindings := index(bindings.Items)

	// A source that could not be asked keeps the mapping's live policies as
	// they are: a good CA is not replaced by an error because the API server
	// hiccuped. A change of the mapping itself waits for the next pass the
	// source answers.
	keep := map[string]bool{}
	for mapping, terr := range res.Transient {
		for _, name := range vap.PolicyNames(mapping) {
			if _, ok := livePolicies[name]; ok {
				keep[name] = true
			}
		}
		s.Log.Info("policy mode: the owner's CA source cannot be read; keeping its policies as they are", "mapping", mapping, "reason", terr.Error())
	}

	owners := mappingOf(cfg)
	// A first round writes every object. A mapping with an object
	// kube-apiserver refused is generated again with no CA (refusalCA) and
	// written in a second round: it fails closed rather than running with
	// no policy, half a policy or a stale one.
	refusals := map[string]error{}
	errs := s.applyObjects(ctx, objs, live{livePolicies, liveBindings}, keep, owners, nil, refusals, s.lastRefused())
	if len(refusals) > 0 {
		for mapping, err := range refusals {
			res.CAs[mapping] = refusalCA(err)
		}
		objs, err = s.generate(cfg, res, anchor)
		if err != nil {
			return err
		}
		second := map[string]error{}
		errs = append(errs, s.applyObjects(ctx, objs, live{livePolicies, liveBindings}, keep, owners, refusals, second, nil)...)
		for mapping, err := range second {
			refusals[mapping] = &refusal{object: refusedObject(refusals[mapping]), err: fmt.Errorf("%w; the fail-closed policy was refused too: %w", refusals[mapping], err)}
			// Nothing the guard wrote enforces the mapping: the pass failed.
			errs = append(errs, fmt.Errorf("mapping %s: %s", mapping, trimReason(refusals[mapping].Error())))
		}
	}
	s.reportRefusals(cfg, objs, refusals)
	// Deletions in the reverse order.
	desired := map[string]bool{}
	for _, o := range objs.Bindings {
		desired[kindAdmissionPolicyBinding+"/"+o.Name] = true
	}
	for _, o := range objs.Policies {
		desired[kindAdmissionPolicy+"/"+o.Name] = true
	}
	for name, o := range liveBindings {
		if !desired[kindAdmissionPolicyBinding+"/"+name] {
			errs = append(errs, s.delete(ctx, kindAdmissionPolicyBinding, o))
		}
	}
	for name, o := range livePolicies {
		if !desired[kindAdmissionPolicy+"/"+name] {
			errs = append(errs, s.delete(ctx, kindAdmissionPolicy, o))
		}
	}
	return errors.Join(errs...)
}

// live are the generated objects as listed at the start of a pass, updated
// with every write of the pass.
type live struct {
	policies map[string]*admv1.ValidatingAdmissionPolicy
	bindings map[string]*admv1.ValidatingAdmissionPolicyBinding
}

// applyObjects writes the objects that differ from the live ones, policies
// first, bindings next, so that a binding never points at a policy that does
// not exist yet. With only set, it writes only the objects of those
// mappings. A refused write is recorded in refusals (by mapping, the first
// one) and the mapping's other objects are not written in this round; other
// errors are returned.
//
// The object refused at the previous pass (retryFirst, by mapping) is tried
// before the mapping's others: while kube-apiserver still refuses it, the
// mapping's live fail-closed objects are not first rewritten to their
// normal form and then back (two writes per pass for nothing).
func (s *Syncer) applyObjects(ctx context.Context, objs *vap.Objects, l live, keep map[string]bool, owners map[string]string, only, refusals map[string]error, retryFirst map[string]string) []error {
	var errs []error
	done := map[string]bool{}
	skip := func(key, name string) bool {
		if keep[name] || done[key] {
			return true
		}
		if _, ok := refusals[owners[name]]; ok && owners[name] != "" {
			// The mapping waits for its fail-closed objects.
			return true
		}
		if only == nil {
			return false
		}
		_, ok := only[owners[name]]
		return !ok
	}
	fail := func(name string, err error) {
		if err == nil {
			return
		}
		mapping, ok := owners[name]
		if !ok || !refused(err) {
			errs = append(errs, err)
			return
		}
		s.Metrics.Refusals.WithLabelValues(mapping).Inc()
		if _, seen := refusals[mapping]; !seen {
			refusals[mapping] = &refusal{object: name, err: err}
		}
	}
	policy := func(d *admv1.ValidatingAdmissionPolicy) {
		key := kindAdmissionPolicy + "/" + d.Name
		if skip(key, d.Name) {
			return
		}
		done[key] = true
		got, err := apply(ctx, s, kindAdmissionPolicy, d, l.policies[d.Name], equalAdmissionPolicy, mergeAdmissionPolicy)
		if err == nil && got != nil {
			l.policies[d.Name] = got
		}
		fail(d.Name, err)
	}
	binding := func(d *admv1.ValidatingAdmissionPolicyBinding) {
		key := kindAdmissionPolicyBinding + "/" + d.Name
		if skip(key, d.Name) {
			return
		}
		done[key] = true
		got, err := apply(ctx, s, kindAdmissionPolicyBinding, d, l.bindings[d.Name], equalAdmissionPolicyBinding, mergeAdmissionPolicyBinding)
		if err == nil && got != nil {
			l.bindings[d.Name] = got
		}
		fail(d.Name, err)
	}
	for _, name := range retryFirst {
		for _, d := range objs.Policies {
			if d.Name == name {
				policy(d)
			}
		}
		for _, d := range objs.Bindings {
			if d.Name == name {
				binding(d)
			}
		}
	}
	for _, d := range objs.Policies {
		policy(d)
	}
	for _, d := range objs.Bindings {
		binding(d)
	}
	return errs
}

// generate builds the objects of every mapping, and the anchor's own
// policy when there is an anchor.
func (s *Syncer) generate(cfg *policy.Mappings, res Resolution, anchor *metav1.OwnerReference) (*vap.Objects, error) {
	objs, err := vap.Generate(vap.Input{Config: cfg, CAs: res.CAs, Anchor: anchor})
	if err != nil {
		return nil, err
	}
	if anchor != nil && s.ProtectAnchor {
		p, b := vap.AnchorPolicy(&cfg.Spec, anchor)
		objs.Policies = append(objs.Policies, p)
		objs.Bindings = append(objs.Bindings, b)
	}
	return objs, nil
}

// mayUseSecretParams reports whether the guard may write a policy whose
// param is a Secret: kube-apiserver requires of whoever creates a policy
// with paramKind Secret "get" on every Secret in the cluster (the policy
// could read any of them). The chart grants it with policy.caParams; without
// it, the policies hold the CA as a literal only, and a rotation races the
// guard's next pass.
//
// The answer is asked again every secretParamsRecheck, so that a quiet
// leader sends no request per pass and an RBAC change (a helm upgrade that
// sets policy.caParams) still takes effect without a restart.
func (s *Syncer) mayUseSecretParams(ctx context.Context) bool {
	s.mu.Lock()
	if s.secretParams != nil && time.Since(s.secretParamsAsked) < secretParamsRecheck {
		defer s.mu.Unlock()
		return *s.secretParams
	}
	s.mu.Unlock()
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "secrets"},
	}}
	err := s.Client.Create(ctx, review)
	allowed := err == nil && review.Status.Allowed
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.secretParamsAsked = time.Now()
	}
	if s.secretParams == nil || *s.secretParams != allowed {
		s.secretParams = &allowed
		if allowed {
			s.Log.Info("policy mode: the policies read their CA Secrets as params (the guard may get Secrets cluster-wide)")
		} else {
			s.Log.Info("policy mode: the policies hold the CA as a literal only; grant get on Secrets cluster-wide (chart value policy.caParams) so that a CA rotation reaches kube-apiserver as it reaches the writer", "reason", errText(err))
		}
	}
	return allowed
}

func errText(err error) string {
	if err == nil {
		return "not allowed"
	}
	return err.Error()
}

// anchor reads the anchor ClusterRole's uid; nil when no anchor is set.
// A missing anchor (or one being deleted) is reported once per
// disappearance and keeps the pass from writing.
func (s *Syncer) anchor(ctx context.Context) (*metav1.OwnerReference, error) {
	if s.Anchor == "" {
		return nil, nil
	}
	var role rbacv1.ClusterRole
	err := s.Reader.Get(ctx, types.NamespacedName{Name: s.Anchor}, &role)
	var missing error
	switch {
	case apierrors.IsNotFound(err):
		missing = fmt.Errorf("the anchor ClusterRole %q does not exist (the guard is being uninstalled, someone deleted it, or --policy-anchor names the wrong ClusterRole): "+
			"writing nothing, since generated objects without it would outlive the guard; `helm upgrade` creates it again", s.Anchor)
	case err != nil:
		return nil, fmt.Errorf("get the anchor ClusterRole %q: %w", s.Anchor, err)
	case role.DeletionTimestamp != nil:
		missing = fmt.Errorf("the anchor ClusterRole %q is being deleted: writing nothing, the garbage collector is removing the generated objects", s.Anchor)
	}
	s.reportAnchor(missing)
	if missing != nil {
		return nil, missing
	}
	return vap.AnchorReference(role.Name, role.UID), nil
}

// reportAnchor sets the anchor gauge and, when the anchor has just gone
// missing, writes an Event about it.
func (s *Syncer) reportAnchor(missing error) {
	present := 1.0
	if missing != nil {
		present = 0
	}
	s.Metrics.AnchorPresent.WithLabelValues(s.Anchor).Set(present)
	s.mu.Lock()
	changed := s.anchorMissing != (missing != nil)
	s.anchorMissing = missing != nil
	s.mu.Unlock()
	if !changed {
		return
	}
	if missing == nil {
		s.Log.Info("policy mode: the anchor ClusterRole exists again; writing the generated objects", "anchor", s.Anchor)
		return
	}
	s.Log.Error(missing, "policy mode: the anchor ClusterRole is gone; every generated policy is being garbage collected and no mapping is enforced", "anchor", s.Anchor)
	if s.Events != nil {
		ref := &rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: metav1.ObjectMeta{Name: s.Anchor}}
		s.Events.Eventf(ref, nil, "Warning", ReasonAnchorMissing, "Sync", "%s; no mapping is enforced until it exists again", missing.Error())
	}
}

// Reasons of the syncer's Events.
const (
	ReasonAnchorMissing  = "PolicyAnchorMissing"
	ReasonPolicyRefused  = "PolicyRefused"
	ReasonPolicyAccepted = "PolicyAccepted"
)

// lastRefused is a copy of reported.
func (s *Syncer) lastRefused() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.reported)
}

// reportRefusals sets each mapping's refusal gauge and logs (and writes an
// Event about) a refusal when it starts and when it ends: not once per pass.
func (s *Syncer) reportRefusals(cfg *policy.Mappings, objs *vap.Objects, refusals map[string]error) {
	s.Metrics.Refused.Reset()
	for i := range cfg.Spec.Owners {
		name := cfg.Spec.Owners[i].Name
		err := refusals[name]
		v := 0.0
		if err != nil {
			v = 1
		}
		s.Metrics.Refused.WithLabelValues(name).Set(v)
		s.mu.Lock()
		_, was := s.reported[name]
		if err != nil {
			s.reported[name] = refusedObject(err)
		} else {
			delete(s.reported, name)
		}
		s.mu.Unlock()
		switch {
		case err != nil && !was:
			s.Log.Error(errors.New(trimReason(err.Error())), "policy mode: kube-apiserver refused a generated object; the mapping's caBundle changes fail closed (ca-unavailable) until it accepts them", "mapping", name)
			s.event(objs, name, "Warning", ReasonPolicyRefused, fmt.Sprintf("kube-apiserver refused a generated object of mapping %q; its caBundle changes fail closed (ca-unavailable): %s", name, trimReason(err.Error())))
		case err == nil && was:
			s.Log.Info("policy mode: kube-apiserver accepts the mapping's generated objects again", "mapping", name)
			s.event(objs, name, "Normal", ReasonPolicyAccepted, fmt.Sprintf("kube-apiserver accepts the generated objects of mapping %q again", name))
		}
	}
}

// event writes an Event about the mapping's main policy.
func (s *Syncer) event(objs *vap.Objects, mapping, eventType, reason, note string) {
	if s.Events == nil {
		return
	}
	regarding := &admv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: vap.PolicyName(mapping)},
	}
	for _, p := range objs.Policies {
		if p.Labels[vap.LabelMapping] == vap.Labels(mapping)[vap.LabelMapping] {
			regarding.Name = p.Name
			break
		}
	}
	s.Events.Eventf(regarding, nil, eventType, reason, "Sync", "%s", note)
}

func index[T any, PT interface {
	*T
	client.Object
}](items []T) map[string]PT {
	out := make(map[string]PT, len(items))
	for i := range items {
		p := PT(&items[i])
		out[p.GetName()] = p
	}
	return out
}

// apply creates desired when there is no live object, and updates the live
// one only when it differs in a field the guard owns. It returns the object
// as written (nil when nothing was written).
func apply[T client.Object](ctx context.Context, s *Syncer, kind string, desired, live T, equal func(d, l T) bool, merge func(d, l T) T) (T, error) {
	var none T
	key := kind + "/" + desired.GetNamespace() + "/" + desired.GetName()
	if isNil(live) {
		obj := desired.DeepCopyObject().(T)
		err := s.Client.Create(ctx, obj)
		if err == nil {
			s.wrote(key, kind, VerbCreate, digest(desired), obj)
			return obj, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return none, fmt.Errorf("create %s %s: %w", kind, desired.GetName(), err)
		}
		live = desired.DeepCopyObject().(T)
		if err := s.Reader.Get(ctx, types.NamespacedName{Namespace: desired.GetNamespace(), Name: desired.GetName()}, live); err != nil {
			return none, fmt.Errorf("get %s %s: %w", kind, desired.GetName(), err)
		}
		// The list missed it: it was created since, by another guard
		// (then it carries the label and is updated as usual), or by
		// someone else, whose object is never taken over.
		if live.GetLabels()[vap.LabelManagedBy] != vap.ManagedBy {
			return none, &foreignObjectError{kind: kind, name: desired.GetName()}
		}
	}
	if equal(desired, live) {
		return none, nil
	}
	sum := digest(desired)
	s.mu.Lock()
	mark, seen := s.written[key]
	stuck := seen && mark.desired == sum && mark.resourceVersion == live.GetResourceVersion()
	warn := stuck && !s.warned[key]
	if warn {
		s.warned[key] = true
	}
	s.mu.Unlock()
	if stuck {
		if warn {
			s.Log.Error(nil, "policy mode: the live object still differs from the one the guard wrote, and nothing changed since; not writing it again", "kind", kind, "name", desired.GetName())
		}
		return none, nil
	}
	obj := merge(desired, live)
	if err := s.Client.Update(ctx, obj); err != nil {
		return none, fmt.Errorf("update %s %s: %w", kind, desired.GetName(), err)
	}
	s.wrote(key, kind, VerbUpdate, sum, obj)
	return obj, nil
}

// wrote records a write of the desired object whose digest is sum.
func (s *Syncer) wrote(key, kind, verb, sum string, result client.Object) {
	s.Metrics.Writes.WithLabelValues(kind, verb).Inc()
	s.mu.Lock()
	s.written[key] = writeMark{desired: sum, resourceVersion: result.GetResourceVersion()}
	delete(s.warned, key)
	s.mu.Unlock()
	s.Log.Info("policy mode: wrote a generated object", "kind", kind, "name", result.GetName(), "namespace", result.GetNamespace(), "verb", verb, "resourceVersion", result.GetResourceVersion())
}

func (s *Syncer) delete(ctx context.Context, kind string, obj client.Object) error {
	err := s.Client.Delete(ctx, obj, client.Preconditions{UID: ptrUID(obj), ResourceVersion: ptrString(obj.GetResourceVersion())})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete %s %s: %w", kind, obj.GetName(), err)
	}
	s.Metrics.Writes.WithLabelValues(kind, VerbDelete).Inc()
	s.mu.Lock()
	delete(s.written, kind+"/"+obj.GetNamespace()+"/"+obj.GetName())
	s.mu.Unlock()
	s.Log.Info("policy mode: deleted a generated object no mapping produces anymore", "kind", kind, "name", obj.GetName(), "namespace", obj.GetNamespace())
	return nil
}

func ptrUID(obj client.Object) *types.UID {
	u := obj.GetUID()
	return &u
}

func ptrString(s string) *string { return &s }

func isNil[T client.Object](o T) bool {
	var zero T
	return any(o) == any(zero)
}

func digest(obj client.Object) string {
	b, _ := json.Marshal(obj)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// labelsContain reports whether live carries every desired label.
func labelsContain(live, desired map[string]string) bool {
	for k, v := range desired {
		if lv, ok := live[k]; !ok || lv != v {
			return false
		}
	}
	return true
}

// ownersContain reports whether live carries every desired owner reference
// (same uid).
func ownersContain(live, desired []metav1.OwnerReference) bool {
	for _, d := range desired {
		if !slices.ContainsFunc(live, func(l metav1.OwnerReference) bool { return l.UID == d.UID }) {
			return false
		}
	}
	return true
}

// mergeOwners adds the desired owner references to live's, replacing a
// reference to an object of the same kind and name with another uid (an
// anchor that was deleted and created again). Other owners are kept.
func mergeOwners(live, desired []metav1.OwnerReference) []metav1.OwnerReference {
	out := slices.Clone(live)
	for _, d := range desired {
		out = slices.DeleteFunc(out, func(l metav1.OwnerReference) bool {
			return l.UID == d.UID || (l.APIVersion == d.APIVersion && l.Kind == d.Kind && l.Name == d.Name)
		})
		out = append(out, d)
	}
	return out
}

// The guard owns its labels, its owner references and the spec. Everything else (other labels, annotations,
// managedFields, resourceVersion) is left as it is and never compared.

func metaContains(d, l metav1.Object) bool {
	return labelsContain(l.GetLabels(), d.GetLabels()) && ownersContain(l.GetOwnerReferences(), d.GetOwnerReferences())
}

func mergeMeta(d, o metav1.Object) {
	o.SetLabels(labels.Merge(o.GetLabels(), d.GetLabels()))
	o.SetOwnerReferences(mergeOwners(o.GetOwnerReferences(), d.GetOwnerReferences()))
}

func equalAdmissionPolicy(d, l *admv1.ValidatingAdmissionPolicy) bool {
	return metaContains(d, l) && equality.Semantic.DeepEqual(d.Spec, l.Spec)
}

func mergeAdmissionPolicy(d, l *admv1.ValidatingAdmissionPolicy) *admv1.ValidatingAdmissionPolicy {
	o := l.DeepCopy()
	mergeMeta(d, o)
	o.Spec = *d.Spec.DeepCopy()
	return o
}

func equalAdmissionPolicyBinding(d, l *admv1.ValidatingAdmissionPolicyBinding) bool {
	return metaContains(d, l) && equality.Semantic.DeepEqual(d.Spec, l.Spec)
}

func mergeAdmissionPolicyBinding(d, l *admv1.ValidatingAdmissionPolicyBinding) *admv1.ValidatingAdmissionPolicyBinding {
	o := l.DeepCopy()
	mergeMeta(d, o)
	o.Spec = *d.Spec.DeepCopy()
	return o
}
