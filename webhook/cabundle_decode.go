package webhook

import (
	"bytes"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// caBundle is a webhook entry's clientConfig.caBundle as the guard decodes
// it: the bytes behind the base64 text kube-apiserver sends. The same few
// bundles arrive again and again (a review carries each entry's old and
// new caBundle, and an owner re-writes its own CA), so decoded bundles are
// kept by their base64 text: a repeated bundle costs a map lookup instead
// of a base64 decode and a copy, which were a fifth of the whole admission
// path (BenchmarkGuard). Any text not in the cache is decoded exactly as a
// []byte field is, errors included. The bytes are shared between requests
// and must never be modified (nothing in the decision writes to them).
type caBundle []byte

// UnmarshalJSONFrom implements jsonv2.UnmarshalerFrom.
func (b *caBundle) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	val, err := dec.ReadValue()
	if err != nil {
		return err
	}
	// A JSON string whose text needs no unescaping (base64 never does) is
	// its own cache key.
	var key []byte
	if len(val) >= 2 && val[0] == '"' && len(val)-2 <= maxCachedBundleText && bytes.IndexByte(val, '\\') < 0 {
		key = val[1 : len(val)-1]
		if v, ok := decodedBundles.get(key); ok {
			*b = v
			return nil
		}
	}
	var raw []byte
	if err := jsonv2.Unmarshal(val, &raw); err != nil {
		return err
	}
	if key != nil && raw != nil {
		decodedBundles.put(key, raw)
	}
	*b = raw
	return nil
}

// Bounds of the decoded-bundle cache. Bundles come from requests, so a
// stream of distinct ones must not grow memory: only bundles up to 16 KiB
// of text (a chain of a dozen certificates) are kept, and the cache is
// emptied when it holds maxCachedBundles, so it never holds more than
// ~3.5 MiB (text and bytes). An emptied cache costs the next requests one
// decode each, which is what every request cost without it.
const (
	maxCachedBundleText = 16 << 10
	maxCachedBundles    = 128
)

// decodedBundles is shared by every Handler in the process: its entries
// depend on nothing but the text.
var decodedBundles = &bundleCache{m: map[string][]byte{}}

type bundleCache struct {
	mu sync.RWMutex
	m  map[string][]byte
}

func (c *bundleCache) get(text []byte) ([]byte, bool) {
	c.mu.RLock()
	v, ok := c.m[string(text)] // no allocation: the compiler looks up by the bytes
	c.mu.RUnlock()
	return v, ok
}

func (c *bundleCache) put(text, decoded []byte) {
	c.mu.Lock()
	if len(c.m) >= maxCachedBundles {
		clear(c.m)
	}
	c.m[string(text)] = decoded
	c.mu.Unlock()
}
