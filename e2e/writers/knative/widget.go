package main

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"knative.dev/pkg/apis"
)

// The resource type the admission and conversion reconcilers are given:
// Knative's reconcilers only read its group, version and kind (the rules
// they write into their configurations, the CRD they keep the conversion
// caBundle of); its methods run only when the (otherwise idle) admission
// server is called. One tiny type instead of serving's ten keeps
// knative.dev/serving out of the build: the webhook writes come from
// knative.dev/pkg alone.
const (
	// WidgetGroup is the API group of the e2e suite's Widget CRD.
	WidgetGroup = "knative-writer.e2e.webhook-guard.io"
	// WidgetCRD is its CustomResourceDefinition's name (<plural>.<group>).
	WidgetCRD = "widgets." + WidgetGroup
	// widgetHub is the version conversions go through (the storage version).
	widgetHub = "v1"
)

// widgetVersions are the CRD's served versions, each a zygote of the
// conversion webhook.
var widgetVersions = []string{"v1alpha1", widgetHub}

// Widget is the e2e suite's custom resource in any of its versions.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec `json:"spec,omitempty"`
}

// WidgetSpec is the same in every version, so a conversion only relabels.
type WidgetSpec struct {
	Size int `json:"size,omitempty"`
}

func widgetGVK(version string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: WidgetGroup, Version: version, Kind: "Widget"}
}

// DeepCopyObject implements runtime.Object.
func (w *Widget) DeepCopyObject() runtime.Object {
	out := *w
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// SetDefaults implements apis.Defaultable: a Widget has size 1 by default.
func (w *Widget) SetDefaults(context.Context) {
	if w.Spec.Size == 0 {
		w.Spec.Size = 1
	}
}

// Validate implements apis.Validatable.
func (w *Widget) Validate(context.Context) *apis.FieldError {
	if w.Spec.Size < 0 {
		return apis.ErrInvalidValue(w.Spec.Size, "spec.size")
	}
	return nil
}

// ConvertTo implements apis.Convertible (to the hub).
func (w *Widget) ConvertTo(_ context.Context, to apis.Convertible) error {
	sink, ok := to.(*Widget)
	if !ok {
		return fmt.Errorf("unknown conversion target %T", to)
	}
	apiVersion := sink.APIVersion
	*sink = *w
	sink.APIVersion = apiVersion
	return nil
}

// ConvertFrom implements apis.Convertible (from the hub).
func (w *Widget) ConvertFrom(ctx context.Context, from apis.Convertible) error {
	src, ok := from.(*Widget)
	if !ok {
		return fmt.Errorf("unknown conversion source %T", from)
	}
	return src.ConvertTo(ctx, w)
}
