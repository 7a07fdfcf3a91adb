package app

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

// TestSuite is one file of `webhook-guard test`: a GuardConfig, the objects
// its CA sources resolve against, and reviews with the verdict each must
// get. Paths are relative to the suite file.
type TestSuite struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Config is the GuardConfig file.
	Config string `json:"config"`
	// Objects is an optional YAML stream of Secrets, ConfigMaps and
	// cert-manager objects (as check --objects).
	Objects string      `json:"objects,omitempty"`
	Tests   []SuiteCase `json:"tests"`
}

// SuiteCase is one review and its expected verdict.
type SuiteCase struct {
	Name string `json:"name"`
	// Review is an AdmissionReview file, JSON or YAML.
	Review string `json:"review"`
	// Outcome is allow, deny, audit or break-glass.
	Outcome policy.Outcome `json:"outcome"`
	// Rule, when set, is the rule the decision must name (not-owner,
	// ca-mismatch, ...).
	Rule policy.Rule `json:"rule,omitempty"`
}

// suiteKind is the kind of suite files; other YAML files in DIR are skipped.
const suiteKind = "TestSuite"

// SuiteResult is one case's result, as -o json|yaml prints it.
type SuiteResult struct {
	Suite   string `json:"suite"`
	Test    string `json:"test"`
	Pass    bool   `json:"pass"`
	Want    string `json:"want"`
	Got     string `json:"got"`
	Message string `json:"message,omitempty"`
}

func newTestCommand() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:   "test DIR [-o table|wide|json|yaml|name|jsonpath=...]",
		Short: "Run declarative suites of reviews and expected verdicts (for CI)",
		Long: `Run every TestSuite file (kind: TestSuite, *.yaml) under DIR: each names a
GuardConfig, optional objects, and AdmissionReviews with the outcome
(allow, deny, audit, break-glass) and optionally the rule each must get.
Reviews are decided offline by the same handler as 'serve' and 'check'.

Exit codes: 0 every case passed, 1 a case failed, 2 invalid input.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			return runTests(cmd.Context(), args[0], &out, cmd.OutOrStdout())
		},
	}
	out.add(cmd)
	return cmd
}

func runTests(ctx context.Context, dir string, out *outputFlags, w io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	var results []SuiteResult
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".yml") {
			return err
		}
		rs, err := runSuite(ctx, path)
		results = append(results, rs...)
		return err
	})
	if err != nil {
		return err
	}
	if len(results) == 0 {
		return invalid("no %s files under %s", suiteKind, dir)
	}
	table := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("SUITE", false), column("TEST", false), column("RESULT", false), column("WANT", false), column("GOT", false), column("MESSAGE", true),
	}}
	var names []string
	failed := 0
	for _, r := range results {
		result := "pass"
		if !r.Pass {
			result, failed = "FAIL", failed+1
		}
		table.Rows = append(table.Rows, metav1.TableRow{Cells: []any{r.Suite, r.Test, result, r.Want, r.Got, orDash(r.Message)}})
		names = append(names, r.Suite+"/"+r.Test)
	}
	if err := out.print(w, map[string]any{"results": results}, table, names); err != nil {
		return err
	}
	if out.isTable() && !out.noHeaders {
		fmt.Fprintf(w, "\n%d passed, %d failed.\n", len(results)-failed, failed)
	}
	if failed > 0 {
		return &exitError{code: ExitDenied}
	}
	return nil
}

// runSuite runs one suite file; a YAML file of another kind is skipped.
func runSuite(ctx context.Context, path string) ([]SuiteResult, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, invalid("%v", err)
	}
	var head struct {
		Kind string `json:"kind"`
	}
	if yaml.Unmarshal(data, &head) != nil || head.Kind != suiteKind {
		return nil, nil
	}
	var s TestSuite
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return nil, invalid("suite %s: %v", path, err)
	}
	if s.Config == "" || len(s.Tests) == 0 {
		return nil, invalid("suite %s: config and tests are required", path)
	}
	base := filepath.Dir(path)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}
	cfg, _, err := webhook.LoadConfigFile(rel(s.Config))
	if err != nil {
		return nil, invalid("suite %s: %v", path, err)
	}
	scheme, err := webhook.NewScheme()
	if err != nil {
		return nil, err
	}
	objects, err := loadObjects(scheme, rel(s.Objects))
	if err != nil {
		return nil, invalid("suite %s: %v", path, err)
	}
	h, err := webhook.NewHandler(webhook.HandlerOptions{Config: webhook.StaticConfig{Config: cfg}, CA: casource.New(objects, casource.Options{}), Log: logr.Discard()})
	if err != nil {
		return nil, err
	}
	suite := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	var out []SuiteResult
	for i, c := range s.Tests {
		switch c.Outcome {
		case policy.OutcomeAllow, policy.OutcomeDeny, policy.OutcomeAudit, policy.OutcomeBreakGlass:
		default:
			return nil, invalid("suite %s: tests[%d].outcome must be allow, deny, audit or break-glass, got %q", path, i, c.Outcome)
		}
		body, err := readReview(rel(c.Review))
		if err != nil {
			return nil, invalid("suite %s: tests[%d].review: %v", path, i, err)
		}
		v := h.Review(ctx, body)
		if v.Decision == nil {
			return nil, invalid("suite %s: tests[%d].review %s: %s", path, i, c.Review, v.Response.Result.Message)
		}
		want, got := string(c.Outcome), string(v.Decision.Outcome)
		if c.Rule != "" {
			want, got = want+"/"+string(c.Rule), got+"/"+string(v.Decision.Rule)
		}
		r := SuiteResult{Suite: suite, Test: c.Name, Want: want, Got: got, Pass: want == got}
		if !r.Pass {
			r.Message = v.Decision.Message()
		}
		out = append(out, r)
	}
	return out, nil
}
