package writebudget

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type take struct {
	at         time.Duration // since t0
	key        string
	perMinute  int
	ok         bool
	retryAfter time.Duration
}

// Test_Limiter_Take: writes within the budget pass and count; the excess
// is refused with the time until the oldest counted write leaves the
// window; refused writes do not count; keys are independent; a cut budget
// applies at once.
func Test_Limiter_Take(t *testing.T) {
	tests := map[string][]take{
		"within budget": {
			{at: 0, perMinute: 2, ok: true},
			{at: time.Second, perMinute: 2, ok: true},
		},
		"over budget, retry when the oldest leaves": {
			{at: 0, perMinute: 2, ok: true},
			{at: 10 * time.Second, perMinute: 2, ok: true},
			{at: 20 * time.Second, perMinute: 2, retryAfter: 40 * time.Second},
			{at: 59 * time.Second, perMinute: 2, retryAfter: time.Second},
			{at: 60 * time.Second, perMinute: 2, ok: true},
			{at: 61 * time.Second, perMinute: 2, retryAfter: 9 * time.Second},
		},
		"refused writes are not counted": {
			{at: 0, perMinute: 1, ok: true},
			{at: time.Second, perMinute: 1, retryAfter: 59 * time.Second},
			{at: 2 * time.Second, perMinute: 1, retryAfter: 58 * time.Second},
			{at: time.Minute, perMinute: 1, ok: true},
		},
		"keys are independent": {
			{at: 0, key: "a", perMinute: 1, ok: true},
			{at: 0, key: "b", perMinute: 1, ok: true},
			{at: time.Second, key: "a", perMinute: 1, retryAfter: 59 * time.Second},
		},
		"writers are independent": {
			{at: 0, key: "a", perMinute: 1, ok: true},
			{at: 0, key: "a/other-writer", perMinute: 1, ok: true},
			{at: time.Second, key: "a", perMinute: 1, retryAfter: 59 * time.Second},
		},
		"a cut budget applies at once": {
			{at: 0, perMinute: 3, ok: true},
			{at: 10 * time.Second, perMinute: 3, ok: true},
			{at: 20 * time.Second, perMinute: 3, ok: true},
			{at: 30 * time.Second, perMinute: 1, retryAfter: 50 * time.Second},
		},
		"a raised budget applies at once": {
			{at: 0, perMinute: 1, ok: true},
			{at: time.Second, perMinute: 2, ok: true},
		},
	}
	for name, takes := range tests {
		t.Run(name, func(t *testing.T) {
			l := NewLimiter()
			for i, tk := range takes {
				name, writer, _ := strings.Cut(tk.key, "/")
				ok, retry := l.Take(Key{Mapping: "app", Kind: "ValidatingWebhookConfiguration", Name: "cfg" + name, Writer: writer}, tk.perMinute, t0.Add(tk.at))
				assert.Equal(t, tk.ok, ok, "take %d", i)
				assert.Equal(t, tk.retryAfter, retry, "take %d", i)
			}
		})
	}
}

// Test_Limiter_sweep: a key with no write left in the window is forgotten.
func Test_Limiter_sweep(t *testing.T) {
	l := NewLimiter()
	l.Take(Key{Name: "a"}, 1, t0)
	l.Take(Key{Name: "b"}, 1, t0.Add(30*time.Second))
	assert.Equal(t, 2, l.keys())
	l.Take(Key{Name: "b"}, 1, t0.Add(80*time.Second))
	assert.Equal(t, 1, l.keys(), "a left the window and is forgotten")
}

// Test_Limiter_concurrent: concurrent writers together get exactly the
// budget within a window.
func Test_Limiter_concurrent(t *testing.T) {
	l := NewLimiter()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed int
	)
	for range 8 {
		wg.Go(func() {
			for i := range 100 {
				if ok, _ := l.Take(Key{Name: "cfg"}, 30, t0.Add(time.Duration(i)*time.Millisecond)); ok {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 30, allowed)
}
