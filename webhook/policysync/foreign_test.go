package policysync

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func managed(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
}

func Test_foreignSpecFields(t *testing.T) {
	ours := managed(FieldManager, metav1.ManagedFieldsOperationApply, `{"f:metadata":{"f:labels":{"f:app.kubernetes.io/managed-by":{}}},"f:spec":{"f:policyName":{},"f:validationActions":{"v:\"Deny\"":{}}}}`)
	for name, tc := range map[string]struct {
		entries []metav1.ManagedFieldsEntry
		want    map[string][]string
	}{
		"if only the guard owns the spec, nothing is foreign": {
			entries: []metav1.ManagedFieldsEntry{ours},
			want:    map[string][]string{},
		},
		"if another manager added labels or wrote the status, nothing is foreign": {
			entries: []metav1.ManagedFieldsEntry{ours,
				managed("kubectl-label", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{"f:team":{}}}}`),
				managed("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, `{"f:status":{"f:typeChecking":{}}}`),
			},
			want: map[string][]string{},
		},
		"if another manager added to the spec, name what it added": {
			entries: []metav1.ManagedFieldsEntry{ours,
				managed("e2e-narrower", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:matchResources":{".":{},"f:objectSelector":{}},"f:validationActions":{"v:\"Warn\"":{}}}}`),
			},
			want: map[string][]string{"e2e-narrower": {`.spec.matchResources.objectSelector`, `.spec.validationActions[="Warn"]`}},
		},
		"if the guard's own updates hold fields, they are the guard's": {
			entries: []metav1.ManagedFieldsEntry{ours, managed(FieldManager, metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:matchResources":{}}}`)},
			want:    map[string][]string{},
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := &admv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "x", ManagedFields: tc.entries}}
			got, err := foreignSpecFields(b)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
