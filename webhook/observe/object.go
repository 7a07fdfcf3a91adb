package observe

import (
	"bytes"
	"slices"
	"strings"

	admv1 "k8s.io/api/admissionregistration/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/webhook-guard/webhook-guard/policy"
)

// object is what the observer reads of one configuration.
type object struct {
	kind     policy.GuardedKind
	meta     *metav1.ObjectMeta
	webhooks []policy.Entry
}

func (o *object) key() configKey { return configKey{kind: o.kind, name: o.meta.Name} }

// objectOf reads a watched object; false for anything else.
func objectOf(obj any) (object, bool) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	switch o := obj.(type) {
	case *admv1.ValidatingWebhookConfiguration:
		ws := make([]policy.Entry, len(o.Webhooks))
		for i := range o.Webhooks {
			ws[i] = policy.Entry{Name: o.Webhooks[i].Name, CABundle: o.Webhooks[i].ClientConfig.CABundle}
		}
		return object{kind: policy.KindValidating, meta: &o.ObjectMeta, webhooks: ws}, true
	case *admv1.MutatingWebhookConfiguration:
		ws := make([]policy.Entry, len(o.Webhooks))
		for i := range o.Webhooks {
			ws[i] = policy.Entry{Name: o.Webhooks[i].Name, CABundle: o.Webhooks[i].ClientConfig.CABundle}
		}
		return object{kind: policy.KindMutating, meta: &o.ObjectMeta, webhooks: ws}, true
	}
	return object{}, false
}

// lastApplied is kubectl apply's copy of the whole object: large, and
// nothing the decision reads.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// trim is the informers' transform: it keeps only what the decision reads,
// and the health series read, so the cache holds names, labels,
// annotations, caBundles, failure policies, timeouts, the Services called
// and the managedFields entries that own a caBundle, not whole
// configurations (rules, selectors, URLs, other managers); and of each
// EndpointSlice, a readySlice.
func trim(obj any) (any, error) {
	switch o := obj.(type) {
	case *admv1.ValidatingWebhookConfiguration:
		out := &admv1.ValidatingWebhookConfiguration{ObjectMeta: trimMeta(&o.ObjectMeta)}
		out.Webhooks = make([]admv1.ValidatingWebhook, len(o.Webhooks))
		for i := range o.Webhooks {
			w := &o.Webhooks[i]
			out.Webhooks[i] = admv1.ValidatingWebhook{Name: w.Name, FailurePolicy: w.FailurePolicy, TimeoutSeconds: w.TimeoutSeconds,
				ClientConfig: admv1.WebhookClientConfig{CABundle: w.ClientConfig.CABundle, Service: trimService(w.ClientConfig.Service)}}
		}
		return out, nil
	case *admv1.MutatingWebhookConfiguration:
		out := &admv1.MutatingWebhookConfiguration{ObjectMeta: trimMeta(&o.ObjectMeta)}
		out.Webhooks = make([]admv1.MutatingWebhook, len(o.Webhooks))
		for i := range o.Webhooks {
			w := &o.Webhooks[i]
			out.Webhooks[i] = admv1.MutatingWebhook{Name: w.Name, FailurePolicy: w.FailurePolicy, TimeoutSeconds: w.TimeoutSeconds,
				ClientConfig: admv1.WebhookClientConfig{CABundle: w.ClientConfig.CABundle, Service: trimService(w.ClientConfig.Service)}}
		}
		return out, nil
	case *discoveryv1.EndpointSlice:
		return trimSlice(o), nil
	}
	return obj, nil
}

// trimService keeps the name of the Service an entry calls.
func trimService(s *admv1.ServiceReference) *admv1.ServiceReference {
	if s == nil {
		return nil
	}
	return &admv1.ServiceReference{Namespace: s.Namespace, Name: s.Name}
}

func trimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion, Labels: m.Labels, Annotations: m.Annotations}
	if _, ok := m.Annotations[lastApplied]; ok {
		out.Annotations = make(map[string]string, len(m.Annotations)-1)
		for k, v := range m.Annotations {
			if k != lastApplied {
				out.Annotations[k] = v
			}
		}
	}
	for _, mf := range m.ManagedFields {
		if mf.FieldsV1 != nil && bytes.Contains(mf.FieldsV1.GetRawBytes(), []byte(`"f:caBundle"`)) {
			out.ManagedFields = append(out.ManagedFields, mf)
		}
	}
	return out
}

// caBundleManagers are the managedFields entries that own the caBundle of
// one of the named webhooks, newest first. For an Update, the manager that
// changed a field becomes its only owner, so after a change the newest
// owner is the client that made it.
func caBundleManagers(m *metav1.ObjectMeta, webhooks []string) []policy.FieldManager {
	var out []policy.FieldManager
	for _, mf := range m.ManagedFields {
		if mf.FieldsV1 == nil || !bytes.Contains(mf.FieldsV1.GetRawBytes(), []byte(`"f:caBundle"`)) {
			continue
		}
		var set fieldpath.Set
		if err := set.FromJSON(mf.FieldsV1.GetRawReader()); err != nil {
			continue // not ours to validate: kube-apiserver wrote it
		}
		for _, name := range webhooks {
			if set.Has(fieldpath.MakePathOrDie("webhooks", fieldpath.KeyByFields("name", name), "clientConfig", "caBundle")) {
				fm := policy.FieldManager{Name: mf.Manager, Operation: string(mf.Operation)}
				if mf.Time != nil {
					fm.Time = mf.Time.UTC()
				}
				out = append(out, fm)
				break
			}
		}
	}
	slices.SortStableFunc(out, func(a, b policy.FieldManager) int {
		if c := b.Time.Compare(a.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}
