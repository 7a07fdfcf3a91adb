package e2e

import (
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// caHistory is every CA the rotator's Secret held, in order (short
// fingerprints, as the guard's messages print them), polled every 10 ms
// from the start of the test.
type caHistory struct {
	mu    sync.Mutex
	order []string
}

func recordCAHistory(t *testing.T, env *framework.Env, r *framework.Rotator) *caHistory {
	h := &caHistory{}
	secrets := env.AdminKube.CoreV1().Secrets(r.Opts.Namespace)
	ctx := t.Context()
	go func() {
		for ctx.Err() == nil {
			if s, err := secrets.Get(ctx, r.Opts.Secret, metav1.GetOptions{}); err == nil {
				if fps, err := cabundle.Parse(s.Data["ca.crt"]); err == nil && len(fps) == 1 {
					h.add(fps[0].Short())
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return h
}

func (h *caHistory) add(fp string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.order) == 0 || h.order[len(h.order)-1] != fp {
		h.order = append(h.order, fp)
	}
}

// earlier says whether the Secret held old before it held current.
func (h *caHistory) earlier(old, current string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	i, j := slices.Index(h.order, old), slices.Index(h.order, current)
	return i >= 0 && j >= 0 && i < j
}

var mismatchCAs = regexp.MustCompile(`expected CA ([0-9a-f]+), found ([0-9a-f]+)`)

// staleWrites splits the rotator's denied writes into those that wrote a
// CA its Secret had already replaced (cert-controller reads the Secret
// from its informer cache: a reconcile racing its own rotation injects
// the previous CA; the guard denies that as a bundle without the current
// CA, and the rotator's retry injects the new one) and any other.
func staleWrites(denied []framework.AuditedWrite, h *caHistory) (stale, other []framework.AuditedWrite) {
	for _, w := range denied {
		ms := mismatchCAs.FindAllStringSubmatch(w.Message, -1)
		ok := len(ms) > 0
		for _, m := range ms {
			ok = ok && h.earlier(m[2], m[1])
		}
		if ok {
			stale = append(stale, w)
		} else {
			other = append(other, w)
		}
	}
	return stale, other
}

// Test_staleWrites: a denial passes as stale only when every CA it found
// was held by the Secret before the CA the guard expected.
func Test_staleWrites(t *testing.T) {
	h := &caHistory{}
	for _, fp := range []string{"aaaa", "bbbb", "cccc"} {
		h.add(fp)
	}
	deny := func(expected, found string) framework.AuditedWrite {
		return framework.AuditedWrite{Code: 403, Message: "ca-mismatch: ... [expected CA " + expected + ", found " + found + "]; hint"}
	}
	stale, other := staleWrites([]framework.AuditedWrite{
		deny("bbbb", "aaaa"), // the previous CA: stale
		deny("aaaa", "bbbb"), // a newer CA than the guard's: the guard behind, not stale
		deny("cccc", "ffff"), // a CA the Secret never held
		{Code: 403, Message: "not-owner"},
	}, h)
	if len(stale) != 1 || len(other) != 3 {
		t.Fatalf("stale %d, other %d; want 1 and 3", len(stale), len(other))
	}
}
