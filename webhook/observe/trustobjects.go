package observe

import (
	"bytes"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// CustomResourceDefinitions and APIServices carry the two caBundles
// kube-apiserver trusts besides the webhook configurations': a CRD's
// conversion webhook and an APIService's service, one entry each. The
// observer watches every guarded kind whose objects hold one entry (its
// row of guardapi.Kinds says where) for the health series only (its
// decisions of observed changes cover the webhook configurations). They
// are read as unstructured objects through the dynamic client: the guard
// does not depend on kube-aggregator's typed APIService client.

// resourceOf is where kube-apiserver serves the kind.
func resourceOf(info guardapi.KindInfo) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: info.Group, Version: info.Version, Resource: info.Resource}
}

// Both kinds' one entry fails closed: there is no failurePolicy to set.
// An APIService whose service cannot be reached, or whose serving
// certificate its caBundle does not verify, makes every request to its
// group and version fail (and discovery of the group incomplete); a
// conversion webhook that cannot be called fails every read and write of
// the CRD's resources that needs a version other than the stored one.
const trustFailurePolicy = admv1.Fail

// trustTimeout is the timeout_seconds label of both kinds' entries: empty.
// kube-apiserver sets no timeout of its own on a conversion webhook call
// (apiextensions-apiserver's webhookConverter posts with the request's
// context) nor on the aggregator's proxying to an APIService's service:
// both last at most the client request's deadline (kube-apiserver's
// --request-timeout, 60 s by default, for requests that are not watches).
const trustTimeout = ""

// trustObject is what the observer's cache keeps of a CRD or an
// APIService: its name, uid and resourceVersion (mappings name these kinds
// by name only, so labels and annotations are dropped), and its one
// entry's Service and caBundle. A CRD object carries the OpenAPI schemas of all
// its versions, up to what kube-apiserver stores in one object (etcd's
// 1.5 MiB request limit by default); the cache is bounded to this struct:
// about half a kilobyte per object (measured for 10,000 CRDs with a
// conversion Service: this struct, its strings and the store's entry) plus
// its caBundle (about 1.2 KB per PEM certificate), however large the
// schemas. Each object is still decoded
// whole on arrival (and the initial list whole at once) before the
// transform drops the rest.
type trustObject struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	// TrustKind is the object's kind, one whose objects hold one entry.
	TrustKind policy.GuardedKind
	// HasEntry is false for a CRD without a conversion webhook and for a
	// local APIService (served by kube-apiserver itself): nothing trusted,
	// no series.
	HasEntry bool
	// Service is the Service kube-apiserver calls; nil for a conversion
	// webhook called by URL.
	Service *admv1.ServiceReference
	// CABundle is the entry's caBundle, decoded.
	CABundle []byte
}

// DeepCopyObject implements runtime.Object, as the informer's store
// expects of what it holds.
func (t *trustObject) DeepCopyObject() runtime.Object {
	out := *t
	t.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Service = trimService(t.Service)
	out.CABundle = bytes.Clone(t.CABundle)
	return &out
}

// entries is the object's one entry, named as decisions name it; none
// when it trusts nothing.
func (t *trustObject) entries() []entryFields {
	if !t.HasEntry {
		return nil
	}
	info, _ := t.TrustKind.Info() // trimTrust made it of a row
	return []entryFields{{name: info.Entries.Name, failurePolicy: string(trustFailurePolicy), timeout: trustTimeout,
		caBundle: t.CABundle, service: t.Service}}
}

// trimTrust returns the informers' transform for the objects of a kind
// that hold one entry: it keeps a trustObject of each unstructured object
// (anything else, such as a tombstone, passes as it is).
func trimTrust(info guardapi.KindInfo) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		out := &trustObject{
			ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion()},
			TrustKind:  policy.GuardedKind(info.Kind),
		}
		cc, ok := info.Entries.ClientConfigOf(u.Object)
		if !ok {
			return out, nil
		}
		out.HasEntry = true
		if svc, ok := cc["service"].(map[string]any); ok {
			ns, _ := svc["namespace"].(string)
			name, _ := svc["name"].(string)
			out.Service = &admv1.ServiceReference{Namespace: ns, Name: name}
		}
		out.CABundle = guardapi.CABundleIn(cc)
		return out, nil
	}
}

// watchTrustObjects starts the watches of the kinds whose objects hold one
// entry, CRDs and APIServices (each object trimmed to a trustObject), and returns their stores and the func
// that stops them. Nobody waits for them to sync: until they have (never,
// if the guard may not list these kinds, or the cluster serves no
// APIServices), their stores are empty and these kinds have no series.
// With no dynamic client there are no stores. A dynamic factory, not
// controller-runtime's cache: each object is stored as a trustObject (see
// Start).
func (o *Observer) watchTrustObjects(stop <-chan struct{}) ([]toolscache.Store, func()) {
	if o.Dynamic == nil {
		return nil, func() {}
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(o.Dynamic, 0)
	var stores []toolscache.Store
	for _, info := range guardapi.Kinds {
		if !info.Entries.One() {
			continue // the webhook configurations' typed informers
		}
		gvr := resourceOf(info)
		inf := factory.ForResource(gvr).Informer()
		if err := inf.SetTransform(trimTrust(info)); err != nil {
			// Only a started informer refuses a transform; this one is new.
			o.Log.Error(err, "not watching for the health series", "resource", gvr.String())
			continue
		}
		stores = append(stores, inf.GetStore())
	}
	factory.Start(stop)
	return stores, factory.Shutdown
}
