package render_test

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/app"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/golden"
)

// Test_renderPolicy compares `render policy` with golden files; the type
// check is policy/vap's test and kube-apiserver's verdicts are the e2e
// suite's (e2e/policymode_test.go).
func Test_renderPolicy(t *testing.T) {
	tests := map[string]struct {
		args   []string
		stderr string
	}{
		"if the owner's CA is in a Secret of --objects, the policy compares with its bytes": {
			args: []string{"--config", samples + "guard-koordinator.yaml", "--objects", samples + "objects.yaml"},
		},
		"if the CA is injected by cert-manager, the configuration's annotation names it": {
			args: []string{"--config", samples + "guard-cainjector.yaml", "--objects", "testdata/render-policy/cainjector-objects.yaml"},
		},
		"if the CA source is missing, warn and render a policy without a CA": {
			args:   []string{"--config", samples + "guard-koordinator-audit.yaml"},
			stderr: "warning: owners[koordinator]: cannot read the owner's CA from Secret koordinator-system/webhook-certs (key ca.crt): it does not exist; its policy holds no CA, so its caBundle changes are denied until the guard resolves it\n",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := app.Main(append([]string{"render", "policy"}, test.args...), &stdout, &stderr)
			require.Equal(t, 0, code, stderr.String())
			assert.Equal(t, test.stderr, stderr.String())
			golden.Assert(t, filepath.Join("testdata", "render-policy", golden.Name(name)), stdout.Bytes())
		})
	}
}

// Test_renderPolicy_decodes asserts every document decodes strictly as
// its typed object, policies first, and that the policy compares with the
// base64 of the Secret's bytes.
func Test_renderPolicy_decodes(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := app.Main([]string{"render", "policy", "--config", samples + "guard-koordinator.yaml", "--objects", samples + "objects.yaml"}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	docs := strings.Split(stdout.String(), "\n---\n")[1:]
	require.Len(t, docs, 2)
	var p admv1.ValidatingAdmissionPolicy
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[0]), &p))
	var b admv1.ValidatingAdmissionPolicyBinding
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[1]), &b))
	assert.Equal(t, p.Name, b.Spec.PolicyName)
	objects, err := os.ReadFile(samples + "objects.yaml")
	require.NoError(t, err)
	var secret struct {
		StringData map[string]string `json:"stringData"`
	}
	for doc := range strings.SplitSeq(string(objects), "\n---\n") {
		if strings.Contains(doc, "name: webhook-certs") {
			require.NoError(t, yaml.Unmarshal([]byte(doc+"\n"), &secret))
		}
	}
	require.NotEmpty(t, secret.StringData["ca.crt"])
	var ca string
	for _, v := range p.Spec.Variables {
		if v.Name == "ca" {
			ca = v.Expression
		}
	}
	assert.Equal(t, `"`+base64.StdEncoding.EncodeToString([]byte(secret.StringData["ca.crt"]))+`"`, ca, "the owner's CA as a literal (no --ca-params)")
	assert.Nil(t, p.Spec.ParamKind)
}

func Test_renderPolicy_invalid(t *testing.T) {
	tests := map[string]struct {
		args   []string
		stderr string
	}{
		"if no config is given, say it is required": {
			args:   nil,
			stderr: "error: --config or --values is required\n",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := app.Main(append([]string{"render", "policy"}, test.args...), &stdout, &stderr)
			assert.Equal(t, cmdutil.ExitInvalid, code)
			assert.Equal(t, test.stderr, stderr.String())
		})
	}
}

// Test_renderPolicy_removedFlags: the flags of the param ConfigMaps policy
// mode does not generate are unknown.
func Test_renderPolicy_removedFlags(t *testing.T) {
	for _, flag := range []string{"--namespace", "--guard-service-account"} {
		var stdout, stderr bytes.Buffer
		code := app.Main([]string{"render", "policy", "--config", samples + "guard-koordinator.yaml", flag, "x"}, &stdout, &stderr)
		assert.Equal(t, cmdutil.ExitInvalid, code)
		assert.Equal(t, "error: unknown flag: "+flag+"\n", stderr.String())
		assert.Empty(t, stdout.String())
	}
}

// Test_renderPolicy_writeBudget: a writeBudget, which the generated
// policies cannot apply, is warned about and the policies are rendered as
// without it.
func Test_renderPolicy_writeBudget(t *testing.T) {
	raw, err := os.ReadFile(samples + "guard-koordinator.yaml")
	require.NoError(t, err)
	budgeted := filepath.Join(t.TempDir(), "guard.yaml")
	require.NoError(t, os.WriteFile(budgeted, append(raw, []byte("    writeBudget: {perMinute: 30}\n")...), 0o600))

	render := func(config string) (string, string) {
		var stdout, stderr bytes.Buffer
		code := app.Main([]string{"render", "policy", "--config", config, "--objects", samples + "objects.yaml"}, &stdout, &stderr)
		require.Equal(t, 0, code, stderr.String())
		// The first line names the file rendered from.
		_, body, _ := strings.Cut(stdout.String(), "\n")
		return body, stderr.String()
	}
	plain, _ := render(samples + "guard-koordinator.yaml")
	out, warning := render(budgeted)
	assert.Equal(t, "warning: owners[koordinator].writeBudget is not applied by the generated policies (their CEL keeps no state across requests); run the static shape to limit caBundle writes\n", warning)
	assert.Equal(t, plain, out)
}
