package observe

import "time"

// shutdownWait bounds how long stopping waits for the informers.
const shutdownWait = time.Second

// shutdown stops the informer factories (each stop is one's Shutdown),
// waiting at most shutdownWait for them. client-go's reflector backs off
// from a failed watch-list request with a sleep that does not watch its
// context, so with the API server unreachable Shutdown blocks for the rest
// of that back-off (4–9 s measured, up to its 30 s cap), which would hold
// up the whole process's exit. What is left is a goroutine sleeping until
// the process ends.
func (o *Observer) shutdown(stops ...func()) {
	done := make(chan struct{})
	go func() {
		for _, stop := range stops {
			stop()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(shutdownWait):
		o.Log.Info("not waiting for the observer's watches to stop: they are backing off from a failed request", "waited", shutdownWait)
	}
}
