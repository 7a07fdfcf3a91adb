package observe

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/webhook-guard/webhook-guard/webhook/endpointslices"
)

// byService indexes the cached EndpointSlices by "namespace/service".
const byService = "service"

// readySlice is what the observer's cache keeps of one EndpointSlice: its
// name, the Service it belongs to, its address type and how many of its
// endpoints are ready.
// Every Service of the cluster has slices, each with the addresses, ports,
// topology and target references of up to 1000 endpoints; keeping a count
// bounds the cache to about half a kilobyte per slice (this struct, its
// strings, the store's key and the index entry) however many endpoints it
// holds: some 5 MB for 10,000 slices. The watch still receives every slice (a watch filtered to the
// Services the configurations name would have to be restarted whenever
// one changes); each is trimmed on arrival.
type readySlice struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	// Service is the kubernetes.io/service-name label.
	Service string
	// AddressType is the slice's (a dual-stack Service's pods are listed
	// once per family).
	AddressType discoveryv1.AddressType
	// Ready counts the endpoints whose conditions.ready is not false
	// (unset means ready).
	Ready int
}

// DeepCopyObject implements runtime.Object, as the informer's store
// expects of what it holds.
func (s *readySlice) DeepCopyObject() runtime.Object {
	out := *s
	s.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// trimSlice is the informer's transform for an EndpointSlice.
func trimSlice(s *discoveryv1.EndpointSlice) *readySlice {
	return &readySlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion},
		Service:     endpointslices.ServiceName(s),
		AddressType: s.AddressType,
		Ready:       endpointslices.ReadyCount(s),
	}
}

// serviceIndex is the byService index function.
func serviceIndex(obj any) ([]string, error) {
	s, ok := obj.(*readySlice)
	if !ok || s.Service == "" {
		return nil, nil
	}
	return []string{s.Namespace + "/" + s.Service}, nil
}

// readyEndpoints counts Services' ready endpoints from the cached slices.
type readyEndpoints struct {
	slices toolscache.Indexer
	synced func() bool
}

// count is the number of ready endpoints of Service namespace/name
// (endpointslices.Count); false while the watch has not synced (a 0 would
// then be a guess).
//
// Every slice of the Service counts, hand-made ones included, where the
// prober dials only the endpointslice controller's (endpointslices.Reader):
// the count says whether kube-apiserver's calls reach a ready endpoint,
// and kube-proxy and kube-apiserver's endpoint resolver route to any slice
// labelled with the Service, whoever wrote it; the prober must dial only
// what a non-writer cannot plant, since what it finds can refuse an
// owner's write. A planted slice can raise this count, never refuse a
// write.
func (r readyEndpoints) count(namespace, name string) (int, bool) {
	if r.slices == nil || !r.synced() {
		return 0, false
	}
	objs, err := r.slices.ByIndex(byService, namespace+"/"+name)
	if err != nil {
		return 0, false
	}
	var n endpointslices.Count
	for _, obj := range objs {
		if s, ok := obj.(*readySlice); ok {
			n.Add(s.AddressType, s.Ready)
		}
	}
	return n.Total(), true
}

// watchEndpointSlices adds the watch of EndpointSlices to factory (whose
// transform, trim, keeps a readySlice of each) and starts it. Nobody waits
// for it to sync: the observer decides changes without it, and until it
// has synced (never, if the guard may not list EndpointSlices) the
// ready-endpoints series is simply absent.
func watchEndpointSlices(factory informers.SharedInformerFactory, stop <-chan struct{}) (readyEndpoints, error) {
	inf := factory.Discovery().V1().EndpointSlices().Informer()
	if err := inf.AddIndexers(toolscache.Indexers{byService: serviceIndex}); err != nil {
		return readyEndpoints{}, err
	}
	factory.Start(stop)
	return readyEndpoints{slices: inf.GetIndexer(), synced: inf.HasSynced}, nil
}
