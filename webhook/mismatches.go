package webhook

import (
	"strings"
	"sync"
	"time"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// Bounds of confirmedMismatches.
const (
	// mismatchMemoFor is how long a confirmed ca-mismatch is denied without
	// waiting for the CA source again: far longer than a watch takes to
	// deliver a rotation, short enough that a CA adopted later is re-checked.
	mismatchMemoFor = 10 * time.Second
	// maxMismatchMemo bounds the remembered mismatches. Only writers and
	// break-glass subjects reach a CA check, so this is their distinct
	// foreign CAs; past the bound the memo starts over.
	maxMismatchMemo = 1024
)

// confirmedMismatches remembers the ca-mismatches that were confirmed after
// waiting for the CA source to catch up, by mapping, foreign certificates
// and the owner's CA set they were foreign to. A confirmation says nothing
// about another CA set: once the source has rotated, the next write waits
// for it again (a rotation to the very CA confirmed foreign is allowed).
type confirmedMismatches struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func (c *confirmedMismatches) recent(key string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.seen[key]
	return ok && now.Sub(at) < mismatchMemoFor
}

func (c *confirmedMismatches) add(key string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil || len(c.seen) >= maxMismatchMemo {
		c.seen = map[string]time.Time{}
	}
	c.seen[key] = now
}

// mismatchKey names a decision's ca-mismatches: the mapping, the owner's CA
// set it was decided on (every fingerprint: the short form names a
// certificate for people, not for a cache) and every foreign certificate,
// in violation order.
func mismatchKey(d *policy.Decision, owner cabundle.CASet) string {
	var b strings.Builder
	b.WriteString(d.Mapping)
	for _, fp := range owner.Fingerprints() {
		b.WriteString("|" + fp.String())
	}
	for _, v := range d.Violations {
		if v.Rule == policy.RuleCAMismatch {
			b.WriteString("|" + v.Field + "=" + v.Detail + strings.Join(v.Found, ","))
		}
	}
	return b.String()
}
