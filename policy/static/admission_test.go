package static

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func Test_AdmissionConfiguration(t *testing.T) {
	tests := map[string]struct {
		dir    string
		exp    string
		expErr string
	}{
		"if the directory is absolute, point the ValidatingAdmissionWebhook plugin at it": {
			dir: "/etc/kubernetes/webhook-guard/static",
			exp: `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: ""
    staticManifestsDir: /etc/kubernetes/webhook-guard/static
  name: ValidatingAdmissionWebhook
`,
		},
		"if the directory is not clean, write it cleaned: both render commands give the same file": {
			dir: "/srv/guard/./static/",
			exp: `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: ""
    staticManifestsDir: /srv/guard/static
  name: ValidatingAdmissionWebhook
`,
		},
		"if the directory is relative, refuse it: kube-apiserver requires an absolute one": {
			dir:    "static",
			expErr: `staticManifestsDir must be absolute (kube-apiserver requires it), got "static"`,
		},
		"if no directory is given, refuse it": {
			dir:    "",
			expErr: `staticManifestsDir must be absolute (kube-apiserver requires it), got ""`,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := AdmissionConfiguration(test.dir)
			if test.expErr != "" {
				assert.EqualError(t, err, test.expErr)
				assert.Nil(t, got)
				return
			}
			assert.NoError(t, err)
			assert.Equal(t, test.exp, string(got))
		})
	}
}
