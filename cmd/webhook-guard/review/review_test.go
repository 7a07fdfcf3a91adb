package review

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
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/golden"
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
	for doc := range strings.SplitSeq(string(data), "\n---\n") {
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
		opts     Options
		exitCode int
		// now is reviewNow when zero.
		now time.Time
	}{
		"if nothing is filtered, list every finding with its suggestion and exit 1": {opts: Options{Output: cmdutil.OutputFlags{Format: "table"}}, exitCode: cmdutil.ExitDenied},
		"if filtered to one mapping, list only its findings":                        {opts: Options{Output: cmdutil.OutputFlags{Format: "table"}, Mapping: "app"}, exitCode: cmdutil.ExitDenied},
		"if filtered to break-glass, list it and exit 0":                            {opts: Options{Output: cmdutil.OutputFlags{Format: "table"}, Decision: "break-glass"}, exitCode: cmdutil.ExitAllowed},
		"if since a time after every would-deny, exit 0":                            {opts: Options{Output: cmdutil.OutputFlags{Format: "table"}, Since: "2026-11-30T04:30:00Z"}, exitCode: cmdutil.ExitAllowed},
		"if since a duration, keep what was last seen within it":                    {opts: Options{Output: cmdutil.OutputFlags{Format: "table"}, Since: "2h"}, exitCode: cmdutil.ExitDenied},
		"if asked for json, print the findings as json":                             {opts: Options{Output: cmdutil.OutputFlags{Format: "json"}, Mapping: "app"}, exitCode: cmdutil.ExitDenied},
		"if asked for yaml, print the findings as yaml":                             {opts: Options{Output: cmdutil.OutputFlags{Format: "yaml"}, Decision: "flapping"}, exitCode: cmdutil.ExitDenied},
		"if no report matches, say nothing would be denied and exit 0":              {opts: Options{Output: cmdutil.OutputFlags{Format: "table"}, Mapping: "nobody"}, exitCode: cmdutil.ExitAllowed},
		"if filtered to audit, list the would-denies but not the enforce denials":   {opts: Options{Output: cmdutil.OutputFlags{Format: "table"}, Decision: "audit"}, exitCode: cmdutil.ExitDenied},
		"if asked for wide, add the configuration, the webhook and first seen":      {opts: Options{Output: cmdutil.OutputFlags{Format: "wide"}, Mapping: "app"}, exitCode: cmdutil.ExitDenied},
		"if asked for no headers, print the rows only":                              {opts: Options{Output: cmdutil.OutputFlags{Format: "table", NoHeaders: true}}, exitCode: cmdutil.ExitDenied},
		"if asked for names, print each report holding a finding once":              {opts: Options{Output: cmdutil.OutputFlags{Format: "name"}}, exitCode: cmdutil.ExitDenied},
		"if the trust-path report is stale, say the guard is not probing":           {opts: Options{Output: cmdutil.OutputFlags{Format: "table"}, Mapping: "koordinator", Since: "1h"}, exitCode: cmdutil.ExitAllowed, now: reviewNow.Add(time.Hour)},
		"if asked for a jsonpath, print what it selects":                            {opts: Options{Output: cmdutil.OutputFlags{Format: "jsonpath={range .findings[*]}{.subject}{\"\\n\"}{end}"}, Mapping: "app"}, exitCode: cmdutil.ExitDenied},
	}
	c := fakeReports(t)
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			o := test.opts
			o.Client, o.Now = c, reviewNow
			if !test.now.IsZero() {
				o.Now = test.now
			}
			require.NoError(t, o.Validate())
			o.Out = &out
			err := o.Run(t.Context())
			code := cmdutil.ExitAllowed
			if ee, ok := errors.AsType[*cmdutil.ExitError](err); ok {
				code = ee.Code
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, test.exitCode, code)
			golden.Assert(t, filepath.Join("testdata", "review", golden.Name(name)), out.Bytes())
		})
	}
}

func Test_reviewTableWidth(t *testing.T) {
	var out bytes.Buffer
	o := Options{Output: cmdutil.OutputFlags{Format: "table", NoHeaders: true}, Client: fakeReports(t), Now: reviewNow}
	require.NoError(t, o.Validate())
	o.Out = &out
	err := o.Run(t.Context())
	var ee *cmdutil.ExitError
	require.ErrorAs(t, err, &ee)
	for line := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
		assert.LessOrEqual(t, len(line), 120, line)
	}
}

func Test_reviewFlags(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string
	}{
		"if the output is unknown, exit 2":   {args: []string{"-o", "text"}, want: "--output must be table, wide, json, yaml, name or jsonpath=TEMPLATE"},
		"if the decision is unknown, exit 2": {args: []string{"--decision", "allow"}, want: "--decision must be deny, audit, break-glass or flapping"},
		"if since does not parse, exit 2":    {args: []string{"--since", "yesterday"}, want: "--since must be an RFC 3339 time"},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			assert.Equal(t, cmdutil.ExitInvalid, cmdutil.Execute(NewCmdReview(t.Context(), genericiooptions.NewTestIOStreamsDiscard()), test.args, &stderr))
			assert.Contains(t, stderr.String(), test.want)
		})
	}
}
