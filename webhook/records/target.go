package records

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// targetsOf routes one configuration's deltas: all to the configuration's
// own report when it exists (its uid makes the report's owner reference),
// else to the absent-configurations report of each delta's mapping. Only
// the configuration's metadata is read (a GET the guard's read-only role
// already allows).
func (r *Recorder) targetsOf(ctx context.Context, rk reportKey, deltas []*delta) (map[Target][]*delta, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(schema.FromAPIVersionAndKind(rk.kind.APIVersion(), string(rk.kind)))
	err := r.opts.Client.Get(ctx, types.NamespacedName{Name: rk.name}, obj)
	if err == nil {
		return map[Target][]*delta{{Kind: rk.kind, Name: rk.name, UID: obj.UID}: deltas}, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read %s %s for its report's owner reference: %w", rk.kind, rk.name, err)
	}
	out := map[Target][]*delta{}
	for _, d := range deltas {
		t := Target{Kind: rk.kind, Name: rk.name, Mapping: d.key.Policy}
		out[t] = append(out[t], d)
	}
	return out, nil
}
