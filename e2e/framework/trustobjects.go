package framework

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// The two kinds beside the webhook configurations whose caBundle
// kube-apiserver trusts. Each carries one caBundle: Bundles has one entry
// (nil: the object has none).
const (
	CRD        Kind = "CustomResourceDefinition"
	APIService Kind = "APIService"
)

var (
	crdGVR        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
)

// bundlePath is where the object's one caBundle lives.
func bundlePath(kind Kind) []string {
	if kind == CRD {
		return []string{"spec", "conversion", "webhook", "clientConfig", "caBundle"}
	}
	return []string{"spec", "caBundle"}
}

// trustObject builds a CRD named <plural>.<group> with a conversion webhook
// at an address nothing listens on (a single version is never converted,
// so kube-apiserver never calls it), or an APIService named
// <version>.<group> for a Service that does not exist (its group is
// unavailable; nothing else depends on it).
func (s Spec) trustObject() *unstructured.Unstructured {
	first, rest, _ := strings.Cut(s.Name, ".")
	var spec map[string]any
	if s.Kind == CRD {
		kind := strings.ToUpper(first[:1]) + first[1:]
		spec = map[string]any{
			"group": rest,
			"names": map[string]any{"plural": first, "singular": first, "kind": kind, "listKind": kind + "List"},
			"scope": "Namespaced",
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
			"conversion": map[string]any{"strategy": "Webhook", "webhook": map[string]any{
				"conversionReviewVersions": []any{"v1"},
				"clientConfig":             map[string]any{"url": "https://127.0.0.1:9/convert"},
			}},
		}
	} else {
		spec = map[string]any{
			"group": rest, "version": first,
			"service":              map[string]any{"namespace": "default", "name": "e2e-absent", "port": int64(443)},
			"groupPriorityMinimum": int64(100), "versionPriority": int64(10),
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	if s.Kind == CRD {
		u.SetAPIVersion("apiextensions.k8s.io/v1")
	} else {
		u.SetAPIVersion("apiregistration.k8s.io/v1")
	}
	u.SetKind(string(s.Kind))
	u.SetName(s.Name)
	u.SetLabels(s.Labels)
	u.SetAnnotations(s.Annotations)
	if len(s.Bundles) > 0 {
		setTrustBundle(u, s.Kind, s.Bundles[0])
	}
	return u
}

func setTrustBundle(u *unstructured.Unstructured, kind Kind, b []byte) {
	if len(b) == 0 {
		unstructured.RemoveNestedField(u.Object, bundlePath(kind)...)
		return
	}
	_ = unstructured.SetNestedField(u.Object, base64.StdEncoding.EncodeToString(b), bundlePath(kind)...)
}

func trustBundle(u *unstructured.Unstructured, kind Kind) []byte {
	s, _, _ := unstructured.NestedString(u.Object, bundlePath(kind)...)
	b, _ := base64.StdEncoding.DecodeString(s)
	return b
}

func fromTrustObject(kind Kind, u *unstructured.Unstructured) *WebhookConfig {
	if u == nil || u.GetName() == "" {
		return nil
	}
	return &WebhookConfig{Kind: kind, Name: u.GetName(), ResourceVersion: u.GetResourceVersion(), Annotations: u.GetAnnotations(),
		Bundles: [][]byte{trustBundle(u, kind)}}
}

func (c *Client) trustResource(kind Kind) (dynamic.ResourceInterface, error) {
	dc, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	if kind == CRD {
		return dc.Resource(crdGVR), nil
	}
	return dc.Resource(apiServiceGVR), nil
}

func (c *Client) createTrustObject(ctx context.Context, s Spec, opts metav1.CreateOptions) (*WebhookConfig, error) {
	r, err := c.trustResource(s.Kind)
	if err != nil {
		return nil, err
	}
	u, err := r.Create(ctx, s.trustObject(), opts)
	return fromTrustObject(s.Kind, u), err
}

func (c *Client) getTrustObject(ctx context.Context, kind Kind, name string) (*WebhookConfig, error) {
	r, err := c.trustResource(kind)
	if err != nil {
		return nil, err
	}
	u, err := r.Get(ctx, name, metav1.GetOptions{})
	return fromTrustObject(kind, u), err
}

func (c *Client) mutateTrustObject(ctx context.Context, kind Kind, name string, opts metav1.UpdateOptions, fn func(meta *metav1.ObjectMeta, bundles [][]byte)) (*WebhookConfig, error) {
	r, err := c.trustResource(kind)
	if err != nil {
		return nil, err
	}
	u, err := r.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	meta := metav1.ObjectMeta{Labels: u.GetLabels(), Annotations: u.GetAnnotations()}
	bundles := [][]byte{trustBundle(u, kind)}
	fn(&meta, bundles)
	u.SetLabels(meta.Labels)
	u.SetAnnotations(meta.Annotations)
	setTrustBundle(u, kind, bundles[0])
	u, err = r.Update(ctx, u, opts)
	return fromTrustObject(kind, u), err
}

func (c *Client) deleteTrustObject(ctx context.Context, kind Kind, name string, opts metav1.DeleteOptions) error {
	r, err := c.trustResource(kind)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	return r.Delete(ctx, name, opts)
}

// UpdateTrustObject reads a CRD or APIService, lets fn change it (its
// endpoint, annotations, any field) and writes it back as the client's
// user: the writes of an installer, which the framework's WebhookConfig
// view (labels, annotations, caBundles) cannot express.
func (c *Client) UpdateTrustObject(ctx context.Context, kind Kind, name string, fn func(u *unstructured.Unstructured)) error {
	r, err := c.trustResource(kind)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	u, err := r.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	fn(u)
	_, err = r.Update(ctx, u, metav1.UpdateOptions{})
	return err
}
