package cabundle

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func Test_FingerprintCache(t *testing.T) {
	f := testFixtures(t)
	tests := map[string]struct {
		data []byte
	}{
		"if the bundle is one CA, answer as Parse":             {data: f.Owner.PEM},
		"if the bundle is a rotation overlap, answer in order": {data: slices.Concat(f.Owner.PEM, f.OwnerNew.PEM)},
		"if the bundle is garbage, answer Parse's error":       {data: []byte("not pem")},
		"if the bundle holds a private key, answer Parse's":    {data: f.KeyPEM},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			c := NewFingerprintCache(0)
			wantFPs, wantErr := Parse(test.data)
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

	t.Run("if a bundle is larger than MaxCachedBytes, parse it without caching it", func(t *testing.T) {
		c := NewFingerprintCache(0)
		big := slices.Concat(f.Owner.PEM, make([]byte, MaxCachedBytes))
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
