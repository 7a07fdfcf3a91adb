package render_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		"if asked to explain, each expression's guarantee and laid-out CEL come as comments before its policy": {
			args: []string{"--config", samples + "guard-koordinator.yaml", "--objects", samples + "objects.yaml", "--explain"},
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

// koordinatorObjects is config/samples/objects.yaml with the validating
// configuration koordinator owns, of n entries holding the owner's CA as
// its Secret does (every other one twice: entries that hold different
// bundles, whose merge the policy checks entry by entry), written to a
// file of its own.
func koordinatorObjects(t *testing.T, n int) string {
	t.Helper()
	raw, err := os.ReadFile(samples + "objects.yaml")
	require.NoError(t, err)
	var ca string
	for doc := range strings.SplitSeq(string(raw), "\n---\n") {
		var secret struct {
			StringData map[string]string `json:"stringData"`
		}
		if strings.Contains(doc, "name: webhook-certs") {
			require.NoError(t, yaml.Unmarshal([]byte(doc+"\n"), &secret))
			ca = secret.StringData["ca.crt"]
		}
	}
	require.NotEmpty(t, ca)
	cfg := admv1.ValidatingWebhookConfiguration{TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"}}
	cfg.Name = "koord-validating-webhook-configuration"
	for i := range n {
		url := fmt.Sprintf("https://koord-manager.example/validate-%d", i)
		cfg.Webhooks = append(cfg.Webhooks, admv1.ValidatingWebhook{Name: fmt.Sprintf("w%d.koordinator.sh", i), ClientConfig: admv1.WebhookClientConfig{URL: &url, CABundle: []byte(strings.Repeat(ca, 1+i%2))}})
	}
	doc, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "objects.yaml")
	require.NoError(t, os.WriteFile(path, slices.Concat(raw, []byte("\n---\n"), doc), 0o600))
	return path
}

// Test_renderPolicy_cost: render policy prints what the owner's costliest
// writes cost on each configuration of --objects, and refuses (exit 1,
// an error naming the configuration, its entries and the limit) a
// configuration kube-apiserver would refuse a rotation of.
func Test_renderPolicy_cost(t *testing.T) {
	tests := map[string]struct {
		entries int
		code    int
		stderr  string
	}{
		"if a configuration has 3 entries, print what its owner's worst writes cost": {
			entries: 3,
		},
		"if a configuration has 600 entries, its owner's merge is over kube-apiserver's limit: an error": {
			entries: 600, code: cmdutil.ExitDenied,
			stderr: "error: owners[koordinator]: ValidatingWebhookConfiguration koord-validating-webhook-configuration has 600 entries: " +
				"kube-apiserver would refuse the owner's merge for its CEL cost (variables.badWebhooks in webhook-guard-koordinator costs 1167010, " +
				"over kube-apiserver's limit of 1000000 per CEL expression); split the configuration into smaller ones, or guard it with the static shape\n",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := app.Main([]string{"render", "policy", "--config", samples + "guard-koordinator.yaml", "--objects", koordinatorObjects(t, test.entries)}, &stdout, &stderr)
			assert.Equal(t, test.code, code, stderr.String())
			assert.Equal(t, test.stderr, stderr.String())
			golden.Assert(t, filepath.Join("testdata", "render-policy", golden.Name(name)), stdout.Bytes())
		})
	}
}
