package framework

import (
	"context"
	"fmt"
	"testing"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Kind is a webhook configuration kind, or one of the kinds in
// trustobjects.go.
type Kind string

const (
	Validating Kind = "ValidatingWebhookConfiguration"
	Mutating   Kind = "MutatingWebhookConfiguration"
)

// WebhookConfig is the part of a webhook configuration the tests assert on.
type WebhookConfig struct {
	Kind            Kind
	Name            string
	ResourceVersion string
	Annotations     map[string]string
	// Bundles are the caBundles of webhooks[], in order.
	Bundles [][]byte
}

// Spec describes a webhook configuration to create. Its webhooks point at
// an address nothing listens on and match a resource that does not exist,
// with failurePolicy Ignore, so they never affect anything but themselves.
type Spec struct {
	Kind        Kind
	Name        string
	Labels      map[string]string
	Annotations map[string]string
	// Bundles holds one caBundle per webhooks[] entry (nil entries are empty).
	Bundles [][]byte
}

func webhookName(i int) string { return fmt.Sprintf("w%d.e2e.webhook-guard.io", i) }

func entries(bundles [][]byte) (names []string, cc []admv1.WebhookClientConfig, rules []admv1.RuleWithOperations) {
	for i, b := range bundles {
		names = append(names, webhookName(i))
		cc = append(cc, admv1.WebhookClientConfig{URL: new(fmt.Sprintf("https://127.0.0.1:9/%d", i)), CABundle: b})
	}
	rules = []admv1.RuleWithOperations{{
		Operations: []admv1.OperationType{admv1.Create},
		Rule:       admv1.Rule{APIGroups: []string{"e2e.webhook-guard.io"}, APIVersions: []string{"v1"}, Resources: []string{"widgets"}},
	}}
	return
}

// Validating builds the object for a Validating spec.
func (s Spec) Validating() *admv1.ValidatingWebhookConfiguration {
	names, cc, rules := entries(s.Bundles)
	o := &admv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: s.Labels, Annotations: s.Annotations}}
	for i := range names {
		o.Webhooks = append(o.Webhooks, admv1.ValidatingWebhook{
			Name: names[i], ClientConfig: cc[i], Rules: rules,
			FailurePolicy: ptr.To(admv1.Ignore), SideEffects: ptr.To(admv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](1),
		})
	}
	return o
}

// Mutating builds the object for a Mutating spec.
func (s Spec) Mutating() *admv1.MutatingWebhookConfiguration {
	names, cc, rules := entries(s.Bundles)
	o := &admv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: s.Labels, Annotations: s.Annotations}}
	for i := range names {
		o.Webhooks = append(o.Webhooks, admv1.MutatingWebhook{
			Name: names[i], ClientConfig: cc[i], Rules: rules,
			FailurePolicy: ptr.To(admv1.Ignore), SideEffects: ptr.To(admv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](1),
		})
	}
	return o
}

// Create creates the configuration as this client.
func (c *Client) Create(ctx context.Context, s Spec, opts metav1.CreateOptions) (*WebhookConfig, error) {
	if len(s.Bundles) == 0 {
		s.Bundles = [][]byte{nil}
	}
	switch s.Kind {
	case CRD, APIService:
		return c.createTrustObject(ctx, s, opts)
	case Mutating:
		o, err := c.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, s.Mutating(), opts)
		return fromMutating(o), err
	case Validating:
		o, err := c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, s.Validating(), opts)
		return fromValidating(o), err
	}
	return nil, unknownKind(s.Kind)
}

// MustCreate creates the configuration or fails the test.
func (c *Client) MustCreate(t testing.TB, s Spec) *WebhookConfig {
	t.Helper()
	wc, err := c.Create(context.Background(), s, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s creates %s %s: %v", c.User.Name, s.Kind, s.Name, err)
	}
	return wc
}

// Get reads a configuration.
func (c *Client) Get(ctx context.Context, kind Kind, name string) (*WebhookConfig, error) {
	switch kind {
	case CRD, APIService:
		return c.getTrustObject(ctx, kind, name)
	case Mutating:
		o, err := c.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		return fromMutating(o), err
	case Validating:
		o, err := c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		return fromValidating(o), err
	}
	return nil, unknownKind(kind)
}

// MustGet reads a configuration or fails the test.
func (c *Client) MustGet(t testing.TB, kind Kind, name string) *WebhookConfig {
	t.Helper()
	wc, err := c.Get(context.Background(), kind, name)
	if err != nil {
		t.Fatalf("get %s %s: %v", kind, name, err)
	}
	return wc
}

// Mutate reads the configuration, applies fn to it and updates it (a plain
// UPDATE with the read resourceVersion, as controllers do).
func (c *Client) Mutate(ctx context.Context, kind Kind, name string, opts metav1.UpdateOptions, fn func(meta *metav1.ObjectMeta, bundles [][]byte)) (*WebhookConfig, error) {
	switch kind {
	case CRD, APIService:
		return c.mutateTrustObject(ctx, kind, name, opts, fn)
	case Mutating:
		api := c.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
		o, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		bundles := make([][]byte, len(o.Webhooks))
		for i := range o.Webhooks {
			bundles[i] = o.Webhooks[i].ClientConfig.CABundle
		}
		fn(&o.ObjectMeta, bundles)
		for i := range o.Webhooks {
			o.Webhooks[i].ClientConfig.CABundle = bundles[i]
		}
		o, err = api.Update(ctx, o, opts)
		return fromMutating(o), err
	case Validating:
		api := c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
		o, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		bundles := make([][]byte, len(o.Webhooks))
		for i := range o.Webhooks {
			bundles[i] = o.Webhooks[i].ClientConfig.CABundle
		}
		fn(&o.ObjectMeta, bundles)
		for i := range o.Webhooks {
			o.Webhooks[i].ClientConfig.CABundle = bundles[i]
		}
		o, err = api.Update(ctx, o, opts)
		return fromValidating(o), err
	}
	return nil, unknownKind(kind)
}

// SetCABundle writes bundle into every webhooks[] entry.
func (c *Client) SetCABundle(ctx context.Context, kind Kind, name string, bundle []byte) (*WebhookConfig, error) {
	return c.Mutate(ctx, kind, name, metav1.UpdateOptions{}, func(_ *metav1.ObjectMeta, bundles [][]byte) {
		for i := range bundles {
			bundles[i] = bundle
		}
	})
}

// Annotate sets an annotation, leaving every caBundle alone.
func (c *Client) Annotate(ctx context.Context, kind Kind, name, key, value string) (*WebhookConfig, error) {
	return c.Mutate(ctx, kind, name, metav1.UpdateOptions{}, func(meta *metav1.ObjectMeta, _ [][]byte) {
		if meta.Annotations == nil {
			meta.Annotations = map[string]string{}
		}
		meta.Annotations[key] = value
	})
}

// Delete deletes a configuration.
func (c *Client) Delete(ctx context.Context, kind Kind, name string, opts metav1.DeleteOptions) error {
	switch kind {
	case CRD, APIService:
		return c.deleteTrustObject(ctx, kind, name, opts)
	case Mutating:
		return c.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, name, opts)
	case Validating:
		return c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, name, opts)
	}
	return unknownKind(kind)
}

// unknownKind is the error of a Kind the framework has no client for: a
// switch over kinds lists each, so that a new one is an error, never
// another kind's call.
func unknownKind(kind Kind) error {
	return fmt.Errorf("framework: no client for kind %q", kind)
}

func fromValidating(o *admv1.ValidatingWebhookConfiguration) *WebhookConfig {
	if o == nil || o.Name == "" {
		return nil
	}
	wc := &WebhookConfig{Kind: Validating, Name: o.Name, ResourceVersion: o.ResourceVersion, Annotations: o.Annotations}
	for _, w := range o.Webhooks {
		wc.Bundles = append(wc.Bundles, w.ClientConfig.CABundle)
	}
	return wc
}

func fromMutating(o *admv1.MutatingWebhookConfiguration) *WebhookConfig {
	if o == nil || o.Name == "" {
		return nil
	}
	wc := &WebhookConfig{Kind: Mutating, Name: o.Name, ResourceVersion: o.ResourceVersion, Annotations: o.Annotations}
	for _, w := range o.Webhooks {
		wc.Bundles = append(wc.Bundles, w.ClientConfig.CABundle)
	}
	return wc
}
