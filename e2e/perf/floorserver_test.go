package perf

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

// floorServerEnv names the certificate directory when the test binary is
// re-executed as the floor server (TestMain).
const floorServerEnv = "WEBHOOK_GUARD_PERF_FLOOR_SERVER"

// TestMain turns the test binary into the floor server when re-executed by
// startFloorServer, so the floor runs in its own process as the guard does
// and the load client's CPU is charged to neither.
func TestMain(m *testing.M) {
	if dir := os.Getenv(floorServerEnv); dir != "" {
		if err := serveFloor(dir); err != nil {
			fmt.Fprintln(os.Stderr, "floor server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveFloor is the least a webhook server can do with the same review:
// TLS (1.2+, h2 and http/1.1, the guard's certificate), read the body,
// decode it with the fastest strict decoder into the fields the guard reads,
// and answer "allowed". It prints its address on stdout and serves until
// stdin closes.
func serveFloor(certDir string) error {
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	bufs := sync.Pool{New: func() any { return new(bytes.Buffer) }}
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			buf := bufs.Get().(*bytes.Buffer)
			defer bufs.Put(buf)
			buf.Reset()
			if _, err := buf.ReadFrom(r.Body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			var review minimalReview
			if err := jsonv2.Unmarshal(buf.Bytes(), &review); err != nil || review.Request == nil {
				http.Error(w, fmt.Sprintf("decode: %v", err), http.StatusBadRequest)
				return
			}
			buf.Reset()
			if err := jsonv2.MarshalWrite(buf, allowResponse(&review)); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
			_, _ = w.Write(buf.Bytes())
		}),
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = srv.Close()
	}()
	fmt.Fprintln(os.Stdout, l.Addr().String())
	if err := srv.ServeTLS(l, "", ""); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// startFloorServer re-executes the test binary as the floor server with the
// guard's certificate directory and returns its URL and PID.
func startFloorServer(t *testing.T, certDir string) (url string, pid int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), floorServerEnv+"="+certDir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the floor server: %v", err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the floor server did not print its address: %v", err)
	}
	return "https://" + strings.TrimSpace(addr) + "/validate", cmd.Process.Pid
}
