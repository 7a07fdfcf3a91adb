package framework

import (
	"bytes"
	"testing"
	"time"
)

// WaitNewCA polls read every 10 ms until it returns a complete CA (ok)
// that is none of not, and returns it; after timeout the test fails with
// what, the writer's name, and its log's last lines. The real writers'
// WaitCA methods share it: each reads its own Secret.
func WaitNewCA(t testing.TB, timeout time.Duration, what string, log *Buffer, read func() (ca []byte, ok bool), not ...[]byte) []byte {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ca, fresh := read()
		for _, n := range not {
			fresh = fresh && !bytes.Equal(ca, n)
		}
		if fresh {
			return ca
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s within %s\n--- its log (last 20 lines) ---\n%s", what, timeout, log.Tail(20))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
