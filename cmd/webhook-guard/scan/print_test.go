package scan

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func Test_configurationName(t *testing.T) {
	tests := map[string]struct{ ref, want string }{
		"a webhook configuration is named in admissionregistration.k8s.io": {
			"ValidatingWebhookConfiguration/app", "validatingwebhookconfiguration.admissionregistration.k8s.io/app"},
		"a CRD is named in apiextensions.k8s.io": {
			"CustomResourceDefinition/widgets.example.com", "customresourcedefinition.apiextensions.k8s.io/widgets.example.com"},
		"an APIService is named in apiregistration.k8s.io": {
			"APIService/v1.metrics.example.com", "apiservice.apiregistration.k8s.io/v1.metrics.example.com"},
		"a reference without a kind is kept": {"cluster", "cluster"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, configurationName(tc.ref))
		})
	}
}
