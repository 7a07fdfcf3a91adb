package casource

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/policy"
)

// countingReader serves one Secret, counting reads and holding each for a
// while, as a loaded API server would.
type countingReader struct {
	gets atomic.Int64
	data []byte
}

func (r *countingReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.gets.Add(1)
	time.Sleep(20 * time.Millisecond)
	obj.(*corev1.Secret).Data = map[string][]byte{"ca.crt": r.data}
	return nil
}

func (r *countingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	panic("the resolver never lists")
}

// Test_Resolve_sharesConcurrentReads: requests that find the cache entry
// missing or expired at the same moment share one read of the source.
func Test_Resolve_sharesConcurrentReads(t *testing.T) {
	caPEM, err := os.ReadFile("../../cmd/webhook-guard/app/testdata/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	reader := &countingReader{data: caPEM}
	r := New(reader, Options{TTL: time.Minute})
	req := Request{Owner: &policy.Owner{Name: "koordinator", CA: policy.CASource{Secret: &policy.KeyRef{Namespace: "ns", Name: "ca", Key: "ca.crt"}}}}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if res := r.Resolve(t.Context(), req, false); res.Err != nil || res.Set.Len() != 1 {
				t.Errorf("Resolve = %+v", res)
			}
		})
	}
	wg.Wait()
	if n := reader.gets.Load(); n != 1 {
		t.Errorf("50 concurrent cold resolutions read the source %d times, want 1", n)
	}
	if res := r.Resolve(t.Context(), req, true); res.Err != nil || reader.gets.Load() != 2 {
		t.Errorf("a live resolution must read the source itself: %+v, %d reads", res, reader.gets.Load())
	}
}
