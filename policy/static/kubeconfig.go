package static

import (
	"fmt"
	"net/url"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// KubeconfigFileName is the kubeconfig `render static-manifest` writes next
// to the AdmissionConfiguration when kube-apiserver authenticates to the
// guard with a client certificate.
const KubeconfigFileName = "webhook-client.kubeconfig"

// WebhookKubeconfig is the kubeconfig the ValidatingAdmissionWebhook
// plugin's kubeConfigFile names: one user, named after the guard's
// host:port as kube-apiserver matches it against the webhook's URL, whose
// client certificate and key (absolute paths, as kube-apiserver sees them)
// it presents to the guard. It names the guard's host only, so the
// certificate goes to no other webhook.
func WebhookKubeconfig(webhookURL, certFile, keyFile string) ([]byte, error) {
	u, err := url.Parse(webhookURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("the webhook URL must be an https URL with a host, got %q", webhookURL)
	}
	for _, f := range []struct{ what, path string }{{"client certificate", certFile}, {"client key", keyFile}} {
		if !filepath.IsAbs(f.path) {
			return nil, fmt.Errorf("the %s path must be absolute (kube-apiserver reads it), got %q", f.what, f.path)
		}
	}
	return yaml.Marshal(map[string]any{
		"apiVersion": "v1",
		"kind":       "Config",
		"users": []any{map[string]any{
			"name": u.Host,
			"user": map[string]any{
				"client-certificate": filepath.Clean(certFile),
				"client-key":         filepath.Clean(keyFile),
			},
		}},
	})
}
