package casource

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// Defaults for Options.
const (
	DefaultTTL      = 30 * time.Second
	DefaultMaxStale = 5 * time.Minute
	// DefaultGrace is how long a watching resolver waits, before a
	// ca-mismatch denial, for its watches to deliver a change of the source.
	DefaultGrace = time.Second
)

// maxCachedSources bounds the answers a Resolver keeps. Sources are the
// configured ones plus, for injectedByCertManager, those a writer's
// annotations name; past the bound the cache starts over.
const maxCachedSources = 1024

// Options tune the cache.
type Options struct {
	// TTL is how long a successful read is used without asking the API again.
	TTL time.Duration
	// MaxStale is how long a successful read keeps serving when re-reading
	// fails (the API server unreachable); after it, caBundle changes fail closed.
	MaxStale time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Grace (watching resolvers only) bounds the wait of a live Resolve for
	// the watches to deliver a change of the source; DefaultGrace when zero.
	Grace time.Duration
}

// Request names what to resolve: the owner, and the annotations of the
// configuration (for injectedByCertManager).
type Request struct {
	Owner       *guardapi.Owner
	Annotations map[string]string
	// ClusterResourceNamespace holds ClusterIssuers' CA Secrets.
	ClusterResourceNamespace string
	// HeldOnly answers only from what the resolver already holds: a running,
	// synced watch (watching resolvers) or a cached answer younger than
	// MaxStale. Anything else is a SourceError with NotHeld set, at once:
	// no watch is started, nothing is read, nothing is waited for. The
	// observer uses it for sources the observed object names itself (an
	// inject annotation), so a writer cannot make it start a watch and wait
	// for its initial list per bogus annotation.
	HeldOnly bool
	// Since, when set, asks a watching resolver for every CA the source
	// held from Since on, not only the one it holds now: the union of the
	// current set and the sets of the versions its watches replaced since
	// (kept for WatchOptions.HistoryWindow). The observer judges a write
	// it sees after the fact against the CAs its writer could have read.
	Since time.Time
}

// Result is a resolution and where it came from.
type Result struct {
	policy.CAResult
	// Cached is true when the answer was served from the cache without a read.
	Cached bool
	// Stale is true when a read failed and an older cached answer was
	// served, or (watching resolvers) a watch this source is read from is
	// failing and its store served, within MaxStale.
	Stale bool
	// Watched is true when the answer came from watches, which may not yet
	// have delivered a change written just before the request; a live
	// Resolve waits briefly for them.
	Watched bool
	// Source describes the source, for metrics and messages.
	Source string
	// watched are the watches a watched answer was read from.
	watched []watchKey
}

// Resolver reads and caches owners' CAs. It is safe for concurrent use.
type Resolver struct {
	reader client.Reader
	opts   Options
	// watch, when set, serves every read from watches (NewWatching).
	watch *WatchReader

	mu      sync.Mutex
	cache   map[string]cacheEntry
	flights map[string]*flight
	// past memoizes the sets read from the watches' history (Since).
	past map[pastKey]cabundle.CASet
}

// flight coalesces reads of one source: under a storm of denials (the
// 8-replica incident: every write is a ca-mismatch that asks for a live
// re-read) the guard must not turn each request into a GET of the CA
// Secret, which would queue behind client-side rate limits and amplify
// load on the API server it protects.
type flight struct {
	inflight *readCall // the read in progress, if any
	last     *readCall // the last completed read
}

type readCall struct {
	start time.Time
	done  chan struct{}
	set   cabundle.CASet
	err   error
}

type cacheEntry struct {
	set    cabundle.CASet
	readAt time.Time
	// err and gen: a watching resolver's answer (a definitive error is an
	// answer too), valid while the watches' generation is gen; watched
	// are the watches it was read from, whose health is its staleness.
	err     error
	gen     uint64
	watched []watchKey
}

// New returns a Resolver reading through reader.
func New(reader client.Reader, opts Options) *Resolver {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.MaxStale < opts.TTL {
		opts.MaxStale = max(DefaultMaxStale, opts.TTL)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	return &Resolver{reader: reader, opts: opts, cache: map[string]cacheEntry{}, flights: map[string]*flight{}}
}

// NewWatching returns a Resolver that reads every source through watches
// (WatchReader): no API call per admission, in steady state or under a
// storm of denials. A live Resolve does not read either: it waits up to
// Options.Grace for the watches to deliver a change of the source, so a CA
// rotated just before the request is seen without a read per denial.
func NewWatching(w *WatchReader, opts Options) *Resolver {
	r := New(w, opts)
	r.watch = w
	// No TTL applies to watched answers: MaxStale stands on its own.
	if opts.MaxStale > 0 {
		r.opts.MaxStale = opts.MaxStale
	}
	return r
}

// resolveWatched answers from the watches' stores, memoized until any
// watched object changes.
func (r *Resolver) resolveWatched(ctx context.Context, src source, live bool) Result {
	gen := r.watch.Generation()
	a := r.readWatched(ctx, src, gen)
	if live {
		for deadline := time.Now().Add(r.opts.Grace); ; {
			remaining := time.Until(deadline)
			if remaining <= 0 || !r.watch.WaitForChange(ctx, gen, remaining) {
				break
			}
			gen = r.watch.Generation()
			next := r.readWatched(ctx, src, gen)
			changed := !slices.Equal(next.set.Fingerprints(), a.set.Fingerprints()) || errText(next.err) != errText(a.err)
			a = next
			if changed {
				break // the source changed: decide on it (another object's change keeps waiting)
			}
		}
	}
	res := Result{CAResult: policy.CAResult{Resolved: true, Set: a.set, Err: a.err}, Watched: true, Source: src.key, watched: a.watched}
	// A watch this source was read from is failing (the API server
	// unreachable, or the guard no longer allowed to read the object): its
	// store serves for MaxStale (counted as stale), then caBundle changes
	// of this mapping fail closed. Each source counts on its own watches'
	// clock only.
	if since, key, staleErr := r.watch.staleSince(a.watched); !since.IsZero() && a.err == nil {
		if stale := r.opts.Now().Sub(since); stale > r.opts.MaxStale {
			res.Set, res.Err = cabundle.CASet{}, &SourceError{Source: src.key, Reason: fmt.Sprintf("the watch of %s has failed for %s (--ca-max-stale %s): %v", key, stale.Round(time.Second), r.opts.MaxStale, staleErr)}
		} else {
			res.Stale = true
		}
	}
	return res
}

// watchedAnswer is a source read from the watches: its CA set or error, and
// the watches it was read from.
type watchedAnswer struct {
	set     cabundle.CASet
	err     error
	watched []watchKey
}

// readWatched reads src from the watches, memoized while their generation
// is gen and every watch it read is still running.
func (r *Resolver) readWatched(ctx context.Context, src source, gen uint64) watchedAnswer {
	r.mu.Lock()
	entry, ok := r.cache[src.key]
	r.mu.Unlock()
	if ok && entry.gen == gen && r.watch.watchingAll(entry.watched) {
		return watchedAnswer{set: entry.set, err: entry.err, watched: entry.watched}
	}
	rec := &recordingReader{WatchReader: r.watch}
	set, err := src.read(ctx, rec)
	if err == nil || IsDefinitive(err) {
		r.mu.Lock()
		if len(r.cache) >= maxCachedSources {
			clear(r.cache)
		}
		r.cache[src.key] = cacheEntry{set: set, err: err, gen: gen, watched: rec.keys}
		r.mu.Unlock()
	}
	return watchedAnswer{set: set, err: err, watched: rec.keys}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Resolve returns the owner's CA set. With live false a fresh cached answer
// is used; with live true the source is always read (the re-read before a
// denial, so that a CA rotation racing the cache is never denied).
func (r *Resolver) Resolve(ctx context.Context, req Request, live bool) Result {
	src, err := sourceOf(req)
	if err != nil {
		return Result{CAResult: policy.CAResult{Resolved: true, Err: err}, Source: "unknown"}
	}
	if r.watch != nil {
		past := src
		if req.HeldOnly {
			// No grace wait either: a held answer is what the watch has now.
			src, live = src.heldBy(r.watch), false
		}
		res := r.resolveWatched(ctx, src, live)
		if !req.Since.IsZero() && res.Err == nil {
			res.Set = r.withPast(ctx, past, res.Set, res.watched, req.Since)
		}
		return res
	}
	return r.resolveCached(ctx, src, req.HeldOnly, live)
}

// resolveCached answers from the resolver's own cache, reading the source
// when the cached answer is missing, older than the TTL, or live is set;
// heldOnly answers from the cache alone.
func (r *Resolver) resolveCached(ctx context.Context, src source, heldOnly, live bool) Result {
	now := r.opts.Now()
	r.mu.Lock()
	entry, ok := r.cache[src.key]
	r.mu.Unlock()
	if heldOnly {
		if ok && now.Sub(entry.readAt) < r.opts.MaxStale {
			return Result{CAResult: policy.CAResult{Resolved: true, Set: entry.set}, Cached: true, Source: src.key}
		}
		return Result{CAResult: policy.CAResult{Resolved: true, Err: notHeld(src.key)}, Source: src.key}
	}
	if ok && !live && now.Sub(entry.readAt) < r.opts.TTL {
		return Result{CAResult: policy.CAResult{Resolved: true, Set: entry.set}, Cached: true, Source: src.key}
	}
	set, err := r.coalescedRead(ctx, src, now)
	if err != nil {
		return r.readFailed(src, entry, ok, now, err)
	}
	r.mu.Lock()
	if len(r.cache) >= maxCachedSources {
		clear(r.cache)
	}
	r.cache[src.key] = cacheEntry{set: set, readAt: now}
	r.mu.Unlock()
	return Result{CAResult: policy.CAResult{Resolved: true, Set: set}, Source: src.key}
}

// readFailed answers a failed read: from the cached entry (if cached) while
// it is within MaxStale and the failure may pass, else with the error,
// dropping the entry when the failure is definitive.
func (r *Resolver) readFailed(src source, entry cacheEntry, cached bool, now time.Time, err error) Result {
	if cached && now.Sub(entry.readAt) < r.opts.MaxStale && !IsDefinitive(err) {
		return Result{CAResult: policy.CAResult{Resolved: true, Set: entry.set}, Cached: true, Stale: true, Source: src.key}
	}
	if cached && IsDefinitive(err) {
		// The source answered that it is gone or unusable (typically on
		// the live re-read before a denial): the cached answer must not
		// keep serving for the rest of its TTL.
		r.mu.Lock()
		delete(r.cache, src.key)
		r.mu.Unlock()
	}
	return Result{CAResult: policy.CAResult{Resolved: true, Err: err}, Source: src.key}
}

// coalescedRead reads the source, sharing reads between concurrent
// requests. A request only takes the result of a read that started at or
// after the request arrived, so a CA rotated just before the request is
// always seen (the guarantee behind "a rotation racing the cache is never
// denied"); concurrent requests share one read, and requests arriving during
// a read share the next one. (A completed read is reused only when it began
// strictly after the arrival, so a frozen test clock never hides a change.)
func (r *Resolver) coalescedRead(ctx context.Context, src source, arrival time.Time) (cabundle.CASet, error) {
	for {
		r.mu.Lock()
		f := r.flights[src.key]
		if f == nil {
			f = &flight{}
			r.flights[src.key] = f
		}
		if f.last != nil && f.last.start.After(arrival) {
			c := f.last
			r.mu.Unlock()
			return c.set, c.err
		}
		if c := f.inflight; c != nil {
			r.mu.Unlock()
			select {
			case <-c.done:
			case <-ctx.Done():
				return cabundle.CASet{}, &SourceError{Source: src.key, Reason: "gave up waiting for the read: " + ctx.Err().Error()}
			}
			if !c.start.Before(arrival) {
				return c.set, c.err
			}
			continue // that read began before this request arrived; take the next one
		}
		c := &readCall{start: r.opts.Now(), done: make(chan struct{})}
		f.inflight = c
		r.mu.Unlock()

		c.set, c.err = src.read(ctx, r.reader)
		r.mu.Lock()
		f.inflight, f.last = nil, c
		r.mu.Unlock()
		close(c.done)
		return c.set, c.err
	}
}

// Invalidate drops every cached answer (used when the configuration changes).
func (r *Resolver) Invalidate() {
	r.mu.Lock()
	clear(r.cache)
	for _, f := range r.flights {
		f.last = nil
	}
	r.mu.Unlock()
}

// IsDefinitive tells a source that answered "wrong" (not found, no key,
// garbage PEM) from one that could not be asked. Only the latter may be
// papered over with a stale cached answer: a deleted CA Secret must fail
// closed at once, not five minutes later.
func IsDefinitive(err error) bool {
	var se *SourceError
	return errors.As(err, &se) && se.Definitive
}

// SourceError names the CA source and why it could not be used.
type SourceError struct {
	Source string
	Reason string
	// Definitive is true when the source answered (not found, forbidden,
	// malformed) rather than could not be asked.
	Definitive bool
	// InvalidData is true when the source exists but its data is not a
	// usable CA (garbage PEM, a private key, no certificate).
	InvalidData bool
	// NotFound is true when the source object does not exist.
	NotFound bool
	// NotHeld is true when a HeldOnly request named a source the resolver
	// does not hold.
	NotHeld bool
}

// notHeld is the answer to a HeldOnly request for a source the resolver
// does not hold.
func notHeld(source string) error {
	return &SourceError{Source: source, Reason: "the guard does not read this source yet (no writer's request named it); the observer does not start reading sources an observed object names", NotHeld: true}
}

// IsNotHeld reports whether err answers a HeldOnly request for a source the
// resolver does not hold.
func IsNotHeld(err error) bool {
	var se *SourceError
	return errors.As(err, &se) && se.NotHeld
}

// IsNotFound reports whether err says the source object does not exist.
func IsNotFound(err error) bool {
	var se *SourceError
	return errors.As(err, &se) && se.NotFound
}

func (e *SourceError) Error() string {
	return fmt.Sprintf("cannot read the owner's CA from %s: %s", e.Source, e.Reason)
}

// source is one resolvable CA source.
type source struct {
	key  string
	read func(ctx context.Context, reader client.Reader) (cabundle.CASet, error)
}

// heldBy reads the source through w's running watches only.
func (s source) heldBy(w *WatchReader) source {
	read := s.read
	s.read = func(ctx context.Context, reader client.Reader) (cabundle.CASet, error) {
		// Whatever error the read wraps the miss in, a miss is a miss.
		h := &heldReader{r: w}
		set, err := read(ctx, h)
		if rec, ok := reader.(*recordingReader); ok {
			// The answer is memoized for every request: it must carry the
			// watches it came from, or their failures would never make it
			// stale.
			rec.keys = append(rec.keys, h.keys...)
		}
		if h.missed {
			return cabundle.CASet{}, notHeld(s.key)
		}
		return set, err
	}
	return s
}
