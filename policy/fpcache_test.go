package policy

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func Test_FingerprintCache(t *testing.T) {
	f := testFixtures(t)
	tests := map[string]struct {
		data []byte
	}{
		"if the bundle is one CA, answer as ParseBundle":          {data: f.Owner.PEM},
		"if the bundle is a rotation overlap, answer in order":    {data: bundle(f.Owner.PEM, f.OwnerNew.PEM)},
		"if the bundle is garbage, answer ParseBundle's error":    {data: []byte("not pem")},
		"if the bundle holds a private key, answer ParseBundle's": {data: f.KeyPEM},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			c := NewFingerprintCache(0)
			wantFPs, wantErr := ParseBundle(test.data)
			for range 2 { // a miss, then a hit
				fps, err := c.Parse(test.data)
				assert.Equal(t, wantFPs, fps)
				assert.Equal(t, wantErr, err)
				assert.Equal(t, sha256.Sum256(test.data), c.Sum(test.data))
			}
			assert.Equal(t, 1, c.Len())
		})
	}

	t.Run("if more bundles than its size are parsed, keep only the most recently used", func(t *testing.T) {
		c := NewFingerprintCache(2)
		garbage := func(i int) []byte { return fmt.Appendf(nil, "garbage %d", i) }
		for i := range 5 {
			_, err := c.Parse(garbage(i))
			require.Error(t, err)
		}
		assert.Equal(t, 2, c.Len())
		_, ok := c.entries["garbage 4"]
		assert.True(t, ok, "the most recent bundle is kept")
		_, ok = c.entries["garbage 0"]
		assert.False(t, ok, "the oldest bundle is evicted")
	})

	t.Run("if a bundle is larger than MaxCachedBundleBytes, parse it without caching it", func(t *testing.T) {
		c := NewFingerprintCache(0)
		big := bundle(f.Owner.PEM, make([]byte, MaxCachedBundleBytes))
		fps, err := c.Parse(big)
		require.NoError(t, err)
		assert.Equal(t, []Fingerprint{f.Owner.FP}, fps)
		assert.Equal(t, 0, c.Len())
	})

	t.Run("if the cache is nil, parse every time", func(t *testing.T) {
		var c *FingerprintCache
		fps, err := c.Parse(f.Owner.PEM)
		require.NoError(t, err)
		assert.Equal(t, []Fingerprint{f.Owner.FP}, fps)
	})
}

// Test_Decide_withFingerprintCache: the cache changes how fast a decision
// is, never what it is.
func Test_Decide_withFingerprintCache(t *testing.T) {
	f := testFixtures(t)
	c := mustLoad(t, decideDoc(f))
	in := Input{
		Operation:   OperationUpdate,
		Kind:        KindValidating,
		Name:        "koord",
		User:        User{Username: sa("koordinator-system", "koord-manager")},
		CA:          CAResult{Set: NewCASetFromFingerprints("secret koordinator-system/webhook-certs", f.Owner.FP), Resolved: true},
		OldWebhooks: []Webhook{{Name: "a", CABundle: f.Owner.PEM}, {Name: "b", CABundle: f.Owner.PEM}},
		Webhooks:    []Webhook{{Name: "a", CABundle: f.Foreign.PEM}, {Name: "b", CABundle: []byte("garbage")}},
	}
	want := c.Decide(&in)
	in.Fingerprints = NewFingerprintCache(0)
	for range 2 {
		assert.Equal(t, want, c.Decide(&in))
	}
}
