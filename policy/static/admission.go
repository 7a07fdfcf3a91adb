package static

import (
	"fmt"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// AdmissionConfiguration is the AdmissionConfiguration file for
// kube-apiserver's --admission-control-config-file: it points the
// ValidatingAdmissionWebhook plugin at staticManifestsDir, as kube-apiserver
// sees that directory. kubeConfigFile stays empty: the static webhook
// carries its own URL and CA (AdmissionConfigurationWithKubeconfig adds the
// client certificate kube-apiserver presents). The directory is written cleaned
// (filepath.Clean), here rather than in each caller, so that `render
// admission-config` and `render static-manifest` write the same file for
// the same directory.
func AdmissionConfiguration(staticManifestsDir string) ([]byte, error) {
	return AdmissionConfigurationWithKubeconfig(staticManifestsDir, "")
}

// AdmissionConfigurationWithKubeconfig is AdmissionConfiguration whose
// kubeConfigFile (absolute, as kube-apiserver sees it; empty for none) names
// the kubeconfig with the client certificate kube-apiserver presents to the
// guard (WebhookKubeconfig).
func AdmissionConfigurationWithKubeconfig(staticManifestsDir, kubeConfigFile string) ([]byte, error) {
	if kubeConfigFile != "" && !filepath.IsAbs(kubeConfigFile) {
		return nil, fmt.Errorf("kubeConfigFile must be absolute (kube-apiserver reads it), got %q", kubeConfigFile)
	}
	if kubeConfigFile != "" {
		kubeConfigFile = filepath.Clean(kubeConfigFile)
	}
	if !filepath.IsAbs(staticManifestsDir) {
		return nil, fmt.Errorf("staticManifestsDir must be absolute (kube-apiserver requires it), got %q", staticManifestsDir)
	}
	// A map rather than k8s.io/apiserver's AdmissionConfiguration type,
	// whose plugins carry a path field without omitempty: the file holds
	// only what the plugin needs.
	return yaml.Marshal(map[string]any{
		"apiVersion": "apiserver.config.k8s.io/v1",
		"kind":       "AdmissionConfiguration",
		"plugins": []any{map[string]any{
			"name": "ValidatingAdmissionWebhook",
			"configuration": map[string]any{
				"apiVersion":         "apiserver.config.k8s.io/v1",
				"kind":               "WebhookAdmissionConfiguration",
				"kubeConfigFile":     kubeConfigFile,
				"staticManifestsDir": filepath.Clean(staticManifestsDir),
			},
		}},
	})
}
