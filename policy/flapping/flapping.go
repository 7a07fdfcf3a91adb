package flapping

import (
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Report describes a configuration whose caBundle is flapping: more
// distinct values were written (or attempted, when denied) within the window
// than a rotation ever needs. It is the signature of several replicas, each
// with its own CA, fighting over one configuration.
type Report struct {
	Kind            policy.GuardedKind
	Name            string
	DistinctBundles int
	Window          time.Duration
	// Writers are the subjects that wrote within the window, sorted.
	Writers []string
	// Observed is set by the observer: the writes were seen in a watch,
	// not answered as requests.
	Observed bool
}

type flapWrite struct {
	at     time.Time
	hash   [sha256.Size]byte
	writer string
}

// Detector tracks caBundle writes per configuration. It does no I/O and
// takes the time as an argument, so it is deterministic under test; it is
// safe for concurrent use.
type Detector struct {
	mu       sync.Mutex
	writes   map[flapKey][]flapWrite
	reported map[flapKey]time.Time
	max      int
	window   time.Duration
	// swept is when expired configurations were last dropped.
	swept time.Time
}

type flapKey struct {
	kind policy.GuardedKind
	name string
}

// Bounds of a Detector. Configuration names come from requests (a
// selector mapping claims any name its labels match), so the per-name state
// is bounded: a configuration with no write within the window is dropped,
// and at most maxTrackedConfigs are tracked (the least recently written
// goes first).
const (
	// maxTrackedWrites bounds memory per configuration under a write storm:
	// the distinct (bundle, writer) pairs tracked.
	maxTrackedWrites = 256
	// maxTrackedConfigs bounds how many configurations are tracked.
	maxTrackedConfigs = 1024
)

// NewDetector reports a configuration once more than maxDistinct
// distinct caBundle values were written to it within window.
func NewDetector(maxDistinct int, window time.Duration) *Detector {
	return &Detector{writes: map[flapKey][]flapWrite{}, reported: map[flapKey]time.Time{}, max: maxDistinct, window: window}
}

// Observe records the caBundle writes of one request and returns a report
// when the configuration is  A flapping configuration is reported
// at most once per window, so that the report itself never becomes a storm.
func (f *Detector) Observe(d *policy.Decision, now time.Time) (Report, bool) {
	if len(d.Changes) == 0 || d.DryRun {
		return Report{}, false
	}
	key := flapKey{d.Kind, d.Name}
	f.mu.Lock()
	defer f.mu.Unlock()
	ws := f.writes[key]
	cut := 0
	for cut < len(ws) && now.Sub(ws[cut].at) > f.window {
		cut++
	}
	ws = ws[cut:]
	for _, c := range d.Changes {
		// One entry per (bundle, writer), at its latest write: a writer
		// re-writing the bundle it wrote before moves that entry to the end
		// (writes are kept in time order for the cut above) instead of
		// adding one, so the scans here and in distinctHashes cover the
		// distinct writes (a handful) rather than the last 256.
		w := flapWrite{at: now, hash: c.Hash, writer: d.Subject}
		if i := slices.IndexFunc(ws, func(x flapWrite) bool { return x.hash == w.hash && x.writer == w.writer }); i >= 0 {
			ws = slices.Delete(ws, i, i+1)
		}
		ws = append(ws, w)
	}
	if len(ws) > maxTrackedWrites {
		ws = ws[len(ws)-maxTrackedWrites:]
	}
	f.writes[key] = ws
	f.prune(key, now)

	// Most writes are the owner re-writing the same bundle: count distinct
	// values only up to the threshold, without allocating, and build the
	// report only when it fires (at most once per window).
	if distinctHashes(ws, f.max+1) <= f.max {
		return Report{}, false
	}
	if last, ok := f.reported[key]; ok && now.Sub(last) < f.window {
		return Report{}, false
	}
	f.reported[key] = now
	r := Report{Kind: d.Kind, Name: d.Name, DistinctBundles: distinctHashes(ws, len(ws)), Window: f.window}
	for _, w := range ws {
		if !slices.Contains(r.Writers, w.writer) {
			r.Writers = append(r.Writers, w.writer)
		}
	}
	slices.Sort(r.Writers)
	return r, true
}

// Current keeps one Detector for the flapping settings in
// force, replacing it when a reload changed them. The zero value is ready;
// it is safe for concurrent use.
type Current struct {
	mu       sync.Mutex
	d        *Detector
	settings guardapi.FlappingSettings
}

// For returns the detector for settings.
func (c *Current) For(settings guardapi.FlappingSettings) *Detector {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.d == nil || c.settings != settings {
		c.d = NewDetector(settings.MaxDistinctBundles, settings.Window.Duration)
		c.settings = settings
	}
	return c.d
}

// Forget drops what is tracked for a configuration (it was deleted), so
// that memory follows the configurations that exist.
func (f *Detector) Forget(kind policy.GuardedKind, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.writes, flapKey{kind, name})
	delete(f.reported, flapKey{kind, name})
}

// prune drops configurations with no write within the window (at most once
// per window, so its cost is amortized over the writes), then the least
// recently written ones while more than maxTrackedConfigs are tracked.
// current, just written, is kept.
func (f *Detector) prune(current flapKey, now time.Time) {
	if now.Sub(f.swept) > f.window || len(f.writes) > maxTrackedConfigs {
		f.swept = now
		for k, ws := range f.writes {
			if k != current && (len(ws) == 0 || now.Sub(ws[len(ws)-1].at) > f.window) {
				delete(f.writes, k)
			}
		}
		for k, at := range f.reported {
			if now.Sub(at) >= f.window {
				delete(f.reported, k)
			}
		}
	}
	for len(f.writes) > maxTrackedConfigs {
		var oldest flapKey
		var oldestAt time.Time
		for k, ws := range f.writes {
			if k != current && (oldestAt.IsZero() || ws[len(ws)-1].at.Before(oldestAt)) {
				oldest, oldestAt = k, ws[len(ws)-1].at
			}
		}
		delete(f.writes, oldest)
		delete(f.reported, oldest)
	}
}

// Tracked is how many configurations the detector holds state for.
func (f *Detector) Tracked() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.writes)
}

// distinctHashes counts the distinct bundle hashes in ws, stopping at limit.
func distinctHashes(ws []flapWrite, limit int) int {
	var seenBuf [8][sha256.Size]byte // on the stack for the usual threshold
	seen := seenBuf[:0]
	for _, w := range ws {
		if !slices.Contains(seen, w.hash) {
			if seen = append(seen, w.hash); len(seen) >= limit {
				break
			}
		}
	}
	return len(seen)
}
