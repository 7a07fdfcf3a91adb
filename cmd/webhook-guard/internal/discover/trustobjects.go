package discover

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	admv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// TrustObject is an object of a kind whose objects hold one entry (its row
// of guardapi.Kinds says where): a CustomResourceDefinition with a
// conversion webhook or an APIService with a service, the two kinds beside
// the webhook configurations whose caBundle kube-apiserver trusts.
type TrustObject struct {
	Kind policy.GuardedKind
	Meta metav1.ObjectMeta
	// Group is the API group the object serves (a CRD's spec.group, an
	// APIService's spec.group).
	Group string
	// ClientConfig is the entry's address and caBundle in the webhook
	// configurations' type (an APIService's service has no path).
	ClientConfig admv1.WebhookClientConfig
	// InsecureSkipTLSVerify is an APIService's.
	InsecureSkipTLSVerify bool
}

// ListTrustObjects reads the objects of every kind whose objects hold one
// entry, in guardapi.Kinds' order, and keeps those that hold it: the CRDs
// that have a conversion webhook and the APIServices that have a service.
// They are read unstructured, where their rows say: a client of the
// guard's scheme reads them without registering their types, and the
// aggregator's API types are no dependency of the guard. A kind the
// cluster does not serve or the caller may not list is left out and
// returned in unreadable (with why), so that discover and scan still read
// everything else.
func ListTrustObjects(ctx context.Context, c client.Reader) (objs []TrustObject, unreadable map[policy.GuardedKind]string, err error) {
	unreadable = make(map[policy.GuardedKind]string)
	for _, info := range guardapi.Kinds {
		if !info.Entries.One() {
			continue // the webhook configurations' typed lists
		}
		items, err := listKind(ctx, c, schema.GroupVersionKind{Group: info.Group, Version: info.Version, Kind: info.Kind + "List"}, unreadable)
		if err != nil {
			return nil, nil, err
		}
		for i := range items {
			if o, ok := trustObjectOf(info, &items[i]); ok {
				objs = append(objs, o)
			}
		}
	}
	return objs, unreadable, nil
}

// listKind lists the objects of a list kind, or none when the kind is
// skippable, noting why in unreadable under the item kind.
func listKind(ctx context.Context, c client.Reader, list schema.GroupVersionKind, unreadable map[policy.GuardedKind]string) ([]unstructured.Unstructured, error) {
	var l unstructured.UnstructuredList
	l.SetGroupVersionKind(list)
	switch err := c.List(ctx, &l); {
	case skippable(err):
		unreadable[policy.GuardedKind(strings.TrimSuffix(list.Kind, "List"))] = err.Error()
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("list %s: %w", strings.ToLower(strings.TrimSuffix(list.Kind, "List"))+"s", err)
	}
	return l.Items, nil
}

// skippable: a kind the cluster does not serve, or one the caller's role
// does not let it list, is no reason to stop reading the others (as with
// cert-manager's Certificates).
func skippable(err error) bool {
	return err != nil && (meta.IsNoMatchError(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err))
}

// trustObjectOf reads the one entry of u where its kind's row says it is:
// its url, service and caBundle, insecureSkipTLSVerify where the entry has
// it, and the spec.group the object serves. False when the object does not
// hold the entry: a CRD without a conversion webhook (strategy None), a
// local APIService (no service), served by kube-apiserver itself.
func trustObjectOf(info guardapi.KindInfo, u *unstructured.Unstructured) (TrustObject, bool) {
	cc, ok := info.Entries.ClientConfigOf(u.Object)
	if !ok {
		return TrustObject{}, false
	}
	o := TrustObject{Kind: policy.GuardedKind(info.Kind), Meta: metaOf(u)}
	o.Group, _, _ = unstructured.NestedString(u.Object, "spec", "group")
	o.InsecureSkipTLSVerify = info.Entries.InsecureSkipTLSVerifyOf(u.Object)
	if url, ok, _ := unstructured.NestedString(cc, "url"); ok {
		o.ClientConfig.URL = &url
	}
	if svc, ok, _ := unstructured.NestedMap(cc, "service"); ok {
		ref := &admv1.ServiceReference{}
		ref.Namespace, _, _ = unstructured.NestedString(svc, "namespace")
		ref.Name, _, _ = unstructured.NestedString(svc, "name")
		if path, ok, _ := unstructured.NestedString(svc, "path"); ok {
			ref.Path = &path
		}
		if port, ok, _ := unstructured.NestedInt64(svc, "port"); ok {
			p := int32(port) //nolint:gosec // kube-apiserver validates the port as 1-65535
			ref.Port = &p
		}
		o.ClientConfig.Service = ref
	}
	if b64, _, _ := unstructured.NestedString(cc, "caBundle"); b64 != "" {
		// kube-apiserver stores valid base64 only; a bundle that does not
		// decode is read as empty, which the CA checks report.
		o.ClientConfig.CABundle, _ = base64.StdEncoding.DecodeString(b64)
	}
	return o, true
}

func metaOf(u *unstructured.Unstructured) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: u.GetName(), Labels: u.GetLabels(), Annotations: u.GetAnnotations(), ManagedFields: u.GetManagedFields()}
}

// trustConfiguration is a trust object as discover's evidence. A CRD's
// conversion webhook has no failurePolicy and an APIService none either:
// both behave as Fail. An unreachable conversion webhook fails every
// request that needs a conversion; an unavailable APIService fails its
// whole API group, discovery included.
func trustConfiguration(o TrustObject) Configuration {
	fail := admv1.Fail
	info, _ := o.Kind.Info()
	w := webhookEvidence(info.Entries.Name, o.ClientConfig, &fail, nil, nil, nil, nil, 0)
	return Configuration{Kind: o.Kind, Name: o.Meta.Name, Annotations: o.Meta.Annotations, Group: o.Group,
		CABundleManagers: caBundleManagersAt(o.Meta.ManagedFields, managedPath(info.Entries.CABundlePath())...), Webhooks: []Webhook{w}}
}

// managedPath is a field's path as managedFields spell it (f:spec, ...).
func managedPath(path []string) []string {
	out := make([]string, len(path))
	for i, f := range path {
		out[i] = "f:" + f
	}
	return out
}

// entryLabel names entry i of an object of the kind in a sentence: the
// one entry by its row's label, an entry of a list by its index.
func entryLabel(kind policy.GuardedKind, i int) string {
	info, ok := kind.Info()
	switch {
	case !ok:
		return fmt.Sprintf("entry %d of the %s", i, kind)
	case info.Entries.One():
		return info.Entries.Label
	}
	return fmt.Sprintf("%s[%d]", info.Entries.List, i)
}
