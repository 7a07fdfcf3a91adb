package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Test_renderPolicy compares `render policy` with golden files; the type
// check is policy/vap's test and kube-apiserver's verdicts are the e2e
// suite's (e2e/policymode_test.go).
func Test_renderPolicy(t *testing.T) {
	tests := map[string]struct {
		args   []string
		stderr string
	}{
		"if the owner's CA is in a Secret of --objects, its bytes are the param": {
			args: []string{"--config", samples + "guard-koordinator.yaml", "--objects", samples + "objects.yaml", "--guard-service-account", "webhook-guard/webhook-guard"},
		},
		"if the CA is injected by cert-manager, the configuration's annotation names it": {
			args: []string{"--config", samples + "guard-cainjector.yaml", "--objects", "testdata/render-policy/cainjector-objects.yaml", "--namespace", "guard"},
		},
		"if the CA source is missing, warn and render a param without a CA": {
			args:   []string{"--config", samples + "guard-koordinator-audit.yaml"},
			stderr: "warning: owners[koordinator]: cannot read the owner's CA from Secret koordinator-system/webhook-certs (key ca.crt): it does not exist; its param holds no CA, so its caBundle changes are denied until the guard resolves it\n",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(append([]string{"render", "policy"}, test.args...), &stdout, &stderr)
			require.Equal(t, 0, code, stderr.String())
			assert.Equal(t, test.stderr, stderr.String())
			golden := filepath.Join("testdata", "render-policy", goldenName(name))
			assertGolden(t, golden, stdout.Bytes())
		})
	}
}

// Test_renderPolicy_decodes asserts every document decodes strictly as
// its typed object, params first.
func Test_renderPolicy_decodes(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Main([]string{"render", "policy", "--config", samples + "guard-koordinator.yaml", "--objects", samples + "objects.yaml"}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	docs := strings.Split(stdout.String(), "\n---\n")[1:]
	require.Len(t, docs, 3)
	var cm corev1.ConfigMap
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[0]), &cm))
	ca, err := os.ReadFile(samples + "objects.yaml")
	require.NoError(t, err)
	assert.NotEmpty(t, cm.BinaryData["caBundle"])
	assert.True(t, bytes.Contains(ca, bytes.TrimSpace(bytes.Split(cm.BinaryData["caBundle"], []byte("\n"))[1])), "the param holds the Secret's PEM")
	var p admv1.ValidatingAdmissionPolicy
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[1]), &p))
	var b admv1.ValidatingAdmissionPolicyBinding
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[2]), &b))
	assert.Equal(t, p.Name, b.Spec.PolicyName)
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
		"if the namespace is not a DNS label, say so": {
			args:   []string{"--config", samples + "guard-koordinator.yaml", "--namespace", "Guard"},
			stderr: "error: --namespace \"Guard\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')\n",
		},
		"if the guard's service account is a username, refuse it": {
			args:   []string{"--config", samples + "guard-koordinator.yaml", "--guard-service-account", "system:serviceaccount:a:b"},
			stderr: "error: --guard-service-account must be \"namespace/name\", got \"system:serviceaccount:a:b\"\n",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(append([]string{"render", "policy"}, test.args...), &stdout, &stderr)
			assert.Equal(t, ExitInvalid, code)
			assert.Equal(t, test.stderr, stderr.String())
		})
	}
}
