package policysync

import (
	"context"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// SourceChanges reports changes of the objects the CA sources are read
// from; casource.WatchReader implements it.
type SourceChanges interface {
	Generation() uint64
	WaitForChange(ctx context.Context, gen uint64, timeout time.Duration) bool
}

// passRequest is the one request every event becomes: a pass covers every
// mapping (orphans, the anchor and refusals are about all of them), so
// events coalesce into one pass in the controller's queue.
var passRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: "policy-sync"}}

// minSourcePassGap spaces the passes that changes of CA sources start: a
// writer rewriting a named configuration in a loop (the caBundle fight the
// guard exists for) must not turn into a pass, and its reads of the
// anchor, per write.
const minSourcePassGap = 100 * time.Millisecond

// NewObjectCache is the syncer's watch of its generated objects: only
// those labelled managed-by the guard, so that nobody else's policies are
// held in memory, and nothing else.
func NewObjectCache(cfg *rest.Config, scheme *runtime.Scheme, mapper meta.RESTMapper) (cache.Cache, error) {
	managed := labels.SelectorFromSet(labels.Set{vap.LabelManagedBy: vap.ManagedBy})
	return cache.New(cfg, cache.Options{
		Scheme: scheme,
		Mapper: mapper,
		ByObject: map[client.Object]cache.ByObject{
			&admv1.ValidatingAdmissionPolicy{}:        {Label: managed},
			&admv1.ValidatingAdmissionPolicyBinding{}: {Label: managed},
		},
		ReaderFailOnMissingInformer: true,
	})
}

// SetupWithManager adds the syncer to mgr as a controller: leader elected,
// a pass at start, at every change of a generated object in objects (the
// cache NewObjectCache returns, also the syncer's Objects), at every change
// Changes reports, at every Trigger, and Interval after the last pass.
func (s *Syncer) SetupWithManager(mgr ctrl.Manager, objects cache.Cache) error {
	s.init()
	pass := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{passRequest}
	})
	s.Log.Info("policy shape: syncing the generated objects", "resync", s.Interval.String(), "fieldManager", FieldManager)
	return ctrl.NewControllerManagedBy(mgr).
		Named("policysync").
		WatchesRawSource(source.Kind[client.Object](objects, &admv1.ValidatingAdmissionPolicy{}, pass)).
		WatchesRawSource(source.Kind[client.Object](objects, &admv1.ValidatingAdmissionPolicyBinding{}, pass)).
		WatchesRawSource(source.Func(s.triggers)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(s)
}

// triggers feeds the first pass, Trigger's passes and the passes CA source
// changes start into the controller's queue until ctx ends.
func (s *Syncer) triggers(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	s.init()
	q.Add(passRequest)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.trigger:
				q.Add(passRequest)
			}
		}
	}()
	if s.Changes != nil {
		go s.sourceChanges(ctx, q)
	}
	return nil
}

// sourceChanges adds a pass for every change Changes reports, at most one
// per minSourcePassGap.
func (s *Syncer) sourceChanges(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	gen := s.Changes.Generation()
	for ctx.Err() == nil {
		if !s.Changes.WaitForChange(ctx, gen, time.Minute) {
			continue
		}
		gen = s.Changes.Generation()
		q.Add(passRequest)
		select {
		case <-ctx.Done():
		case <-time.After(minSourcePassGap):
		}
	}
}
