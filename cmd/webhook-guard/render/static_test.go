package render_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/app"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/golden"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/render"
	"github.com/webhook-guard/webhook-guard/policy/static"
)

const samples = "../../../config/samples/"

// Test_renderStaticManifest compares the rendered manifests with golden
// files; the e2e suite proves kube-apiserver loads and calls them.
func Test_renderStaticManifest(t *testing.T) {
	tests := map[string]struct {
		args []string
	}{
		"if a config with break-glass groups is given, add the fail-open break-glass entry": {
			args: []string{"--config", samples + "guard-koordinator.yaml"},
		},
		"if the guard's service account is given, route writes of its generated policies by anyone else to the guard": {
			args: []string{"--config", samples + "guard-koordinator.yaml", "--guard-service-account", "webhook-guard/webhook-guard"},
		},
		"if the skip grant's account is given, let kube-apiserver decide the writes always allowed": {
			args: []string{"--config", samples + "guard-koordinator.yaml", "--skip-grant-service-account", "webhook-guard/webhook-guard"},
		},
		"if no config is given, render one entry without matchConditions": {
			args: []string{"--failure-policy", "Ignore", "--timeout-seconds", "3", "--url", "https://127.0.0.1:8443/validate"},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := app.Main(append([]string{"render", "static-manifest", "--ca-file", "testdata/ca.pem"}, test.args...), &stdout, &stderr)
			require.Equal(t, 0, code, stderr.String())
			golden.Assert(t, filepath.Join("testdata", "render", golden.Name(name)), stdout.Bytes())
		})
	}
}

func Test_renderStaticManifest_outputDir(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := app.Main([]string{"render", "static-manifest", "--ca-file", "testdata/ca.pem", "--config", samples + "guard-koordinator.yaml", "--output-dir", dir}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())

	data, err := os.ReadFile(filepath.Join(dir, "static", render.StaticConfigName+".yaml"))
	require.NoError(t, err)
	var vwc admv1.ValidatingWebhookConfiguration
	require.NoError(t, yaml.UnmarshalStrict(data, &vwc))
	assert.Equal(t, render.StaticConfigName, vwc.Name)
	require.Len(t, vwc.Webhooks, 2)
	assert.Equal(t, admv1.Fail, *vwc.Webhooks[0].FailurePolicy)
	assert.Equal(t, admv1.Ignore, *vwc.Webhooks[1].FailurePolicy)
	assert.Equal(t, admv1.SideEffectClassNoneOnDryRun, *vwc.Webhooks[0].SideEffects)

	admission, err := os.ReadFile(filepath.Join(dir, "admission-configuration.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(admission), "staticManifestsDir: "+filepath.Join(dir, "static")+"\n")
}

// Test_renderStaticManifest_skipGrant: the grant written beside the
// manifest names the fingerprint of the --config file, which the
// manifest's skip condition asks the authorizer about.
func Test_renderStaticManifest_skipGrant(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	config := samples + "guard-koordinator.yaml"
	code := app.Main([]string{"render", "static-manifest", "--ca-file", "testdata/ca.pem", "--config", config, "--output-dir", dir,
		"--skip-grant-service-account", "webhook-guard/webhook-guard"}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	raw, err := os.ReadFile(config)
	require.NoError(t, err)
	fingerprint := static.Fingerprint(raw)

	grant, err := os.ReadFile(filepath.Join(dir, render.GrantFileName))
	require.NoError(t, err)
	docs := bytes.Split(grant, []byte("---\n"))
	require.Len(t, docs, 2)
	var role rbacv1.ClusterRole
	require.NoError(t, yaml.UnmarshalStrict(docs[0], &role))
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{static.GrantGroup}, Resources: []string{static.GrantResource}, ResourceNames: []string{fingerprint}, Verbs: []string{static.GrantVerb}}}, role.Rules)
	var binding rbacv1.ClusterRoleBinding
	require.NoError(t, yaml.UnmarshalStrict(docs[1], &binding))
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "webhook-guard", Name: "webhook-guard"}}, binding.Subjects)

	manifest, err := os.ReadFile(filepath.Join(dir, "static", render.StaticConfigName+".yaml"))
	require.NoError(t, err)
	var vwc admv1.ValidatingWebhookConfiguration
	require.NoError(t, yaml.UnmarshalStrict(manifest, &vwc))
	conds := vwc.Webhooks[0].MatchConditions
	require.NotEmpty(t, conds)
	assert.Equal(t, static.SkipConditionName, conds[len(conds)-1].Name)
	assert.Contains(t, conds[len(conds)-1].Expression, `.name("`+fingerprint+`")`)
}

// Test_renderStaticManifest_clientCert: with a client certificate, the
// kubeconfig naming it is written next to the AdmissionConfiguration, which
// names the kubeconfig as kube-apiserver sees it.
func Test_renderStaticManifest_clientCert(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := app.Main([]string{"render", "static-manifest", "--ca-file", "testdata/ca.pem", "--output-dir", dir,
		"--client-cert-file", "/etc/guard/apiserver-client.crt", "--client-key-file", "/etc/guard/apiserver-client.key"}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())

	admission, err := os.ReadFile(filepath.Join(dir, "admission-configuration.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(admission), "kubeConfigFile: "+filepath.Join(dir, "webhook-client.kubeconfig")+"\n")
	kubeconfig, err := os.ReadFile(filepath.Join(dir, "webhook-client.kubeconfig"))
	require.NoError(t, err)
	assert.Equal(t, `apiVersion: v1
kind: Config
users:
- name: 127.0.0.1:9443
  user:
    client-certificate: /etc/guard/apiserver-client.crt
    client-key: /etc/guard/apiserver-client.key
`, string(kubeconfig))
}

func Test_renderStaticManifest_invalid(t *testing.T) {
	tests := map[string]struct {
		args   []string
		stderr string
	}{
		"if no CA file is given, say it is required": {
			args:   nil,
			stderr: "error: --ca-file is required: the CA of the guard's serving certificate\n",
		},
		"if the URL is not https, reject it": {
			args:   []string{"--ca-file", "testdata/ca.pem", "--url", "http://127.0.0.1:9443/validate"},
			stderr: "error: --url must be an https URL, got \"http://127.0.0.1:9443/validate\"\n",
		},
		"if the failure policy is unknown, name the choices": {
			args:   []string{"--ca-file", "testdata/ca.pem", "--failure-policy", "Open"},
			stderr: "error: --failure-policy must be Fail or Ignore, got \"Open\"\n",
		},
		"if the CA file is not PEM, say so": {
			args:   []string{"--ca-file", samples + "guard-koordinator.yaml"},
			stderr: "error: --ca-file " + samples + "guard-koordinator.yaml: the data is not PEM: no \"-----BEGIN CERTIFICATE-----\" block found\n",
		},
		"if the guard's service account is a username, refuse it": {
			args:   []string{"--ca-file", "testdata/ca.pem", "--guard-service-account", "system:serviceaccount:a:b"},
			stderr: "error: --guard-service-account must be \"namespace/name\", got \"system:serviceaccount:a:b\"\n",
		},
		"if a client certificate is given without its key, say both are needed": {
			args:   []string{"--ca-file", "testdata/ca.pem", "--client-cert-file", "/etc/guard/client.crt"},
			stderr: "error: --client-cert-file and --client-key-file go together: kube-apiserver needs both to present the certificate\n",
		},
		"if the client key path is relative, refuse it": {
			args:   []string{"--ca-file", "testdata/ca.pem", "--client-cert-file", "/etc/guard/client.crt", "--client-key-file", "client.key"},
			stderr: "error: --client-key-file must be absolute (kube-apiserver reads it), got \"client.key\"\n",
		},
		"if the skip grant has no --config to fingerprint, refuse": {
			args:   []string{"--ca-file", "testdata/ca.pem", "--skip-grant-service-account", "webhook-guard/webhook-guard"},
			stderr: "error: --skip-grant-service-account requires --config: the grant names the fingerprint of that file\n",
		},
		"if the skip grant's account is a username, refuse it": {
			args:   []string{"--ca-file", "testdata/ca.pem", "--config", samples + "guard-koordinator.yaml", "--skip-grant-service-account", "webhook-guard"},
			stderr: "error: --skip-grant-service-account must be \"namespace/name\", got \"webhook-guard\"\n",
		},
		"if --watch has nowhere to write, refuse": {
			args:   []string{"--ca-file", "testdata/ca.pem", "--watch"},
			stderr: "error: --watch requires --output-dir\n",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := app.Main(append([]string{"render", "static-manifest"}, test.args...), &stdout, &stderr)
			assert.Equal(t, cmdutil.ExitInvalid, code)
			assert.Equal(t, test.stderr, stderr.String())
		})
	}
}
