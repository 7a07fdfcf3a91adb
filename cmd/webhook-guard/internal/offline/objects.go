// Package offline decides AdmissionReviews without a cluster, as `check`
// and `test` do: the server's own handler over a GuardConfig, with CA
// sources resolved against a file of objects instead of the API server.
package offline

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Objects is a client.Reader over the objects of a YAML stream, so
// `check` resolves CA sources offline exactly as `serve` does online.
type Objects struct {
	scheme  *runtime.Scheme
	objects map[objectKey]runtime.Object
}

type objectKey struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
}

var _ client.Reader = &Objects{}

// ReadObjects decodes a multi-document YAML stream of Secrets, ConfigMaps
// and cert-manager objects. An unknown kind or an undecodable document is
// an error naming the document.
func ReadObjects(scheme *runtime.Scheme, data []byte) (*Objects, error) {
	r := &Objects{scheme: scheme, objects: map[objectKey]runtime.Object{}}
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return r, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 || bytes.Equal(bytes.TrimSpace(doc), []byte("---")) {
			continue
		}
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		acc, err := meta.Accessor(obj)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if secret, ok := obj.(*corev1.Secret); ok {
			// As kube-apiserver does on write: stringData wins over data.
			if secret.Data == nil {
				secret.Data = map[string][]byte{}
			}
			for k, v := range secret.StringData {
				secret.Data[k] = []byte(v)
			}
			secret.StringData = nil
		}
		key := objectKey{gvk: *gvk, namespace: acc.GetNamespace(), name: acc.GetName()}
		if _, dup := r.objects[key]; dup {
			return nil, fmt.Errorf("document %d: %s %s/%s appears twice", i, gvk.Kind, key.namespace, key.name)
		}
		r.objects[key] = obj
	}
}

// LoadObjects reads a file of objects (check --objects); no path means no
// objects. Errors name the file.
func LoadObjects(scheme *runtime.Scheme, path string) (*Objects, error) {
	if path == "" {
		return &Objects{scheme: scheme, objects: map[objectKey]runtime.Object{}}, nil
	}
	data, err := os.ReadFile(path)
	if err == nil {
		var r *Objects
		if r, err = ReadObjects(scheme, data); err == nil {
			return r, nil
		}
	}
	return nil, fmt.Errorf("objects %s: %w", path, err)
}

// Get implements client.Reader.
func (r *Objects) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	gvks, _, err := r.scheme.ObjectKinds(obj)
	if err != nil {
		return err
	}
	stored, ok := r.objects[objectKey{gvk: gvks[0], namespace: key.Namespace, name: key.Name}]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: gvks[0].Group, Resource: gvks[0].Kind}, key.Name)
	}
	return r.scheme.Convert(stored, obj, nil)
}

// List implements client.Reader; CA sources never list.
func (r *Objects) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("objects reader: list is not supported")
}

// WebhookConfigurations are the validating and mutating webhook
// configurations of the stream, as kube-apiserver would hand them to a
// policy (unstructured, a caBundle its base64 text), sorted by kind and
// name.
func (r *Objects) WebhookConfigurations() ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for key, obj := range r.objects {
		if key.gvk.Group != "admissionregistration.k8s.io" || (key.gvk.Kind != "ValidatingWebhookConfiguration" && key.gvk.Kind != "MutatingWebhookConfiguration") {
			continue
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(key.gvk)
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int {
		return cmp.Or(strings.Compare(a.GetKind(), b.GetKind()), strings.Compare(a.GetName(), b.GetName()))
	})
	return out, nil
}
