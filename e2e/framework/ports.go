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
	if top := ephemeralLow(); top > lowestPort+1000 {
		for range 200 {
			p := lowestPort + rand.IntN(top-lowestPort)
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

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return defaultEphemeral
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil {
		return defaultEphemeral
	}
	return lo
}
