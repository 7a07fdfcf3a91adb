package casource

import (
	"context"
	"reflect"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// A write is judged against the CA its writer could have known. Admission
// decides a write as it arrives, against the source as the watch holds it
// then. The observer decides a write after the fact, sometimes after the
// source rotated again: cert-manager's cainjector writes old+new under CA n
// and the Secret moves to CA n+1 before the observer gets to the write.
// Judged against CA n+1 alone, the merge would be recorded as a
// ca-mismatch. So the WatchReader keeps the versions its watches replaced
// for a short window, and a Request with Since set is answered with every
// CA set the source held from Since on.

// Defaults of the replaced-version history.
const (
	// DefaultHistoryWindow is how long a replaced version is kept: far
	// longer than a watch takes to deliver a write to the observer, far
	// shorter than any CA's life.
	DefaultHistoryWindow = 10 * time.Second
	// maxHistory bounds the replaced versions kept of each watched object,
	// whatever the window: an object replaced faster than that loses its
	// own oldest versions (a write under one of them is then recorded as
	// a ca-mismatch, never let through unrecorded), and never another
	// object's. So the history of all watches together holds at most
	// maxHistory versions of each object a configured source reads (or a
	// writer's annotation names; MaxWatches bounds those), and an object
	// no longer watched keeps none.
	maxHistory = 64
	// maxPastSets bounds the memoized sets read from the history.
	maxPastSets = 256
)

// replaced is a version of a watched object that its watch replaced (or
// deleted) at at.
type replaced struct {
	obj runtime.Object
	at  time.Time
}

// recordReplaced keeps old, the version of k a watch just replaced or
// deleted, dropping k's versions older than the window and past
// maxHistory. Each object has its own history: a storm of updates of one
// source never evicts the versions another source's writes are judged
// against.
func (r *WatchReader) recordReplaced(k watchKey, old, cur any) {
	if tomb, ok := old.(cache.DeletedFinalStateUnknown); ok {
		old = tomb.Obj
	}
	obj, ok := old.(runtime.Object)
	if !ok {
		return
	}
	if cur != nil && sameVersion(old, cur) {
		return // a relist's update of an unchanged object
	}
	now := r.opts.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, watched := r.watches[k]; !watched {
		return // an event of a watch stopped to make room
	}
	h := r.history[k]
	keep := slices.IndexFunc(h, func(v replaced) bool { return now.Sub(v.at) <= r.opts.HistoryWindow })
	if keep < 0 {
		keep = len(h)
	}
	if len(h)-keep >= maxHistory {
		keep = len(h) - maxHistory + 1
	}
	r.history[k] = append(slices.Delete(h, 0, keep), replaced{obj: obj, at: now})
}

// forgetHistory drops the versions of an object no longer watched. r.mu
// must be held.
func (r *WatchReader) forgetHistory(k watchKey) { delete(r.history, k) }

// sameVersion reports whether a and b are the same resourceVersion of an
// object.
func sameVersion(a, b any) bool {
	ma, errA := meta.Accessor(a)
	mb, errB := meta.Accessor(b)
	return errA == nil && errB == nil && ma.GetResourceVersion() == mb.GetResourceVersion()
}

// replacedSince lists the times, after since and in order, at which one of
// keys' objects was replaced: each is a moment before which the source
// may have held another CA.
func (r *WatchReader) replacedSince(keys []watchKey, since time.Time) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Time
	for i, k := range keys {
		if slices.Contains(keys[:i], k) {
			continue
		}
		for _, v := range r.history[k] {
			if v.at.After(since) {
				out = append(out, v.at)
			}
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return slices.Compact(out)
}

// versionAt is the version of k current at t: the first one replaced after
// t; false when none was (the watched version is still the one).
func (r *WatchReader) versionAt(k watchKey, t time.Time) (runtime.Object, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.history[k] {
		if v.at.After(t) {
			return v.obj, true
		}
	}
	return nil, false
}

// pastReader reads each object as it was at a moment of the history window:
// a replaced version, else the watched one (held only: it never starts a
// watch or waits for one).
type pastReader struct {
	r  *WatchReader
	at time.Time
}

func (p pastReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	k, err := p.r.keyOf(key, obj)
	if err != nil {
		return err
	}
	if v, ok := p.r.versionAt(k, p.at); ok {
		reflect.Indirect(reflect.ValueOf(obj)).Set(reflect.Indirect(reflect.ValueOf(v.DeepCopyObject())))
		return nil
	}
	return (&heldReader{r: p.r}).Get(ctx, key, obj, opts...)
}

func (p pastReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return p.r.List(ctx, list, opts...)
}

// withPast adds to set every CA set src held since since, as the history
// holds them: the versions of the objects it was read from (keys) replaced
// after since. Each past set is memoized (the history of a moment never
// changes); a past version the source cannot be read from adds nothing.
func (r *Resolver) withPast(ctx context.Context, src source, set cabundle.CASet, keys []watchKey, since time.Time) cabundle.CASet {
	for _, t := range r.watch.replacedSince(keys, since) {
		set = set.Union(r.pastSet(ctx, src, t))
	}
	return set
}

// pastKey names a past set: the source and the moment its objects were
// read at.
type pastKey struct {
	source string
	at     int64
}

// pastSet is the CA set src held just before t.
func (r *Resolver) pastSet(ctx context.Context, src source, t time.Time) cabundle.CASet {
	k := pastKey{src.key, t.UnixNano()}
	r.mu.Lock()
	set, ok := r.past[k]
	r.mu.Unlock()
	if ok {
		return set
	}
	set, err := src.read(ctx, pastReader{r: r.watch, at: t.Add(-time.Nanosecond)})
	if err != nil {
		set = cabundle.CASet{}
	}
	r.mu.Lock()
	if r.past == nil || len(r.past) >= maxPastSets {
		r.past = map[pastKey]cabundle.CASet{}
	}
	r.past[k] = set
	r.mu.Unlock()
	return set
}
