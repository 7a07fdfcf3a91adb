package framework

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// process is one child process the framework runs (the guard, cainjector,
// the rotator): started at most once at a time, never leaked (it dies with
// the test process), stopped with SIGTERM and, after a pod's termination
// grace period, SIGKILL.
type process struct {
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// errRunning is start's answer while the process runs.
var errRunning = errors.New("already running")

// start runs bin with args, extra environment entries and log as its
// stdout and stderr. done is closed when it exits.
func (p *process) start(bin string, args, env []string, log *Buffer) (cmd *exec.Cmd, done <-chan struct{}, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return nil, nil, errRunning
	}
	c := exec.Command(bin, args...)
	if len(env) > 0 {
		c.Env = append(os.Environ(), env...)
	}
	c.Stdout, c.Stderr = log, log
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		return nil, nil, err
	}
	ch := make(chan struct{})
	go func() { _ = c.Wait(); close(ch) }()
	p.cmd, p.done = c, ch
	return c, ch, nil
}

// startReady is start for a real writer, then a wait until ready holds
// for what the process printed since this start (polled every 50 ms), and
// returns when the process was started. A process that exits first, or is
// not ready within timeout, is stopped and fails t naming awaited (what
// ready looks for); each writer's t.Cleanup prints its log on failure.
func (p *process) startReady(t testing.TB, name, bin string, args, env []string, log *Buffer,
	timeout time.Duration, awaited string, ready func(since string) bool,
) time.Time {
	t.Helper()
	from := len(log.String())
	cmd, done, err := p.start(bin, args, env, log)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	started := time.Now()
	since := func() string {
		s := log.String()
		if from > len(s) { // the log was Reset
			from = 0
		}
		return s[from:]
	}
	deadline := started.Add(timeout)
	for !ready(since()) {
		select {
		case <-done:
			p.stop(t, name)
			t.Fatalf("%s exited before %s (%v): %s %s (its log follows)", name, awaited, cmd.ProcessState, bin, strings.Join(args, " "))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop(t, name)
			t.Fatalf("%s: no %s within %s (its log follows)", name, awaited, timeout)
		}
	}
	return started
}

// logHas is a startReady condition: line appears in the log.
func logHas(line string) func(string) bool {
	return func(since string) bool { return strings.Contains(since, line) }
}

// current is the running process (nil when there is none) and its done.
func (p *process) current() (*exec.Cmd, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}

// take is current, forgetting the process: whoever takes it ends it.
func (p *process) take() (*exec.Cmd, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd, done := p.cmd, p.done
	p.cmd, p.done = nil, nil
	return cmd, done
}

// stop terminates the process; safe to call more than once.
func (p *process) stop(t testing.TB, what string) {
	t.Helper()
	if cmd, done := p.take(); cmd != nil {
		terminate(t, what, cmd, done)
	}
}

// running reports whether the process is alive.
func (p *process) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// pid is the running process's id, 0 when it is not running.
func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}
