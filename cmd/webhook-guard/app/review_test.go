package app

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/webhook"
)

// reviewNow is "now" for --since durations in the golden tests.
var reviewNow = time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)

func fakeReports(t *testing.T) client.Client {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "review", "reports.yaml"))
	require.NoError(t, err)
	scheme, err := webhook.NewScheme()
	require.NoError(t, err)
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var rep reportsv1alpha1.ClusterReport
		require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &rep))
		b = b.WithObjects(&rep)
	}
	return b.Build()
}

// Test_review runs review over fake reports and compares its output with
// the golden files and its exit code with the documented one.
func Test_review(t *testing.T) {
	tests := map[string]struct {
		opts     reviewOptions
		exitCode int
	}{
		"if nothing is filtered, list every finding with its suggestion and exit 1": {opts: reviewOptions{out: outputFlags{format: "table"}}, exitCode: ExitDenied},
		"if filtered to one mapping, list only its findings":                        {opts: reviewOptions{out: outputFlags{format: "table"}, mapping: "app"}, exitCode: ExitDenied},
		"if filtered to break-glass, list it and exit 0":                            {opts: reviewOptions{out: outputFlags{format: "table"}, decision: "break-glass"}, exitCode: ExitAllowed},
		"if since a time after every would-deny, exit 0":                            {opts: reviewOptions{out: outputFlags{format: "table"}, since: "2026-11-30T04:30:00Z"}, exitCode: ExitAllowed},
		"if since a duration, keep what was last seen within it":                    {opts: reviewOptions{out: outputFlags{format: "table"}, since: "2h"}, exitCode: ExitDenied},
		"if asked for json, print the findings as json":                             {opts: reviewOptions{out: outputFlags{format: "json"}, mapping: "app"}, exitCode: ExitDenied},
		"if asked for yaml, print the findings as yaml":                             {opts: reviewOptions{out: outputFlags{format: "yaml"}, decision: "flapping"}, exitCode: ExitDenied},
		"if no report matches, say nothing would be denied and exit 0":              {opts: reviewOptions{out: outputFlags{format: "table"}, mapping: "nobody"}, exitCode: ExitAllowed},
		"if filtered to audit, list the would-denies but not the enforce denials":   {opts: reviewOptions{out: outputFlags{format: "table"}, decision: "audit"}, exitCode: ExitDenied},
		"if asked for wide, add the configuration, the webhook and first seen":      {opts: reviewOptions{out: outputFlags{format: "wide"}, mapping: "app"}, exitCode: ExitDenied},
		"if asked for no headers, print the rows only":                              {opts: reviewOptions{out: outputFlags{format: "table", noHeaders: true}}, exitCode: ExitDenied},
		"if asked for names, print each report holding a finding once":              {opts: reviewOptions{out: outputFlags{format: "name"}}, exitCode: ExitDenied},
		"if asked for a jsonpath, print what it selects":                            {opts: reviewOptions{out: outputFlags{format: "jsonpath={range .findings[*]}{.subject}{\"\\n\"}{end}"}, mapping: "app"}, exitCode: ExitDenied},
	}
	c := fakeReports(t)
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			err := runReview(t.Context(), c, &test.opts, reviewNow, &out)
			code := ExitAllowed
			var ee *exitError
			if errors.As(err, &ee) {
				code = ee.code
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, test.exitCode, code)
			golden := filepath.Join("testdata", "review", goldenName(name))
			assertGolden(t, golden, out.Bytes())
		})
	}
}

func Test_reviewTableWidth(t *testing.T) {
	var out bytes.Buffer
	err := runReview(t.Context(), fakeReports(t), &reviewOptions{out: outputFlags{format: "table", noHeaders: true}}, reviewNow, &out)
	var ee *exitError
	require.ErrorAs(t, err, &ee)
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		assert.LessOrEqual(t, len(line), 120, line)
	}
}

func Test_reviewFlags(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string
	}{
		"if the output is unknown, exit 2":   {args: []string{"review", "-o", "text"}, want: "--output must be table, wide, json, yaml, name or jsonpath=TEMPLATE"},
		"if the decision is unknown, exit 2": {args: []string{"review", "--decision", "allow"}, want: "--decision must be deny, audit, break-glass or flapping"},
		"if since does not parse, exit 2":    {args: []string{"review", "--since", "yesterday"}, want: "--since must be an RFC 3339 time"},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, ExitInvalid, Main(test.args, &stdout, &stderr))
			assert.Contains(t, stderr.String(), test.want)
		})
	}
}
