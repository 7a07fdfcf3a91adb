package discover

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	admv1 "k8s.io/api/admissionregistration/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// TrustObject is a CustomResourceDefinition with a conversion webhook or an
// APIService with a service: the two kinds beside the webhook
// configurations whose caBundle kube-apiserver trusts, each with one entry.
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

// The list kinds the trust objects are read as, unstructured: a client of
// the guard's scheme reads them without registering their types, and the
// aggregator's API types are no dependency of the guard. A CRD is then
// converted to its API type; an APIService is read field by field.
var (
	crdList        = apiextv1.SchemeGroupVersion.WithKind("CustomResourceDefinitionList")
	apiServiceList = func() schema.GroupVersionKind {
		info, _ := guardapi.KindInfoOf(guardapi.KindAPIService)
		return schema.GroupVersionKind{Group: info.Group, Version: info.Version, Kind: info.Kind + "List"}
	}()
)

// ListTrustObjects reads the CRDs that have a conversion webhook and the
// APIServices that have a service. A kind the cluster does not serve or
// the caller may not list is left out and returned in unreadable (with
// why), so that discover and scan still read everything else.
func ListTrustObjects(ctx context.Context, c client.Reader) (objs []TrustObject, unreadable map[policy.GuardedKind]string, err error) {
	unreadable = map[policy.GuardedKind]string{}
	crds, err := listKind(ctx, c, crdList, unreadable)
	if err != nil {
		return nil, nil, err
	}
	for i := range crds {
		var crd apiextv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(crds[i].Object, &crd); err != nil {
			return nil, nil, fmt.Errorf("read CustomResourceDefinition %s: %w", crds[i].GetName(), err)
		}
		if o, ok := crdObject(&crd); ok {
			objs = append(objs, o)
		}
	}
	svcs, err := listKind(ctx, c, apiServiceList, unreadable)
	if err != nil {
		return nil, nil, err
	}
	for i := range svcs {
		if o, ok := apiServiceObject(&svcs[i]); ok {
			objs = append(objs, o)
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

func crdObject(crd *apiextv1.CustomResourceDefinition) (TrustObject, bool) {
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy != apiextv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
		return TrustObject{}, false
	}
	cc := conv.Webhook.ClientConfig
	o := TrustObject{Kind: policy.KindCRD, Meta: crd.ObjectMeta, Group: crd.Spec.Group, ClientConfig: admv1.WebhookClientConfig{URL: cc.URL, CABundle: cc.CABundle}}
	if s := cc.Service; s != nil {
		o.ClientConfig.Service = &admv1.ServiceReference{Namespace: s.Namespace, Name: s.Name, Path: s.Path, Port: s.Port}
	}
	return o, true
}

// apiServiceObject reads an APIService's spec.service, spec.caBundle and
// spec.insecureSkipTLSVerify; a local APIService (no service) is served by
// kube-apiserver itself and trusts no caBundle.
func apiServiceObject(u *unstructured.Unstructured) (TrustObject, bool) {
	svc, ok, _ := unstructured.NestedMap(u.Object, "spec", "service")
	if !ok || svc == nil {
		return TrustObject{}, false
	}
	o := TrustObject{Kind: policy.KindAPIService, Meta: metaOf(u)}
	o.Group, _, _ = unstructured.NestedString(u.Object, "spec", "group")
	o.InsecureSkipTLSVerify, _, _ = unstructured.NestedBool(u.Object, "spec", "insecureSkipTLSVerify")
	ref := &admv1.ServiceReference{}
	ref.Namespace, _, _ = unstructured.NestedString(svc, "namespace")
	ref.Name, _, _ = unstructured.NestedString(svc, "name")
	if port, ok, _ := unstructured.NestedInt64(svc, "port"); ok {
		p := int32(port) //nolint:gosec // kube-apiserver validates the port as 1-65535
		ref.Port = &p
	}
	o.ClientConfig.Service = ref
	if b64, _, _ := unstructured.NestedString(u.Object, "spec", "caBundle"); b64 != "" {
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
	name := policy.EntryConversion
	if o.Kind == policy.KindAPIService {
		name = policy.EntryService
	}
	w := webhookEvidence(name, o.ClientConfig, &fail, nil, nil, nil, nil, 0)
	return Configuration{Kind: o.Kind, Name: o.Meta.Name, Annotations: o.Meta.Annotations, Group: o.Group,
		CABundleManagers: caBundleManagersAt(o.Meta.ManagedFields, trustBundlePath(o.Kind)...), Webhooks: []Webhook{w}}
}

// trustBundlePath is where the caBundle of an object of a trust kind is,
// as managedFields spell it.
func trustBundlePath(kind policy.GuardedKind) []string {
	if kind == policy.KindCRD {
		return []string{"f:spec", "f:conversion", "f:webhook", "f:clientConfig", "f:caBundle"}
	}
	return []string{"f:spec", "f:caBundle"}
}

// entryLabel names entry i of an object of the kind in a sentence.
func entryLabel(kind policy.GuardedKind, i int) string {
	switch kind {
	case policy.KindCRD:
		return "the conversion webhook"
	case policy.KindAPIService:
		return "the APIService"
	default:
		return fmt.Sprintf("webhooks[%d]", i)
	}
}
