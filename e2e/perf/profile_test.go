package perf

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// freeLoopbackAddr is a 127.0.0.1 address with a port free right now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// cpuProfile starts fetching a CPU profile of the guard over d from its
// --pprof-bind-address and returns a function that waits for it and writes
// it to path (LOADTEST_CPUPROFILE=path make loadtest; read it with
// go tool pprof). The profile covers the open loop, the phase the p99
// target is about.
func cpuProfile(t *testing.T, addr string, d time.Duration, path string) func() {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds()))
		resp, err := http.Get(url) // bounded by the seconds parameter
		if err != nil {
			errc <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			errc <- fmt.Errorf("GET %s: %s", url, resp.Status)
			return
		}
		f, err := os.Create(path)
		if err != nil {
			errc <- err
			return
		}
		if _, err := io.Copy(f, resp.Body); err != nil {
			f.Close()
			errc <- err
			return
		}
		errc <- f.Close()
	}()
	return func() {
		if err := <-errc; err != nil {
			t.Errorf("CPU profile of the guard: %v", err)
			return
		}
		t.Logf("CPU profile of the guard over the open loop: %s (go tool pprof %s)", path, path)
	}
}
