package cmdutil

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// SignalContext is parent, cancelled on the first SIGINT or SIGTERM so that
// a long-running command (serve, render static-manifest --watch) stops
// cleanly; a second signal exits at once with 1, as controller-runtime's
// handler does. stop releases the signals.
func SignalContext(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-signals:
			cancel()
		case <-done:
			return
		}
		select {
		case <-signals:
			os.Exit(1)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(signals)
		close(done)
		cancel()
	}
}
