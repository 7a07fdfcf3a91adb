package observe

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Test_Observer_stopsWithTheAPIServerUnreachable: with every request
// refused, client-go's reflector backs off between watch attempts with a
// sleep that ignores its context (0.8 s, 1.6 s, 3.2 s, ...). Stopping the
// observer must not wait for that sleep to end (nor that of the watches of
// CRDs and APIServices): it returns within its shutdownWait. Without the
// bound, Start returned only when the back-off ended (4–9 s after SIGTERM
// measured on the built binary). The limit below is a bound on a hang, not
// a speed target.
func Test_Observer_stopsWithTheAPIServerUnreachable(t *testing.T) {
	// A port nothing listens on: every request is refused at once.
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: "http://" + addr})
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(&rest.Config{Host: "http://" + addr})
	require.NoError(t, err)

	o := &Observer{Kube: kube, Dynamic: dyn, Metrics: NewMetrics(prometheus.NewRegistry()), Log: logr.Discard()}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	go func() { stopped <- o.Start(ctx) }()
	// Long enough for the back-off to reach a sleep of several seconds.
	time.Sleep(3 * time.Second)
	cancel()
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(shutdownWait + 2*time.Second):
		t.Fatalf("Start did not return within %s of its context ending", shutdownWait+2*time.Second)
	}
}
