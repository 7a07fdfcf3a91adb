package cmdutil

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const valuesFile = `replicaCount: 2
config:
  existingConfigMap: ""
  defaultMode: audit
  owners:
    - name: app
      match: {validating: [app-webhooks]}
      writers: {serviceAccounts: [app-system/app-controller]}
      ca: {secret: {namespace: app-system, name: app-ca, key: ca.crt}}
`

func Test_configSource(t *testing.T) {
	dir := t.TempDir()
	values := filepath.Join(dir, "values.yaml")
	require.NoError(t, os.WriteFile(values, []byte(valuesFile), 0o600))

	tests := map[string]struct {
		src     ConfigSource
		mapping string
		expErr  string
	}{
		"if a Helm values file is given as --values, take its config key": {src: ConfigSource{values: values}, mapping: "app"},
		"if a Helm values file is given as --config, say to use --values": {
			src:    ConfigSource{path: values},
			expErr: `hint: this is a Helm values file (top-level config:), pass it as --values`,
		},
		"if two sources are given, refuse":   {src: ConfigSource{path: values, fromCluster: true}, expErr: "--config, --values and --from-cluster are exclusive"},
		"if no source is given, return none": {src: ConfigSource{}},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, err := test.src.Load(t.Context(), &KubeFlags{})
			if test.expErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), test.expErr)
				return
			}
			require.NoError(t, err)
			if test.mapping == "" {
				assert.Nil(t, cfg)
				return
			}
			require.NotNil(t, cfg)
			assert.Equal(t, test.mapping, cfg.Spec.Owners[0].Name)
		})
	}
}
