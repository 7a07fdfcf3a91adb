package framework

import (
	"fmt"
	"net"
	"testing"
)

// TestFreePortOutsideEphemeralRange: FreePort never repeats a port and,
// where the kernel leaves room below its ephemeral range, draws from there,
// so no port-0 listener or outgoing connection of a parallel test can take
// it before the guard binds it. Each port is bindable when returned.
func TestFreePortOutsideEphemeralRange(t *testing.T) {
	lo, hi, below := drawRange()
	seen := map[int]bool{}
	for range 50 {
		p := FreePort(t)
		if seen[p] {
			t.Fatalf("FreePort returned %d twice", p)
		}
		seen[p] = true
		if below && (p < lo || p >= hi) {
			t.Errorf("FreePort returned %d; want it in [%d, %d), below the ephemeral range", p, lo, hi)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("port %d from FreePort cannot be bound: %v", p, err)
		}
		_ = l.Close()
	}
}
