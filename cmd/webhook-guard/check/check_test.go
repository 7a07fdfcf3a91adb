package check_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/app"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/golden"
)

const samples = "../../../config/samples/"

// Test_check runs `check` over every sample, as a user would, and compares
// its output with the golden files and its exit code with the documented one.
func Test_check(t *testing.T) {
	tests := map[string]struct {
		config, review string
		output         string
		exitCode       int
	}{
		"if the owner writes its own CA, allow":                                                             {config: "guard-koordinator.yaml", review: "owner.json", exitCode: cmdutil.ExitAllowed},
		"if another service account writes, deny (enforce)":                                                 {config: "guard-koordinator.yaml", review: "intruder.json", exitCode: cmdutil.ExitDenied},
		"if another service account writes in audit, allow + warn":                                          {config: "guard-koordinator-audit.yaml", review: "intruder.json", exitCode: cmdutil.ExitAllowed},
		"if the owner writes a foreign CA, deny":                                                            {config: "guard-koordinator.yaml", review: "foreign-ca.json", exitCode: cmdutil.ExitDenied},
		"if the owner writes old+new CA during rotation, allow":                                             {config: "guard-koordinator.yaml", review: "rotation-overlap.json", exitCode: cmdutil.ExitAllowed},
		"if the owner writes garbage PEM, deny":                                                             {config: "guard-koordinator.yaml", review: "garbage-pem.json", exitCode: cmdutil.ExitDenied},
		"if a non-owner deletes, deny":                                                                      {config: "guard-koordinator.yaml", review: "delete-intruder.json", exitCode: cmdutil.ExitDenied},
		"if system:masters writes, allow as break-glass":                                                    {config: "guard-koordinator.yaml", review: "breakglass.json", exitCode: cmdutil.ExitAllowed},
		"if a non-owner dry-runs in audit, allow and record nothing":                                        {config: "guard-koordinator-audit.yaml", review: "intruder-dry-run.json", exitCode: cmdutil.ExitAllowed},
		"if cainjector writes the Certificate's CA, allow":                                                  {config: "guard-cainjector.yaml", review: "cainjector.json", exitCode: cmdutil.ExitAllowed},
		"if the application writes its own CA over cainjector's, deny":                                      {config: "guard-cainjector.yaml", review: "cainjector-app-writes-own-ca.json", exitCode: cmdutil.ExitDenied},
		"if asked for json, print the AdmissionReview response":                                             {config: "guard-koordinator.yaml", review: "intruder.json", output: "json", exitCode: cmdutil.ExitDenied},
		"if asked for json in audit, include warnings and auditAnnotations":                                 {config: "guard-koordinator-audit.yaml", review: "foreign-ca.json", output: "json", exitCode: cmdutil.ExitAllowed},
		"if the owner's CA Secret holds garbage, deny caBundle changes as the server does (ca-unavailable)": {config: "guard-broken-source.yaml", review: "broken-source.json", exitCode: cmdutil.ExitDenied},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			args := []string{"check", "--config", samples + test.config, "--objects", samples + "objects.yaml", "--review", samples + "reviews/" + test.review}
			if test.output != "" {
				args = append(args, "-o", test.output)
			}
			var stdout, stderr bytes.Buffer
			code := app.Main(args, &stdout, &stderr)
			assert.Equal(t, test.exitCode, code, "stderr: %s", stderr.String())
			assert.Empty(t, stderr.String())
			golden.Assert(t, filepath.Join("testdata", "check", golden.Name(name)), stdout.Bytes())
		})
	}
}

// Test_check_invalidInput: invalid input exits 2 with an error that names
// the file and what is wrong, never a decision.
func Test_check_invalidInput(t *testing.T) {
	tests := map[string]struct {
		args   []string
		stderr string
	}{
		"if the review is malformed JSON, name the file": {
			args:   []string{"--config", samples + "guard-koordinator.yaml", "--review", "testdata/invalid/malformed.json"},
			stderr: "error: review testdata/invalid/malformed.json: json parse error: jsontext: unexpected EOF within \"/request\" after offset 89\n",
		},
		"if the review is about another kind, say which kinds are guarded": {
			args:   []string{"--config", samples + "guard-koordinator.yaml", "--review", "testdata/invalid/other-kind.json"},
			stderr: "error: review testdata/invalid/other-kind.json: request.kind /v1, Kind=ConfigMap is not guarded: expected admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration, admissionregistration.k8s.io/v1 MutatingWebhookConfiguration, apiextensions.k8s.io/v1 CustomResourceDefinition, apiregistration.k8s.io/v1 APIService; check the rules of the webhook registration\n",
		},
		"if the review has no uid, say so": {
			args:   []string{"--config", samples + "guard-koordinator.yaml", "--review", "testdata/invalid/missing-uid.json"},
			stderr: "error: review testdata/invalid/missing-uid.json: request.uid is missing\n",
		},
		"if the config has an unknown field, name its path": {
			args:   []string{"--config", "testdata/invalid/unknown-field.yaml", "--review", samples + "reviews/owner.json"},
			stderr: "error: --config testdata/invalid/unknown-field.yaml: cannot decode GuardConfig: unknown field \"owners[0].writer\"\n",
		},
		"if a mapping has two CA sources, name the mapping's ca field": {
			args:   []string{"--config", "testdata/invalid/two-ca-sources.yaml", "--review", samples + "reviews/owner.json"},
			stderr: "error: --config testdata/invalid/two-ca-sources.yaml: owners[0].ca: Invalid value: \"configMap, secret\": exactly one CA source may be set; the owner's CA must come from a single place\n",
		},
		"if a YAML review repeats a key, reject it as the server rejects a repeated JSON member": {
			args:   []string{"--config", samples + "guard-koordinator.yaml", "--review", "testdata/invalid/duplicate-key.yaml"},
			stderr: "error: review testdata/invalid/duplicate-key.yaml: not JSON, and not valid YAML: yaml: unmarshal errors:\n  line 10: key \"name\" already set in map\n",
		},
		"if the config file does not exist, name it": {
			args:   []string{"--config", "testdata/nope.yaml", "--review", samples + "reviews/owner.json"},
			stderr: "error: --config: open testdata/nope.yaml: no such file or directory\n",
		},
		"if the output format is unknown, say which are supported": {
			args:   []string{"--config", samples + "guard-koordinator.yaml", "--review", samples + "reviews/owner.json", "-o", "xml"},
			stderr: "error: --output must be table, json or yaml, got \"xml\"\n",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := app.Main(append([]string{"check"}, test.args...), &stdout, &stderr)
			assert.Equal(t, cmdutil.ExitInvalid, code)
			assert.Equal(t, test.stderr, stderr.String())
			assert.Empty(t, stdout.String())
		})
	}
}

// Test_check_yaml: a review in YAML is converted to JSON and answered
// exactly as the same review in JSON.
func Test_check_yaml(t *testing.T) {
	for _, output := range []string{"table", "json", "yaml"} {
		t.Run("if the output is "+output+", YAML and JSON give the same answer and exit code", func(t *testing.T) {
			run := func(review string) (int, string) {
				var stdout, stderr bytes.Buffer
				code := app.Main([]string{"check", "--config", samples + "guard-koordinator.yaml", "--objects", samples + "objects.yaml", "--review", review, "-o", output}, &stdout, &stderr)
				assert.Empty(t, stderr.String())
				return code, stdout.String()
			}
			yamlCode, yamlOut := run("testdata/reviews/intruder.yaml")
			jsonCode, jsonOut := run(samples + "reviews/intruder.json")
			assert.Equal(t, cmdutil.ExitDenied, jsonCode)
			assert.Equal(t, jsonCode, yamlCode)
			assert.Equal(t, jsonOut, yamlOut)
		})
	}
}

// Test_check_outputYAML: -o yaml prints the same answer as -o json.
func Test_check_outputYAML(t *testing.T) {
	run := func(output string) string {
		var stdout, stderr bytes.Buffer
		code := app.Main([]string{"check", "--config", samples + "guard-koordinator.yaml", "--objects", samples + "objects.yaml", "--review", samples + "reviews/intruder.json", "-o", output}, &stdout, &stderr)
		require.Equal(t, cmdutil.ExitDenied, code, "stderr: %s", stderr.String())
		return stdout.String()
	}
	fromYAML, err := yaml.YAMLToJSON([]byte(run("yaml")))
	require.NoError(t, err)
	assert.JSONEq(t, run("json"), string(fromYAML))
}

// Test_check_values: a Helm values file given as --values decides like the
// GuardConfig the chart renders from it; given as --config it is refused
// with the hint to use --values.
func Test_check_values(t *testing.T) {
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := app.Main(append([]string{"check", "--objects", samples + "objects.yaml", "--review", samples + "reviews/intruder.json", "-o", "json"}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	fromConfigCode, fromConfig, _ := run("--config", samples+"guard-koordinator-audit.yaml")
	fromValuesCode, fromValues, stderr := run("--values", samples+"values-koordinator.yaml")
	assert.Empty(t, stderr)
	assert.Equal(t, fromConfigCode, fromValuesCode)
	assert.Equal(t, fromConfig, fromValues)

	code, _, stderr := run("--config", samples+"values-koordinator.yaml")
	assert.Equal(t, cmdutil.ExitInvalid, code)
	assert.Contains(t, stderr, "hint: this is a Helm values file (top-level config:), pass it as --values")
}
