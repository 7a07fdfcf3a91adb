package framework

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// WaitQuiet waits until the rotator has logged nothing for quiet (it logs
// every reconcile and every failed write), at most 10 s: its follow-up
// reconciles (each of its own writes is an event it reconciles again) and
// retries are over.
func (r *Rotator) WaitQuiet(t testing.TB, quiet time.Duration) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	last, since := len(r.Log.String()), time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			t.Fatalf("the rotator did not go quiet for %s within 10s\n--- its log (last 10 lines) ---\n%s", quiet, r.Log.Tail(10))
		}
		time.Sleep(20 * time.Millisecond)
		if n := len(r.Log.String()); n != last {
			last, since = n, time.Now()
		}
	}
}

// RotatorLogLine is one JSON line of the rotator's log.
type RotatorLogLine struct {
	Msg   string `json:"msg"`
	Error string `json:"error"`
	Name  string `json:"name"`
	TS    string `json:"ts"`
	Raw   string `json:"-"`
}

// LogLines are the rotator's log lines whose message is msg.
func (r *Rotator) LogLines(msg string) []RotatorLogLine {
	var out []RotatorLogLine
	sc := bufio.NewScanner(strings.NewReader(r.Log.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), msg) {
			continue
		}
		var l RotatorLogLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Msg != msg {
			continue
		}
		l.Raw = sc.Text()
		out = append(out, l)
	}
	return out
}

// FailedWebhookUpdates are the rotator's own reports of a webhook
// configuration update that failed (ReconcileWH.ensureCerts logs each
// one with the API error).
func (r *Rotator) FailedWebhookUpdates() []RotatorLogLine {
	return r.LogLines("Error updating webhook with certificate")
}
