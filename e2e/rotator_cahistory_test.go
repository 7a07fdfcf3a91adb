package e2e

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
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
	// seen is when the poll first saw each CA of order.
	seen []time.Time
}

func recordCAHistory(t *testing.T, env *framework.Env, r *framework.Rotator) *caHistory {
	return recordSecretCAHistory(t, env, r.Opts.Namespace, r.Opts.Secret, "ca.crt")
}

// recordSecretCAHistory polls the CA in key of Secret namespace/name every
// 10 ms until the test ends.
func recordSecretCAHistory(t *testing.T, env *framework.Env, namespace, name, key string) *caHistory {
	h := &caHistory{}
	secrets := env.AdminKube.CoreV1().Secrets(namespace)
	ctx := t.Context()
	go func() {
		for ctx.Err() == nil {
			if s, err := secrets.Get(ctx, name, metav1.GetOptions{}); err == nil {
				if fps, err := cabundle.Parse(s.Data[key]); err == nil && len(fps) == 1 {
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
		h.seen = append(h.seen, time.Now())
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

// String lists the CAs with when the poll first saw each.
func (h *caHistory) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	parts := make([]string, len(h.order))
	for i, fp := range h.order {
		parts[i] = fp + "@" + h.seen[i].Format("15:04:05.000")
	}
	return strings.Join(parts, " ")
}

// pollSlack is how late the 10 ms poll may see a CA the Secret already
// held (the poll's period and its GET).
const pollSlack = 250 * time.Millisecond

// replacedBy says whether the Secret held a CA newer than fp by at.
func (h *caHistory) replacedBy(fp string, at time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := slices.Index(h.order, fp)
	return i >= 0 && i+1 < len(h.order) && !h.seen[i+1].After(at.Add(pollSlack))
}

// sentCAs are the short fingerprints of every caBundle certificate a
// webhook configuration or CRD write sent (its request object, from the
// audit log); nil when the request was not recorded or holds none.
func sentCAs(w framework.AuditedWrite) []string {
	type clientConfig struct {
		CABundle []byte `json:"caBundle"`
	}
	var obj struct {
		Webhooks []struct {
			ClientConfig clientConfig `json:"clientConfig"`
		} `json:"webhooks"`
		// A CRD's conversion webhook.
		Spec struct {
			Conversion struct {
				Webhook struct {
					ClientConfig *clientConfig `json:"clientConfig"`
				} `json:"webhook"`
			} `json:"conversion"`
		} `json:"spec"`
	}
	if len(w.Request) == 0 || json.Unmarshal(w.Request, &obj) != nil {
		return nil
	}
	bundles := make([][]byte, 0, len(obj.Webhooks)+1)
	for _, wh := range obj.Webhooks {
		bundles = append(bundles, wh.ClientConfig.CABundle)
	}
	if cc := obj.Spec.Conversion.Webhook.ClientConfig; cc != nil {
		bundles = append(bundles, cc.CABundle)
	}
	var out []string
	for _, b := range bundles {
		fps, err := cabundle.Parse(b)
		if err != nil {
			continue
		}
		for _, fp := range fps {
			out = append(out, fp.Short())
		}
	}
	return out
}

// staleRequests splits denied writes as staleWrites does, from the CAs
// each write sent rather than from the denial's message: a policy-shape
// denial cannot name the CA it found (CEL cannot parse PEM). A write is
// stale when every CA it sent had been replaced in the Secret when
// kube-apiserver received it.
func staleRequests(denied []framework.AuditedWrite, h *caHistory) (stale, other []framework.AuditedWrite) {
	return splitBySentCAs(denied, h.replacedBy)
}

// splitBySentCAs splits denied writes into those that sent at least one
// CA and only CAs for which is(fp, received) holds, and the others.
func splitBySentCAs(denied []framework.AuditedWrite, is func(fp string, at time.Time) bool) (match, other []framework.AuditedWrite) {
	for _, w := range denied {
		cas := sentCAs(w)
		ok := len(cas) > 0
		for _, fp := range cas {
			ok = ok && is(fp, w.Received)
		}
		if ok {
			match = append(match, w)
		} else {
			other = append(other, w)
		}
	}
	return match, other
}

// paramLagRequests picks, from denied writes that are not stale, those
// that sent only CAs the Secret had held for at most pollSlack when
// kube-apiserver received them (by the poll's clock, which sees a change
// late, not early): the rotator updates its Secret and injects the new CA
// within milliseconds, and kube-apiserver reads the policy's param from its
// own informer, which may not have delivered the updated Secret yet. The
// rotator's retry passes once it has.
func paramLagRequests(denied []framework.AuditedWrite, h *caHistory) (lag, other []framework.AuditedWrite) {
	return splitBySentCAs(denied, h.freshAt)
}

// freshAt says whether the Secret had held fp for at most pollSlack at at.
func (h *caHistory) freshAt(fp string, at time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := slices.Index(h.order, fp)
	return i >= 0 && !h.seen[i].Before(at.Add(-pollSlack))
}

// Test_paramLagRequests: a denied write passes as kube-apiserver's param
// lag only when every CA it sent had just reached the Secret.
func Test_paramLagRequests(t *testing.T) {
	a, b := framework.NewCA(t, "a"), framework.NewCA(t, "b")
	t0 := time.Now()
	h := &caHistory{order: []string{shortOf(t, a.PEM), shortOf(t, b.PEM)}, seen: []time.Time{t0, t0.Add(time.Second)}}
	lag, other := paramLagRequests([]framework.AuditedWrite{
		auditedWrite(t, t0.Add(time.Second-5*time.Millisecond), b.PEM), // b sent before the poll saw it: lag
		auditedWrite(t, t0.Add(time.Second+100*time.Millisecond), b.PEM),
		auditedWrite(t, t0.Add(2*time.Second), b.PEM), // b current for a second: not lag
		auditedWrite(t, t0.Add(time.Second), a.PEM, b.PEM),
		{Code: 403},
	}, h)
	if len(lag) != 2 || len(other) != 3 {
		t.Fatalf("lag %d, other %d; want 2 and 3", len(lag), len(other))
	}
}

// Test_staleRequests: a denied write passes as stale only when every CA it
// sent had been replaced in the Secret by the time it was received.
func Test_staleRequests(t *testing.T) {
	a, b := framework.NewCA(t, "a"), framework.NewCA(t, "b")
	t0 := time.Now()
	h := &caHistory{order: []string{shortOf(t, a.PEM), shortOf(t, b.PEM)}, seen: []time.Time{t0, t0.Add(time.Second)}}
	write := func(at time.Time, pems ...[]byte) framework.AuditedWrite { return auditedWrite(t, at, pems...) }
	stale, other := staleRequests([]framework.AuditedWrite{
		write(t0.Add(2*time.Second), a.PEM, a.PEM), // a after b replaced it: stale
		write(t0.Add(100*time.Millisecond), a.PEM), // a while it was current
		write(t0.Add(2*time.Second), b.PEM),        // the current CA
		write(t0.Add(2*time.Second), a.PEM, b.PEM), // one entry current
		{Code: 403}, // nothing recorded
	}, h)
	if len(stale) != 1 || len(other) != 4 {
		t.Fatalf("stale %d, other %d; want 1 and 4", len(stale), len(other))
	}
}

// shortOf is the short fingerprint of a one-certificate PEM.
func shortOf(t *testing.T, pem []byte) string {
	t.Helper()
	fps, err := cabundle.Parse(pem)
	if err != nil {
		t.Fatal(err)
	}
	return fps[0].Short()
}

// auditedWrite is a denied write, received at the given time, whose
// webhooks carry pems.
func auditedWrite(t *testing.T, at time.Time, pems ...[]byte) framework.AuditedWrite {
	t.Helper()
	var obj struct {
		Webhooks []map[string]map[string][]byte `json:"webhooks"`
	}
	for _, p := range pems {
		obj.Webhooks = append(obj.Webhooks, map[string]map[string][]byte{"clientConfig": {"caBundle": p}})
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return framework.AuditedWrite{Code: 403, Received: at, Request: raw}
}
