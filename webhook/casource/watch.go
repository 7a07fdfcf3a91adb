package casource

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Defaults for WatchOptions.
const (
	// DefaultMaxWatches bounds the objects watched at once: far above the
	// CA sources a configuration names (each is one to three objects).
	DefaultMaxWatches = 256
	// DefaultSyncTimeout is how long the first Get of an object waits for
	// its watch's initial list.
	DefaultSyncTimeout = 5 * time.Second
)

// WatchOptions tune a WatchReader.
type WatchOptions struct {
	// MaxWatches bounds the objects watched at once; the least recently
	// read watch is stopped to make room.
	MaxWatches int
	// SyncTimeout bounds the wait for a new watch's initial list.
	SyncTimeout time.Duration
	// Now is the clock each watch's staleness is counted on; time.Now
	// when nil.
	Now func() time.Time
	// HistoryWindow is how long the versions a watch replaced are kept
	// (see Request.Since); DefaultHistoryWindow when zero.
	HistoryWindow time.Duration
}

// WatchReader is a client.Reader that answers Get from watches: the first
// Get of an object starts a list/watch of exactly that object (field
// selector metadata.name, which kube-apiserver authorizes as a request for
// that name, so RBAC can keep naming each CA source by resourceNames), and
// every later Get is served from the watch's store without an API call. So
// in steady state, and under a storm of denials, reading an owner's CA costs
// no request to the API server, and a change of the object is seen as soon
// as the watch delivers it.
//
// Only CA sources are read through it, and a subject that is no writer
// never makes the guard resolve a CA, so the objects watched are the ones
// the configuration names (and, for injectedByCertManager, the ones its
// writers' annotations name); MaxWatches bounds them regardless.
type WatchReader struct {
	client client.WithWatch
	opts   WatchOptions

	mu      sync.Mutex
	ctx     context.Context // from Start; watches stop with it
	watches map[watchKey]*objectWatch
	gen     uint64
	changed chan struct{} // closed (and replaced) on every change
	// history holds the versions each watch replaced, oldest first.
	history map[watchKey][]replaced
}

var _ client.Reader = &WatchReader{}

type watchKey struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
}

func (k watchKey) String() string {
	if k.namespace == "" {
		return k.gvk.Kind + " " + k.name
	}
	return k.gvk.Kind + " " + k.namespace + "/" + k.name
}

type objectWatch struct {
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
	lastUsed time.Time

	errMu   sync.Mutex
	lastErr error // the last list/watch error, for a Get that finds the watch unsynced

	// health is this watch's own freshness: its store may be stale while
	// its calls fail (the API server unreachable, or the guard no longer
	// allowed to read the object).
	health watchHealth
}

// NewWatchReader returns a reader watching through c. Watches run once
// Start is called (the manager calls it); a Get before that starts them
// under the Get's context.
func NewWatchReader(c client.WithWatch, opts WatchOptions) *WatchReader {
	if opts.MaxWatches <= 0 {
		opts.MaxWatches = DefaultMaxWatches
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = DefaultSyncTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.HistoryWindow <= 0 {
		opts.HistoryWindow = DefaultHistoryWindow
	}
	return &WatchReader{client: c, opts: opts, watches: map[watchKey]*objectWatch{}, history: map[watchKey][]replaced{}, changed: make(chan struct{})}
}

// NeedLeaderElection is false: every replica decides admissions.
func (r *WatchReader) NeedLeaderElection() bool { return false }

// Start records the lifetime of the watches and stops them all when ctx ends.
func (r *WatchReader) Start(ctx context.Context) error {
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	<-ctx.Done()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, w := range r.watches {
		w.stop()
		delete(r.watches, k)
		r.forgetHistory(k)
	}
	return nil
}

// Generation counts the changes seen by every watch; WaitForChange waits
// for it to move.
func (r *WatchReader) Generation() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen
}

// WaitForChange waits until a watched object changed after generation gen,
// ctx ends or timeout passes, and reports whether something changed.
func (r *WatchReader) WaitForChange(ctx context.Context, gen uint64, timeout time.Duration) bool {
	r.mu.Lock()
	if r.gen != gen {
		r.mu.Unlock()
		return true
	}
	ch := r.changed
	r.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

func (r *WatchReader) bump() {
	r.mu.Lock()
	r.gen++
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// staleSince reports since when the longest-failing of the watches keys
// name has been failing, which one and why; a zero time while all of them
// are fresh. Only these watches count: a source is as fresh as the objects
// it was read from, whatever other sources' watches are doing.
func (r *WatchReader) staleSince(keys []watchKey) (since time.Time, key watchKey, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		w, ok := r.watches[k]
		if !ok {
			continue
		}
		if s, e := w.health.state(); !s.IsZero() && (since.IsZero() || s.Before(since)) {
			since, key, err = s, k, e
		}
	}
	return since, key, err
}

// watchingAll reports whether every key is still watched: a watch stopped
// to make room (MaxWatches) delivers no change, so an answer read from it
// must be read again.
func (r *WatchReader) watchingAll(keys []watchKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		if _, ok := r.watches[k]; !ok {
			return false
		}
	}
	return true
}

// Watched is how many objects are watched.
func (r *WatchReader) Watched() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.watches)
}

// Get copies the watched object into obj, starting its watch on first use.
// A missing object is a NotFound error, as from the API server; a watch that
// cannot list within SyncTimeout returns its last error.
func (r *WatchReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	k, err := r.keyOf(key, obj)
	if err != nil {
		return err
	}
	w, err := r.watch(ctx, k)
	if err != nil {
		return err
	}
	return r.getFrom(ctx, w, k, key, obj)
}

// errNotWatched answers a heldReader's Get of an object with no running,
// synced watch.
var errNotWatched = errors.New("the object is not watched")

// heldReader reads through a WatchReader's running, synced watches only: it
// never starts a watch nor waits for one (Request.HeldOnly). missed is set
// when a Get found no such watch.
type heldReader struct {
	r      *WatchReader
	missed bool
	// keys are the watches read, so that a held answer is as stale as
	// they are (Resolver.readWatched memoizes it with them).
	keys []watchKey
}

func (h *heldReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	k, err := h.r.keyOf(key, obj)
	if err != nil {
		return err
	}
	h.r.mu.Lock()
	w, ok := h.r.watches[k]
	h.r.mu.Unlock()
	if !ok || !w.informer.HasSynced() {
		h.missed = true
		return errNotWatched
	}
	h.keys = append(h.keys, k)
	return h.r.getFrom(ctx, w, k, key, obj)
}

func (h *heldReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("casource.heldReader serves Get only")
}

// getFrom copies the object from its watch's store, waiting up to
// SyncTimeout for the watch's initial list.
func (r *WatchReader) getFrom(ctx context.Context, w *objectWatch, k watchKey, key client.ObjectKey, obj client.Object) error {
	if !w.informer.HasSynced() {
		syncCtx, cancel := context.WithTimeout(ctx, r.opts.SyncTimeout)
		synced := cache.WaitForCacheSync(syncCtx.Done(), w.informer.HasSynced)
		cancel()
		if !synced {
			w.errMu.Lock()
			last := w.lastErr
			w.errMu.Unlock()
			if last == nil {
				last = fmt.Errorf("the watch of %s has not listed it within %s", k, r.opts.SyncTimeout)
			}
			return last
		}
	}
	storeKey := key.Name
	if key.Namespace != "" {
		storeKey = key.Namespace + "/" + key.Name
	}
	item, exists, err := w.informer.GetStore().GetByKey(storeKey)
	if err != nil {
		return err
	}
	if !exists {
		mapping, err := r.client.RESTMapper().RESTMapping(k.gvk.GroupKind(), k.gvk.Version)
		if err != nil {
			return err
		}
		return apierrors.NewNotFound(mapping.Resource.GroupResource(), key.Name)
	}
	src, ok := item.(runtime.Object)
	if !ok {
		return fmt.Errorf("the watch of %s stored a %T", k, item)
	}
	// Copy, as controller-runtime's cache reader does: the stored object is shared.
	reflect.Indirect(reflect.ValueOf(obj)).Set(reflect.Indirect(reflect.ValueOf(src.DeepCopyObject())))
	return nil
}

// keyOf names the watch a Get of key into obj reads.
func (r *WatchReader) keyOf(key client.ObjectKey, obj client.Object) (watchKey, error) {
	gvk, err := apiutil.GVKForObject(obj, r.client.Scheme())
	if err != nil {
		return watchKey{}, err
	}
	return watchKey{gvk: gvk, namespace: key.Namespace, name: key.Name}, nil
}

// List is not served: only single objects are watched.
func (r *WatchReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("casource.WatchReader serves Get only")
}

// watch returns the watch of k, starting it (and stopping the least
// recently used one beyond MaxWatches) when there is none.
func (r *WatchReader) watch(ctx context.Context, k watchKey) (*objectWatch, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.watches[k]; ok {
		w.lastUsed = time.Now()
		return w, nil
	}
	// The watch outlives the read that starts it: it runs under the reader's
	// context, or under the read's without its cancellation.
	parent := r.ctx //nolint:contextcheck // see above
	if parent == nil {
		parent = context.WithoutCancel(ctx)
	}
	wctx, stop := context.WithCancel(parent)
	w := &objectWatch{stop: stop, lastUsed: time.Now()}
	lw, example, err := r.listWatch(k, &w.health)
	if err != nil {
		stop()
		return nil, err
	}
	w.informer = cache.NewSharedIndexInformer(lw, example, 0, cache.Indexers{})
	_ = w.informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		w.errMu.Lock()
		w.lastErr = err
		w.errMu.Unlock()
	})
	if _, err := w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { r.bump() },
		UpdateFunc: func(old, cur any) {
			r.recordReplaced(k, old, cur)
			r.bump()
		},
		DeleteFunc: func(old any) {
			r.recordReplaced(k, old, nil)
			r.bump()
		},
	}); err != nil {
		stop()
		return nil, err
	}
	go w.informer.RunWithContext(wctx)
	r.watches[k] = w
	for len(r.watches) > r.opts.MaxWatches {
		var oldest watchKey
		var oldestAt time.Time
		for key, other := range r.watches {
			if key != k && (oldestAt.IsZero() || other.lastUsed.Before(oldestAt)) {
				oldest, oldestAt = key, other.lastUsed
			}
		}
		r.watches[oldest].stop()
		delete(r.watches, oldest)
		r.forgetHistory(oldest)
	}
	return w, nil
}

// listWatch lists and watches the one object k names, recording each
// call's outcome in that watch's health.
func (r *WatchReader) listWatch(k watchKey, health *watchHealth) (cache.ListerWatcher, runtime.Object, error) {
	scheme := r.client.Scheme()
	example, err := scheme.New(k.gvk)
	if err != nil {
		return nil, nil, err
	}
	listGVK := k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List")
	newList := func() (client.ObjectList, error) {
		o, err := scheme.New(listGVK)
		if err != nil {
			return nil, err
		}
		l, ok := o.(client.ObjectList)
		if !ok {
			return nil, fmt.Errorf("%s is not a list", listGVK)
		}
		return l, nil
	}
	byName := fields.OneTermEqualSelector("metadata.name", k.name).String()
	opts := func(o metav1.ListOptions) []client.ListOption {
		o.FieldSelector = byName
		out := []client.ListOption{&client.ListOptions{Raw: &o}}
		if k.namespace != "" {
			out = append(out, client.InNamespace(k.namespace))
		}
		return out
	}
	// The client says whether it can stream the initial list (watch-list);
	// kube-apiserver's clients can, a fake API may not.
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := newList()
			if err != nil {
				return nil, err
			}
			err = r.client.List(ctx, l, opts(o)...)
			health.observe(err, r.opts.Now())
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			l, err := newList()
			if err != nil {
				return nil, err
			}
			w, err := r.client.Watch(ctx, l, opts(o)...)
			health.observe(err, r.opts.Now())
			if err != nil {
				return w, err
			}
			// The store is fresh until the stream ends (endWatch).
			return newEndWatch(ctx, w, func() { health.observe(errWatchEnded, r.opts.Now()) }), nil
		},
		DisableChunking: true,
	}, r.client), example, nil
}
