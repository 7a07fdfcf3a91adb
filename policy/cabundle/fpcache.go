package cabundle

import (
	"container/list"
	"crypto/sha256"
	"sync"
)

// Bounds of a FingerprintCache.
const (
	// DefaultFingerprintCacheSize is how many distinct bundles are kept:
	// a few per mapping in flight (old, new, rotation overlap) for a few
	// hundred mappings.
	DefaultFingerprintCacheSize = 512
	// MaxCachedBytes is the largest bundle that is cached; larger ones
	// (far beyond a rotation overlap of a few CAs) are parsed every time, so
	// the cache holds at most size × this many bytes of keys.
	MaxCachedBytes = 16 << 10
)

// FingerprintCache memoizes Parse by the raw caBundle bytes: the
// fingerprints of a bundle depend on nothing else (not on the owner, not on
// the owner's CA), so an entry can never be stale, and changing an owner's
// CA needs no invalidation. It is a bounded LRU, safe for concurrent use.
// Parsing a certificate costs ~12 µs; a hit costs a map lookup.
type FingerprintCache struct {
	size int

	mu      sync.Mutex
	entries map[string]*list.Element
	lru     list.List // of *fpEntry, most recently used first
}

type fpEntry struct {
	key string
	sum [sha256.Size]byte // of the raw bytes, for flapping detection
	fps []Fingerprint
	err error
}

// NewFingerprintCache returns a cache of at most size bundles
// (DefaultFingerprintCacheSize when size <= 0).
func NewFingerprintCache(size int) *FingerprintCache {
	if size <= 0 {
		size = DefaultFingerprintCacheSize
	}
	return &FingerprintCache{size: size, entries: make(map[string]*list.Element, size)}
}

// Parse is Parse, answered from the cache when the same bytes were
// parsed before. The returned slice is shared: callers must not modify it.
// A nil cache parses every time.
func (c *FingerprintCache) Parse(data []byte) ([]Fingerprint, error) {
	if c == nil || len(data) > MaxCachedBytes {
		return Parse(data)
	}
	ent := c.lookup(data)
	return ent.fps, ent.err
}

// Sum is the SHA-256 of the raw bundle bytes (BundleChange.Hash), answered
// from the cache when the bundle was seen before: hashing every entry of
// every request costs more than the rest of the decision.
func (c *FingerprintCache) Sum(data []byte) [sha256.Size]byte {
	if c == nil || len(data) > MaxCachedBytes {
		return sha256.Sum256(data)
	}
	return c.lookup(data).sum
}

// lookup returns the entry of data, parsing and hashing it on a miss.
func (c *FingerprintCache) lookup(data []byte) *fpEntry {
	c.mu.Lock()
	if e, ok := c.entries[string(data)]; ok { // no allocation: the compiler converts in place
		c.lru.MoveToFront(e)
		ent := e.Value.(*fpEntry)
		c.mu.Unlock()
		return ent
	}
	c.mu.Unlock()

	// Parse outside the lock; two goroutines may parse the same new bundle
	// once each, which is cheaper than serializing every parse.
	fps, err := Parse(data)
	ent := &fpEntry{key: string(data), sum: sha256.Sum256(data), fps: fps, err: err}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[ent.key]; ok {
		return e.Value.(*fpEntry)
	}
	c.entries[ent.key] = c.lru.PushFront(ent)
	for c.lru.Len() > c.size {
		oldest := c.lru.Back()
		c.lru.Remove(oldest)
		delete(c.entries, oldest.Value.(*fpEntry).key)
	}
	return ent
}

// Len is the number of cached bundles.
func (c *FingerprintCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
