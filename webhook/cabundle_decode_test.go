package webhook

import (
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Test_caBundle_decodesAsBytes: whether a bundle is decoded or found in the
// cache, the result (and any error) is what decoding into []byte gives.
func Test_caBundle_decodesAsBytes(t *testing.T) {
	pem := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	b64 := base64.StdEncoding.EncodeToString(pem)
	tests := map[string]struct {
		json   string
		exp    []byte
		expErr string
	}{
		"if the bundle is base64, decode it":           {json: `"` + b64 + `"`, exp: pem},
		"if the bundle is null, it is nil":             {json: `null`},
		"if the bundle is empty, it is empty":          {json: `""`, exp: []byte{}},
		"if the text has an escape, unescape it first": {json: `"` + strings.Replace(b64, "/", `\/`, 1) + `"`, exp: pem},
		"if the bundle is not base64, fail as []byte does": {
			json:   `"not base64!"`,
			expErr: `illegal base64 data at input byte 3`,
		},
		"if the bundle is not a string, fail as []byte does": {
			json: `42`,
			// jsonv2 says "cannot" or "unable to" at random, once per
			// process, so only the rest of the message is pinned here.
			expErr: `unmarshal JSON number into Go []uint8`,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			for round := range 2 { // the second round may hit the cache
				var want []byte
				wantErr := jsonv2.Unmarshal([]byte(test.json), &want)
				var got caBundle
				err := jsonv2.Unmarshal([]byte(test.json), &got)
				if test.expErr != "" {
					require.Error(t, err, "round %d", round)
					require.Error(t, wantErr)
					assert.Contains(t, err.Error(), test.expErr, "round %d", round)
					assert.Equal(t, wantErr.Error(), err.Error(), "round %d: as []byte fails", round)
					continue
				}
				require.NoError(t, err, "round %d", round)
				require.NoError(t, wantErr)
				assert.Equal(t, test.exp, []byte(got), "round %d", round)
				assert.Equal(t, want, []byte(got), "round %d: as []byte decodes it", round)
			}
		})
	}
}

// Test_caBundle_cacheIsBounded: a stream of distinct bundles (a hostile
// client's) never grows the cache past its bound, and bundles over the size
// bound are decoded but never kept.
func Test_caBundle_cacheIsBounded(t *testing.T) {
	for i := range 10 * maxCachedBundles {
		var b caBundle
		require.NoError(t, jsonv2.Unmarshal([]byte(`"`+base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "bundle-%d", i))+`"`), &b))
		decodedBundles.mu.RLock()
		n := len(decodedBundles.m)
		decodedBundles.mu.RUnlock()
		require.LessOrEqual(t, n, maxCachedBundles)
	}
	big := base64.StdEncoding.EncodeToString(make([]byte, maxCachedBundleText))
	var b caBundle
	require.NoError(t, jsonv2.Unmarshal([]byte(`"`+big+`"`), &b))
	assert.Len(t, []byte(b), maxCachedBundleText)
	_, kept := decodedBundles.get([]byte(big))
	assert.False(t, kept, "a bundle over the size bound is not kept")
}

// Test_caBundle_concurrent: requests decode concurrently (run with -race).
func Test_caBundle_concurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				pem := fmt.Appendf(nil, "bundle-%d", (g+i)%20)
				var b caBundle
				if err := jsonv2.Unmarshal([]byte(`"`+base64.StdEncoding.EncodeToString(pem)+`"`), &b); err != nil || string(b) != string(pem) {
					t.Errorf("decoded %q (%v); want %q", b, err, pem)
					return
				}
			}
		})
	}
	wg.Wait()
}
