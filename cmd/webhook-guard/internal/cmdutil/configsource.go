package cmdutil

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/policy"
)

// The installed GuardConfig, as the chart writes it: ConfigMap
// <release fullname>-config, key guard.yaml, in the release namespace.
const (
	defaultReleaseNamespace = "webhook-guard"
	defaultConfigMap        = "webhook-guard-config"
	configMapKey            = "guard.yaml"
)

// ConfigSource is where a command takes its GuardConfig from: a GuardConfig
// file (--config), a Helm values file (--values: its config key, as the
// chart renders it) or the installed ConfigMap (--from-cluster, in -n's
// namespace).
type ConfigSource struct {
	path        string
	values      string
	fromCluster bool
	configMap   string
}

// AddFlags adds --config, --values, --from-cluster and --config-map; what
// ends --config's help.
func (s *ConfigSource) AddFlags(cmd *cobra.Command, what string) {
	s.AddFileFlags(cmd, what)
	cmd.Flags().BoolVar(&s.fromCluster, "from-cluster", false, "Read the installed GuardConfig: ConfigMap --config-map (key "+configMapKey+") in the namespace -n (default "+defaultReleaseNamespace+").")
	cmd.Flags().StringVar(&s.configMap, "config-map", defaultConfigMap, "The chart's GuardConfig ConfigMap, for --from-cluster (<release fullname>-config).")
}

// AddFileFlags adds the sources that need no cluster, --config and --values,
// for the offline commands.
func (s *ConfigSource) AddFileFlags(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&s.path, "config", "", "GuardConfig file"+what+".")
	cmd.Flags().StringVar(&s.values, "values", "", "Helm values file of the chart: its config key is the GuardConfig.")
}

// Name says where the GuardConfig came from, for headers and messages.
func (s *ConfigSource) Name() string {
	switch {
	case s.path != "":
		return s.path
	case s.values != "":
		return s.values + " (config)"
	case s.fromCluster:
		return "ConfigMap " + s.configMap
	}
	return ""
}

// LoadRequired is Load for the commands that cannot run without a
// GuardConfig and take it from files only.
func (s *ConfigSource) LoadRequired(ctx context.Context) (*policy.Mappings, error) {
	cfg, err := s.Load(ctx, nil)
	if err == nil && cfg == nil {
		return nil, Invalid("--config or --values is required")
	}
	return cfg, err
}

// File is --config, or "" when the GuardConfig comes from elsewhere.
func (s *ConfigSource) File() string { return s.path }

// LoadWithBytes is Load for the offline sources, with the bytes of the
// --config file the GuardConfig was read from (nil for --values): one
// read, so that what is derived from the bytes (a fingerprint) and from the
// GuardConfig always describes the same version of the file.
func (s *ConfigSource) LoadWithBytes(ctx context.Context) (*policy.Mappings, []byte, error) {
	if s.path == "" {
		cfg, err := s.Load(ctx, nil)
		return cfg, nil, err
	}
	if s.values != "" || s.fromCluster {
		return nil, nil, Invalid("--config, --values and --from-cluster are exclusive: give one")
	}
	data, err := os.ReadFile(s.path)
	if err != nil {
		return nil, nil, Invalid("--config: %v", err)
	}
	cfg, err := s.loadFile(data)
	return cfg, data, err
}

// Load returns the GuardConfig, or nil when no source was given.
func (s *ConfigSource) Load(ctx context.Context, kube *KubeFlags) (*policy.Mappings, error) {
	n := 0
	for _, set := range []bool{s.path != "", s.values != "", s.fromCluster} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return nil, Invalid("--config, --values and --from-cluster are exclusive: give one")
	case s.path != "":
		data, err := os.ReadFile(s.path)
		if err != nil {
			return nil, Invalid("--config: %v", err)
		}
		return s.loadFile(data)
	case s.values != "":
		data, err := os.ReadFile(s.values)
		if err != nil {
			return nil, Invalid("--values: %v", err)
		}
		guard, err := guardConfigOfValues(data)
		if err != nil {
			return nil, Invalid("--values %s: %v", s.values, err)
		}
		cfg, err := policy.Load(guard)
		if err != nil {
			return nil, Invalid("--values %s: config: %v", s.values, err)
		}
		return cfg, nil
	case s.fromCluster:
		return s.loadFromCluster(ctx, kube)
	}
	return nil, nil //nolint:nilnil // no source given: the commands that need one say so (LoadRequired)
}

func (s *ConfigSource) loadFromCluster(ctx context.Context, kube *KubeFlags) (*policy.Mappings, error) {
	ns, err := kube.Namespace(defaultReleaseNamespace)
	if err != nil {
		return nil, Invalid("%v", err)
	}
	c, err := kube.Client()
	if err != nil {
		return nil, Invalid("%v", err)
	}
	var cm corev1.ConfigMap
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: s.configMap}, &cm); err != nil {
		return nil, Invalid("--from-cluster: ConfigMap %s/%s (the release namespace is -n, the name --config-map): %v", ns, s.configMap, err)
	}
	data, ok := cm.Data[configMapKey]
	if !ok {
		return nil, Invalid("--from-cluster: ConfigMap %s/%s has no key %s", ns, s.configMap, configMapKey)
	}
	cfg, err := policy.Load([]byte(data))
	if err != nil {
		return nil, Invalid("--from-cluster: ConfigMap %s/%s key %s: %v", ns, s.configMap, configMapKey, err)
	}
	return cfg, nil
}

// isHelmValues is true for a YAML document with a top-level config key and
// no GuardConfig kind: the chart's values, not a GuardConfig.
func isHelmValues(data []byte) bool {
	var top map[string]any
	if yaml.Unmarshal(data, &top) != nil {
		return false
	}
	_, hasConfig := top["config"]
	return hasConfig && top["kind"] != "GuardConfig"
}

// guardConfigOfValues is the GuardConfig the chart renders from values: the
// config key without the chart-only existingConfigMap, with apiVersion and
// kind.
func guardConfigOfValues(data []byte) ([]byte, error) {
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	cfg, ok := top["config"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("no config key (the chart's GuardConfig values)")
	}
	delete(cfg, "existingConfigMap")
	cfg["apiVersion"] = "webhook-guard.io/v1alpha1"
	cfg["kind"] = "GuardConfig"
	return yaml.Marshal(cfg)
}

// loadFile loads data, the bytes of the --config file.
func (s *ConfigSource) loadFile(data []byte) (*policy.Mappings, error) {
	cfg, err := policy.Load(data)
	if err != nil {
		if isHelmValues(data) {
			return nil, Invalid("--config %s: %v; hint: this is a Helm values file (top-level config:), pass it as --values", s.path, err)
		}
		return nil, Invalid("--config %s: %v", s.path, err)
	}
	return cfg, nil
}
