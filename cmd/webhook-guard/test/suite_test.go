package test_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/app"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
)

// Test_test runs `webhook-guard test` on the sample suites (so every CI run
// runs them) and on suites that must fail or be refused.
func Test_test(t *testing.T) {
	samplesDir, err := filepath.Abs(filepath.Join("..", "..", "..", "config", "samples"))
	require.NoError(t, err)
	suite := func(body string) string {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "suite.yaml"), []byte("apiVersion: webhook-guard.io/v1alpha1\nkind: TestSuite\nconfig: "+
			filepath.Join(samplesDir, "guard-koordinator.yaml")+"\nobjects: "+filepath.Join(samplesDir, "objects.yaml")+"\n"+body), 0o600))
		return dir
	}
	intruder := filepath.Join(samplesDir, "reviews", "intruder.json")

	tests := map[string]struct {
		dir      string
		exitCode int
		stdout   string
		stderr   string
	}{
		"if every sample case gets its verdict, exit 0": {dir: filepath.Join(samplesDir, "tests"), exitCode: cmdutil.ExitAllowed, stdout: "8 passed, 0 failed."},
		"if a case gets another verdict, show what it got and exit 1": {
			dir:      suite("tests:\n  - name: wrong expectation\n    review: " + intruder + "\n    outcome: allow\n"),
			exitCode: cmdutil.ExitDenied, stdout: "suite   wrong expectation   FAIL     allow   deny",
		},
		"if an outcome is unknown, exit 2 naming the case": {
			dir:      suite("tests:\n  - name: typo\n    review: " + intruder + "\n    outcome: denied\n"),
			exitCode: cmdutil.ExitInvalid, stderr: "tests[0].outcome must be allow, deny, audit or break-glass, got \"denied\"",
		},
		"if a suite has an unknown field, exit 2": {
			dir:      suite("tests:\n  - name: typo\n    review: " + intruder + "\n    expect: deny\n"),
			exitCode: cmdutil.ExitInvalid, stderr: `unknown field "expect"`,
		},
		"if the directory holds no suite, exit 2": {dir: t.TempDir(), exitCode: cmdutil.ExitInvalid, stderr: "no TestSuite files under"},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, test.exitCode, app.Main([]string{"test", test.dir}, &stdout, &stderr), "stderr: %s", stderr.String())
			assert.Contains(t, stdout.String(), test.stdout)
			assert.Contains(t, stderr.String(), test.stderr)
		})
	}
}
