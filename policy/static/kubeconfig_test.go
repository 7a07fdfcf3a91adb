package static

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func Test_WebhookKubeconfig(t *testing.T) {
	tests := map[string]struct {
		url, cert, key string
		exp, expErr    string
	}{
		"if the URL has a port, name the user host:port, as kube-apiserver looks it up": {
			url: "https://127.0.0.1:9443/validate", cert: "/etc/guard/client.crt", key: "/etc/guard/./client.key",
			exp: `apiVersion: v1
kind: Config
users:
- name: 127.0.0.1:9443
  user:
    client-certificate: /etc/guard/client.crt
    client-key: /etc/guard/client.key
`,
		},
		"if the URL is not https, refuse it": {
			url: "http://127.0.0.1:9443/validate", cert: "/c", key: "/k",
			expErr: `the webhook URL must be an https URL with a host, got "http://127.0.0.1:9443/validate"`,
		},
		"if the key path is relative, refuse it: kube-apiserver reads it from its own working directory": {
			url: "https://127.0.0.1:9443/validate", cert: "/c", key: "client.key",
			expErr: `the client key path must be absolute (kube-apiserver reads it), got "client.key"`,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := WebhookKubeconfig(test.url, test.cert, test.key)
			if test.expErr != "" {
				assert.EqualError(t, err, test.expErr)
				return
			}
			assert.NoError(t, err)
			assert.Equal(t, test.exp, string(got))
		})
	}
}

func Test_AdmissionConfigurationWithKubeconfig(t *testing.T) {
	got, err := AdmissionConfigurationWithKubeconfig("/etc/kubernetes/webhook-guard/static", "/etc/kubernetes/webhook-guard/"+KubeconfigFileName)
	assert.NoError(t, err)
	assert.Equal(t, `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: /etc/kubernetes/webhook-guard/webhook-client.kubeconfig
    staticManifestsDir: /etc/kubernetes/webhook-guard/static
  name: ValidatingAdmissionWebhook
`, string(got))
	_, err = AdmissionConfigurationWithKubeconfig("/etc/static", "client.kubeconfig")
	assert.EqualError(t, err, `kubeConfigFile must be absolute (kube-apiserver reads it), got "client.kubeconfig"`)
}
