package policy

import (
	"crypto/sha256"
	"sort"
	"sync"
	"time"
)

// FlapReport describes a configuration whose caBundle is flapping: more
// distinct values were written (or attempted, when denied) within the window
// than a rotation ever needs. It is the signature of several replicas, each
// with its own CA, fighting over one configuration.
type FlapReport struct {
	Kind            ConfigKind
	Name            string
	DistinctBundles int
	Window          time.Duration
	// Writers are the subjects that wrote within the window, sorted.
	Writers []string
}

type flapWrite struct {
	at     time.Time
	hash   [sha256.Size]byte
	writer string
}

// FlapDetector tracks caBundle writes per configuration. It does no I/O and
// takes the time as an argument, so it is deterministic under test; it is
// safe for concurrent use.
type FlapDetector struct {
	mu       sync.Mutex
	writes   map[flapKey][]flapWrite
	reported map[flapKey]time.Time
	max      int
	window   time.Duration
}

type flapKey struct {
	kind ConfigKind
	name string
}

// maxTrackedWrites bounds memory per configuration under a write storm.
const maxTrackedWrites = 256

// NewFlapDetector reports a configuration once more than maxDistinct
// distinct caBundle values were written to it within window.
func NewFlapDetector(maxDistinct int, window time.Duration) *FlapDetector {
	return &FlapDetector{writes: map[flapKey][]flapWrite{}, reported: map[flapKey]time.Time{}, max: maxDistinct, window: window}
}

// Observe records the caBundle writes of one request and returns a report
// when the configuration is flapping. A flapping configuration is reported
// at most once per window, so that the report itself never becomes a storm.
func (f *FlapDetector) Observe(d *Decision, now time.Time) (FlapReport, bool) {
	if len(d.Changes) == 0 || d.DryRun {
		return FlapReport{}, false
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
		ws = append(ws, flapWrite{at: now, hash: c.Hash, writer: d.Subject})
	}
	if len(ws) > maxTrackedWrites {
		ws = ws[len(ws)-maxTrackedWrites:]
	}
	f.writes[key] = ws

	distinct := map[[sha256.Size]byte]struct{}{}
	writers := map[string]struct{}{}
	for _, w := range ws {
		distinct[w.hash] = struct{}{}
		writers[w.writer] = struct{}{}
	}
	if len(distinct) <= f.max {
		return FlapReport{}, false
	}
	if last, ok := f.reported[key]; ok && now.Sub(last) < f.window {
		return FlapReport{}, false
	}
	f.reported[key] = now
	r := FlapReport{Kind: d.Kind, Name: d.Name, DistinctBundles: len(distinct), Window: f.window}
	for w := range writers {
		r.Writers = append(r.Writers, w)
	}
	sort.Strings(r.Writers)
	return r, true
}
