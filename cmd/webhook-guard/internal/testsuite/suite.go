// Package testsuite runs the declarative suites of `webhook-guard test`:
// files of reviews and the verdict each must get, decided offline by the
// server's own handler.
package testsuite

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/offline"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/webhook"
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
	Objects string `json:"objects,omitempty"`
	Tests   []Case `json:"tests"`
}

// Case is one review and its expected verdict.
type Case struct {
	Name string `json:"name"`
	// Review is an AdmissionReview file, JSON or YAML.
	Review string `json:"review"`
	// Outcome is allow, deny, audit or break-glass.
	Outcome policy.Outcome `json:"outcome"`
	// Rule, when set, is the rule the decision must name (not-owner,
	// ca-mismatch, ...).
	Rule policy.Rule `json:"rule,omitempty"`
}

// Kind is the kind of suite files; other YAML files in a directory are
// skipped.
const Kind = "TestSuite"

// Result is one case's result, as -o json|yaml prints it.
type Result struct {
	Suite   string `json:"suite"`
	Test    string `json:"test"`
	Pass    bool   `json:"pass"`
	Want    string `json:"want"`
	Got     string `json:"got"`
	Message string `json:"message,omitempty"`
}

// RunDir runs every suite file (*.yaml, *.yml of kind TestSuite) under dir.
// An error is invalid input: a suite that does not load, or none at all.
func RunDir(ctx context.Context, dir string) ([]Result, error) {
	var results []Result
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".yml") {
			return err
		}
		rs, err := RunFile(ctx, path)
		results = append(results, rs...)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(results) == 0 {
		return nil, fmt.Errorf("no %s files under %s", Kind, dir)
	}
	return results, nil
}

// RunFile runs one suite file; a YAML file of another kind is skipped.
func RunFile(ctx context.Context, path string) ([]Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var head struct {
		Kind string `json:"kind"`
	}
	if yaml.Unmarshal(data, &head) != nil || head.Kind != Kind {
		return nil, nil //nolint:nilerr // not a test suite: the caller reads it as a review
	}
	var s TestSuite
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return nil, fmt.Errorf("suite %s: %w", path, err)
	}
	if s.Config == "" || len(s.Tests) == 0 {
		return nil, fmt.Errorf("suite %s: config and tests are required", path)
	}
	base := filepath.Dir(path)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}
	h, err := suiteHandler(rel(s.Config), rel(s.Objects))
	if err != nil {
		return nil, fmt.Errorf("suite %s: %w", path, err)
	}
	suite := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	out := make([]Result, 0, len(s.Tests))
	for i, c := range s.Tests {
		r, err := runCase(ctx, h, c, rel(c.Review))
		if err != nil {
			return nil, fmt.Errorf("suite %s: tests[%d]%w", path, i, err)
		}
		r.Suite = suite
		out = append(out, r)
	}
	return out, nil
}

func suiteHandler(configPath, objectsPath string) (*webhook.Handler, error) {
	cfg, _, err := webhook.LoadConfigFile(configPath)
	if err != nil {
		return nil, err
	}
	scheme, err := webhook.NewScheme()
	if err != nil {
		return nil, err
	}
	objects, err := offline.LoadObjects(scheme, objectsPath)
	if err != nil {
		return nil, err
	}
	return offline.NewHandler(cfg, objects, "", nil)
}

// runCase decides one case; its errors continue "tests[i]".
func runCase(ctx context.Context, h *webhook.Handler, c Case, reviewPath string) (Result, error) {
	switch c.Outcome {
	case policy.OutcomeAllow, policy.OutcomeDeny, policy.OutcomeAudit, policy.OutcomeBreakGlass:
	default:
		return Result{}, fmt.Errorf(".outcome must be allow, deny, audit or break-glass, got %q", c.Outcome)
	}
	body, err := offline.ReadReview(reviewPath)
	if err != nil {
		return Result{}, fmt.Errorf(".review: %w", err)
	}
	v := h.Review(ctx, body)
	if v.Decision == nil {
		return Result{}, fmt.Errorf(".review %s: %s", c.Review, v.Response.Result.Message)
	}
	want, got := string(c.Outcome), string(v.Decision.Outcome)
	if c.Rule != "" {
		want, got = want+"/"+string(c.Rule), got+"/"+string(v.Decision.Rule)
	}
	r := Result{Test: c.Name, Want: want, Got: got, Pass: want == got}
	if !r.Pass {
		r.Message = v.Decision.Message()
	}
	return r, nil
}
