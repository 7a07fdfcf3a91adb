package discover

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The fake client rewrites managedFields, so the managers are tested on
// the entries themselves (e2e covers them on a real API server).
func Test_CABundleManagers(t *testing.T) {
	entry := func(manager string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{
			Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "admissionregistration.k8s.io/v1", FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:webhooks":{"k:{\"name\":\"w0.example.com\"}":{"f:clientConfig":{"f:caBundle":{}}}}}`),
		}
	}
	got := CABundleManagers([]metav1.ManagedFieldsEntry{entry("app-controller"), entry("cainjector"), entry("app-controller")})
	assert.Equal(t, []string{"app-controller", "cainjector"}, got)
	assert.Empty(t, CABundleManagers([]metav1.ManagedFieldsEntry{{Manager: "kubectl", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{}}`)}}))
}
