package policysync

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// applyConflict is kube-apiserver's answer to an apply that conflicts
// with the managers' fields.
func applyConflict(causes ...metav1.StatusCause) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 409, Reason: metav1.StatusReasonConflict,
		Message: "Apply failed with conflicts", Details: &metav1.StatusDetails{Causes: causes},
	}}
}

func Test_conflictManagers(t *testing.T) {
	for name, tc := range map[string]struct {
		err        error
		managers   []string
		wantFields []string
	}{
		"if the conflict is with an updater, name it and its fields": {
			err: applyConflict(
				metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "kubectl-edit" using admissionregistration.k8s.io/v1 at 2026-01-01T00:00:00Z`, Field: ".spec.failurePolicy"},
				metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "kubectl-edit" using admissionregistration.k8s.io/v1 at 2026-01-01T00:00:00Z`, Field: ".spec.validations"},
			),
			managers: []string{"kubectl-edit"}, wantFields: []string{".spec.failurePolicy", ".spec.validations"},
		},
		"if the conflict is with several managers, name each once, sorted": {
			err: applyConflict(
				metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "z-applier"`, Field: ".spec.b"},
				metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "a \"quoted\" one" with subresource "status" using v1`, Field: ".spec.a"},
			),
			managers: []string{`a "quoted" one`, "z-applier"}, wantFields: []string{".spec.a", ".spec.b"},
		},
		"if it is a resourceVersion conflict, it is no apply conflict": {
			err: apierrors.NewConflict(admissionPolicies, "x", errors.New("modified")),
		},
		"if it is another error, it is no conflict":  {err: fmt.Errorf("wrapped: %w", apierrors.NewServerTimeout(admissionPolicies, "patch", 1))},
		"if there is no error, there is no conflict": {},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.managers, conflictManagers(tc.err))
			if tc.managers != nil {
				assert.Equal(t, tc.wantFields, conflictFields(tc.err))
			}
		})
	}
}

var admissionPolicies = schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"}
