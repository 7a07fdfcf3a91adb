package policysync

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/vap"
	"github.com/webhook-guard/webhook-guard/webhook/policyca"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// DefaultInterval is how often the leader makes a pass without any event:
// the resync that repairs what a missed event left behind.
const DefaultInterval = 2 * time.Second

// Syncer keeps the policy shape's objects in step. It is a reconciler
// (SetupWithManager) that runs on the leader only: followers watch nothing
// and write nothing, so a handover costs the new leader one pass of
// comparisons against its watches and no write.
type Syncer struct {
	// Client writes: server-side apply under FieldManager, deletes of
	// orphans, and the access review of mayUseSecretParams.
	Client client.Client
	// Reader reads straight from the API server: the anchor ClusterRole,
	// and a generated object's name missing from Objects (someone else's
	// object of that name is never taken over).
	Reader client.Reader
	// Objects lists the generated objects (label managed-by): the
	// syncer's own watch of them (NewObjectCache).
	Objects client.Reader
	// Sources reads the objects the CA sources point through (the
	// configurations an injectedByCertManager mapping names).
	Sources client.Reader
	// Changes, when set, reports every change of an object the CA
	// resolver or Sources read (casource.WatchReader): each starts a pass.
	Changes SourceChanges
	// Config is the configuration in force.
	Config func() *policy.Mappings
	// CA resolves the owners' CA sources; it is asked for what it holds
	// (Resolve with live false), so it must hold what is current: a
	// watching resolver (casource.NewWatching) whose changes Changes
	// reports.
	CA policyca.CAResolver
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
	// Interval between passes when nothing changes.
	Interval time.Duration
	Metrics  *Metrics
	Log      logr.Logger
	// Events, when set, receives a Warning Event when a mapping's objects
	// are first refused (or refused for another reason), when the anchor
	// goes missing (once per change, not once per pass), and at every
	// server-side apply conflict.
	Events records.EventRecorder

	trigger chan struct{}
	once    sync.Once

	mu sync.Mutex
	// secretParams is the last answer of mayUseSecretParams and
	// secretParamsAsked when it was given.
	secretParams      *bool
	secretParamsAsked time.Time
	// reported are the mappings refused at the last pass, each with the
	// name of its object kube-apiserver refused; anchorMissing whether the
	// anchor was last seen missing.
	reported      map[string]string
	anchorMissing bool
	// written is, per object, the resourceVersion of the guard's last
	// write of it: an apply that answers with it changed nothing (a pass
	// that compared against a watch not yet showing that write).
	written map[string]string
	// settled is, per object, the resourceVersion at which removeForeign
	// found that the fields other managers own hold what the guard
	// generates (a default written back): its update changed nothing, and
	// neither would the next one until the object changes.
	settled map[string]string
	// staticOnlyWarned are the "field/mapping" pairs logged as not
	// applied by the policy shape (warnStaticOnly).
	staticOnlyWarned map[string]bool
	// costs are the last pass's cost checks (checkCosts), costSeries the
	// {mapping, configuration} series of the cost gauge it set, and
	// costly the mappings at or over CostMargin (reportCostly).
	costs      map[costKey]costOf
	costSeries map[[2]string]bool
	costly     map[string]bool
}

func (s *Syncer) init() {
	s.once.Do(func() {
		s.trigger = make(chan struct{}, 1)
		s.reported = map[string]string{}
		s.written = map[string]string{}
		s.settled = map[string]string{}
		s.staticOnlyWarned = map[string]bool{}
		if s.Interval <= 0 {
			s.Interval = DefaultInterval
		}
	})
}

// Trigger asks for a pass now (the configuration was reloaded). It never
// blocks; triggers before a pass starts coalesce into one pass.
func (s *Syncer) Trigger() {
	s.init()
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// Reconcile makes one pass, whatever event asked for it, and asks for the
// next one after Interval. A failed pass is counted and logged, and is
// retried like any other pass (at the next change or after Interval), not
// with controller-runtime's backoff: the resync cadence stays the same.
func (s *Syncer) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	s.init()
	if err := s.Sync(ctx); err != nil {
		if ctx.Err() != nil {
			return reconcile.Result{}, nil //nolint:nilerr // the manager is stopping: nothing to retry
		}
		s.Metrics.Syncs.WithLabelValues("error").Inc()
		s.Log.Error(err, "policy shape: sync failed; retrying at the next change or interval")
	} else {
		s.Metrics.Syncs.WithLabelValues("success").Inc()
	}
	return reconcile.Result{RequeueAfter: s.Interval}, nil
}

// Sync makes one pass: resolve, generate, apply what differs from what the
// guard owns, delete what no mapping produces anymore.
func (s *Syncer) Sync(ctx context.Context) error {
	s.init()
	cfg := s.Config()
	s.warnStaticOnly(cfg)
	anchor, err := s.anchor(ctx)
	if err != nil {
		return err
	}
	res := policyca.Resolve(ctx, cfg, s.CA, s.Sources, false)
	if !s.mayUseSecretParams(ctx) {
		res.DropParams()
	}
	objs, err := s.generate(cfg, res, anchor)
	if err != nil {
		return err
	}
	l, err := s.listLive(ctx)
	if err != nil {
		return err
	}
	owners := mappingOf(cfg)
	r := &round{s: s, live: l, keep: s.keepTransient(res, l, owners), owners: owners, refusals: map[string]error{}}
	// A first round writes every object. A mapping with an object
	// kube-apiserver refused is generated again with no CA (refusalCA) and
	// written in a second round: it fails closed rather than running with
	// no policy, half a policy or a stale one.
	errs := r.run(ctx, objs, s.lastRefused())
	if len(r.refusals) > 0 {
		var more []error
		objs, more, err = s.failClosed(ctx, cfg, res, anchor, r)
		if err != nil {
			return err
		}
		errs = append(errs, more...)
	}
	s.reportRefusals(cfg, objs, r.refusals)
	errs = append(errs, s.deleteOrphans(ctx, objs, l)...)
	// The cost check only reports (the policies fail closed whatever it
	// finds), so it runs after the objects are written: compiling and
	// running the policies for a new CA takes up to a few hundred
	// milliseconds, which a writer's first injection would otherwise wait
	// out behind a policy that still says ca-unavailable.
	prevCostly := s.costly
	s.costly = s.checkCosts(ctx, cfg, res)
	s.reportCostly(objs, prevCostly, s.costly)
	return errors.Join(errs...)
}

// failClosed writes the refused mappings again, generated with no CA, and
// returns the objects of the pass as finally generated.
func (s *Syncer) failClosed(ctx context.Context, cfg *policy.Mappings, res policyca.Resolution, anchor *metav1.OwnerReference, first *round) (*vap.Objects, []error, error) {
	for mapping, err := range first.refusals {
		res.CAs[mapping] = refusalCA(err)
	}
	objs, err := s.generate(cfg, res, anchor)
	if err != nil {
		return nil, nil, err
	}
	second := &round{s: s, live: first.live, keep: first.keep, owners: first.owners, only: first.refusals, refusals: map[string]error{}}
	errs := second.run(ctx, objs, nil)
	for mapping, err := range second.refusals {
		refusals := first.refusals
		refusals[mapping] = &refusal{object: refusedObject(refusals[mapping]), err: fmt.Errorf("%w; the fail-closed policy was refused too: %w", refusals[mapping], err)}
		// Nothing the guard wrote enforces the mapping: the pass failed.
		errs = append(errs, fmt.Errorf("mapping %s: %s", mapping, trimReason(refusals[mapping].Error())))
	}
	return objs, errs, nil
}

// live are the generated objects as the watch shows them at the start of
// a pass, by name.
type live struct {
	policies map[string]*admv1.ValidatingAdmissionPolicy
	bindings map[string]*admv1.ValidatingAdmissionPolicyBinding
}

// listLive lists the generated objects from the watch.
func (s *Syncer) listLive(ctx context.Context) (live, error) {
	managed := client.MatchingLabels{vap.LabelManagedBy: vap.ManagedBy}
	var policies admv1.ValidatingAdmissionPolicyList
	if err := s.Objects.List(ctx, &policies, managed); err != nil {
		return live{}, fmt.Errorf("list ValidatingAdmissionPolicies: %w", err)
	}
	var bindings admv1.ValidatingAdmissionPolicyBindingList
	if err := s.Objects.List(ctx, &bindings, managed); err != nil {
		return live{}, fmt.Errorf("list ValidatingAdmissionPolicyBindings: %w", err)
	}
	return live{policies: index(policies.Items), bindings: index(bindings.Items)}, nil
}

// keepTransient names the live policies of the mappings whose CA source
// could not be asked: they are kept as they are, so that a good CA is not
// replaced by an error because the API server hiccuped. A change of the
// mapping itself waits for the next pass the source answers. owners names
// the mapping of each generated name (mappingOf): only the mapping's own
// policies are kept, never another mapping's whose name starts alike.
func (s *Syncer) keepTransient(res policyca.Resolution, l live, owners map[string]string) map[string]bool {
	keep := map[string]bool{}
	for name := range l.policies {
		if _, transient := res.Transient[owners[name]]; transient {
			keep[name] = true
		}
	}
	for mapping, terr := range res.Transient {
		s.Log.Info("policy shape: the owner's CA source cannot be read; keeping its policies as they are", "mapping", mapping, "reason", terr.Error())
	}
	return keep
}

// generate builds the objects of every mapping, and the anchor's own
// policy when there is an anchor.
func (s *Syncer) generate(cfg *policy.Mappings, res policyca.Resolution, anchor *metav1.OwnerReference) (*vap.Objects, error) {
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

// deleteOrphans deletes the live objects no mapping produces anymore,
// bindings first: only those this guard generated (generatedHere), never
// another release's that carry the same label.
func (s *Syncer) deleteOrphans(ctx context.Context, objs *vap.Objects, l live) []error {
	desired := map[string]bool{}
	for _, o := range objs.Bindings {
		desired[kindAdmissionPolicyBinding+"/"+o.Name] = true
	}
	for _, o := range objs.Policies {
		desired[kindAdmissionPolicy+"/"+o.Name] = true
	}
	var errs []error
	for name, o := range l.bindings {
		if !desired[kindAdmissionPolicyBinding+"/"+name] && generatedHere(o, s.Anchor) {
			errs = append(errs, s.delete(ctx, kindAdmissionPolicyBinding, o))
		}
	}
	for name, o := range l.policies {
		if !desired[kindAdmissionPolicy+"/"+name] && generatedHere(o, s.Anchor) {
			errs = append(errs, s.delete(ctx, kindAdmissionPolicy, o))
		}
	}
	return errs
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
