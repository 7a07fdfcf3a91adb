package writebudget

import (
	"sync"
	"time"
)

// Window is the span a budget counts writes over.
const Window = time.Minute

// Key names one budget: one writer's writes to a configuration of one
// mapping. Each writer has its own budget, so that one writer's loop
// cannot spend the budget of another writer of the same mapping (a
// controller churning between valid bundles would otherwise get the
// genuine rotation of cert-manager's cainjector refused). The writers are
// the mapping's declared ones (only writes the decision allowed are
// counted), so a configuration changes at most perMinute times a minute
// per writer.
type Key struct {
	Mapping string
	Kind    string
	Name    string
	// Writer is the user that made the write, as kube-apiserver names it.
	Writer string
}

// Limiter keeps, per key, the times of the writes it allowed within the
// last Window: exact (never more than the budget in any Window) at the
// cost of one timestamp per allowed write, which the budget's maximum
// bounds. Safe for concurrent use.
type Limiter struct {
	mu        sync.Mutex
	allowed   map[Key][]time.Time
	lastSweep time.Time
}

// NewLimiter returns a Limiter with no writes counted.
func NewLimiter() *Limiter {
	return &Limiter{allowed: map[Key][]time.Time{}}
}

// Take reports whether a write at now fits in perMinute writes per Window
// for key, and counts it if it does. A refused write is not counted (it
// did not happen); retryAfter is then how long until one fits. The budget
// is an argument so that a reloaded configuration applies at once.
func (l *Limiter) Take(key Key, perMinute int, now time.Time) (ok bool, retryAfter time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	log := expire(l.allowed[key], now)
	if len(log) < perMinute {
		l.allowed[key] = append(log, now)
		return true, 0
	}
	l.allowed[key] = log
	// Room is made when the write perMinute-th from the end leaves the
	// window (more than perMinute are kept only after a budget was cut).
	return false, log[len(log)-perMinute].Add(Window).Sub(now)
}

// expire drops the writes that left the window; log is in time order.
func expire(log []time.Time, now time.Time) []time.Time {
	i := 0
	for i < len(log) && !log[i].After(now.Add(-Window)) {
		i++
	}
	if i == len(log) {
		return nil
	}
	return log[i:]
}

// sweep forgets, once a Window, the keys with no write left in it, so
// configurations written once do not stay in memory.
func (l *Limiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < Window {
		return
	}
	l.lastSweep = now
	for k, log := range l.allowed {
		if len(expire(log, now)) == 0 {
			delete(l.allowed, k)
		}
	}
}

// keys is how many budgets are tracked, for tests.
func (l *Limiter) keys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.allowed)
}
