package render_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/app"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/golden"
)

// Test_renderGitOps compares `render gitops` with golden files; policy/gitops
// holds the rules' table tests, and the gitops decode module decodes these
// goldens with Argo CD's and Flux's own API types.
func Test_renderGitOps(t *testing.T) {
	const mixed = "testdata/render-gitops/guard-mixed.yaml"
	tests := map[string]struct {
		args   []string
		stderr string
	}{
		"if cainjector injects the CA, Argo CD ignores the caBundles of its configuration": {
			args: []string{"--tool", "argocd", "--config", samples + "guard-cainjector.yaml"},
		},
		"if a patch of an Application is asked for, print the Application with the sync option": {
			args: []string{"--tool", "argocd", "--config", samples + "guard-koordinator.yaml", "--patch", "argocd/koordinator"},
		},
		"if Flux is asked for, print its ignore rules": {
			args: []string{"--tool", "flux", "--values", samples + "values-cainjector.yaml"},
		},
		"if a patch of a Kustomization is asked for, print the Kustomization": {
			args: []string{"--tool", "flux", "--config", samples + "guard-koordinator.yaml", "--patch", "flux-system/koordinator", "--webhook-entries", "2"},
		},
		"if a mapping selects by label, Flux targets the selector": {
			args: []string{"--tool", "flux", "--config", mixed, "--webhook-entries", "1"},
		},
		"if a mapping selects by label, Argo CD has no rule and a warning says what to do": {
			args: []string{"--tool", "argocd", "--config", mixed},
			stderr: "warning: owners[selected].match.labelSelector (app.kubernetes.io/name=example): Argo CD's ignoreDifferences selects by name, not by label; list the configurations under match.validating or match.mutating, or add a rule for kind MutatingWebhookConfiguration without a name (it then covers every MutatingWebhookConfiguration of the Application)\n" +
				"warning: owners[selected].match.labelSelector (app.kubernetes.io/name=example): Argo CD's ignoreDifferences selects by name, not by label; list the configurations under match.validating or match.mutating, or add a rule for kind ValidatingWebhookConfiguration without a name (it then covers every ValidatingWebhookConfiguration of the Application)\n",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := app.Main(append([]string{"render", "gitops"}, test.args...), &stdout, &stderr)
			require.Equal(t, 0, code, stderr.String())
			assert.Equal(t, test.stderr, stderr.String())
			golden.Assert(t, filepath.Join("testdata", "render-gitops", golden.Name(name)), stdout.Bytes())
		})
	}
}

func Test_renderGitOps_invalid(t *testing.T) {
	tests := map[string]struct {
		args   []string
		stderr string
	}{
		"if no tool is given, name the tools": {
			args:   []string{"--config", samples + "guard-cainjector.yaml"},
			stderr: "error: --tool must be argocd or flux, got \"\"\n",
		},
		"if no config is given, say which flags give one": {
			args:   []string{"--tool", "flux"},
			stderr: "error: --config, --values or --from-cluster is required\n",
		},
		"if the patch is not namespace/name, say so": {
			args:   []string{"--tool", "argocd", "--config", samples + "guard-cainjector.yaml", "--patch", "koordinator"},
			stderr: "error: --patch must be \"namespace/name\", got \"koordinator\"\n",
		},
		"if the entry count is below 1, say so": {
			args:   []string{"--tool", "flux", "--config", samples + "guard-cainjector.yaml", "--webhook-entries", "0"},
			stderr: "error: --webhook-entries must be at least 1, got 0\n",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := app.Main(append([]string{"render", "gitops"}, test.args...), &stdout, &stderr)
			assert.Equal(t, cmdutil.ExitInvalid, code)
			assert.Equal(t, test.stderr, stderr.String())
			assert.Empty(t, stdout.String())
		})
	}
}
