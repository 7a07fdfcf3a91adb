package framework

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
)

// The ports handed out so far in this process: two FreePort calls never
// return the same port, though the first one's process may not have bound
// it yet.
var (
	portsMu sync.Mutex
	given   = map[int]bool{}
)

// Where FreePort draws from: below the kernel's ephemeral range (Linux
// defaults to 32768-60999). A port there is never handed out by the kernel
// to another listener asking for port 0 (envtest's etcd and kube-apiserver
// of the tests running in parallel) nor to an outgoing connection's local
// end, either of which would take the port between FreePort and the bind.
// The static webhook's port matters most: it is written into kube-apiserver's
// manifest before the guard starts, so the guard cannot move to another.
const (
	lowestPort       = 20000
	defaultEphemeral = 32768
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// outside the ephemeral range when the machine leaves room below it.
func FreePort(t testing.TB) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	if lo, hi, ok := drawRange(); ok {
		for range 200 {
			p := lo + rand.IntN(hi-lo)
			if given[p] {
				continue
			}
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				continue
			}
			_ = l.Close()
			given[p] = true
			return p
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	p := l.Addr().(*net.TCPAddr).Port
	given[p] = true
	return p
}

// drawRange is [lo, hi), the ports below the kernel's ephemeral range that
// FreePort draws from; ok is false when the range leaves too little room
// there (FreePort then asks for port 0).
func drawRange() (lo, hi int, ok bool) {
	hi = defaultEphemeral
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var first int
		if _, err := fmt.Sscan(string(b), &first); err == nil {
			hi = first
		}
	}
	return lowestPort, hi, hi > lowestPort+1000
}
