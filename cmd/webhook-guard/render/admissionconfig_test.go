package render_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/app"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/golden"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/render"
)

// Test_renderAdmissionConfig: the AdmissionConfiguration renders without a
// CA, and is the same file "render static-manifest --output-dir" writes.
func Test_renderAdmissionConfig(t *testing.T) {
	tests := map[string]struct {
		args []string
	}{
		"if no directory is given, point at the recipes' and the chart's default directory": {},
		"if a directory is given, point at it": {
			args: []string{"--static-manifests-dir", "/srv/guard/static/"},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := app.Main(append([]string{"render", "admission-config"}, test.args...), &stdout, &stderr)
			require.Equal(t, 0, code, stderr.String())
			golden.Assert(t, filepath.Join("testdata", "render", golden.Name(name)), stdout.Bytes())
		})
	}
}

func Test_renderAdmissionConfig_sameAsStaticManifest(t *testing.T) {
	// The default directory, and one given unclean: both commands write it
	// the same way.
	for _, staticDir := range []string{render.DefaultStaticManifestsDir, "/srv/guard/./static/"} {
		t.Run(staticDir, func(t *testing.T) {
			dir := t.TempDir()
			var stdout, stderr bytes.Buffer
			code := app.Main([]string{"render", "static-manifest", "--ca-file", "testdata/ca.pem", "--output-dir", dir, "--static-manifests-dir", staticDir}, &stdout, &stderr)
			require.Equal(t, 0, code, stderr.String())
			written, err := os.ReadFile(filepath.Join(dir, render.AdmissionFileName))
			require.NoError(t, err)

			stdout.Reset()
			code = app.Main([]string{"render", "admission-config", "--static-manifests-dir", staticDir}, &stdout, &stderr)
			require.Equal(t, 0, code, stderr.String())
			assert.Equal(t, string(written), stdout.String())
		})
	}
}

func Test_renderAdmissionConfig_invalid(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := app.Main([]string{"render", "admission-config", "--static-manifests-dir", "static"}, &stdout, &stderr)
	assert.Equal(t, 2, code)
	assert.Equal(t, "error: --static-manifests-dir must be absolute (kube-apiserver requires it), got \"static\"\n", stderr.String())
	assert.Empty(t, stdout.String())
}
