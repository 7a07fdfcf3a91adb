package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

type checkOptions struct {
	configPath  string
	reviewPath  string
	objectsPath string
	output      string
}

func newCheckCommand() *cobra.Command {
	o := &checkOptions{}
	cmd := &cobra.Command{
		Use:   "check --config guard.yaml --review review.json [--objects objects.yaml] [-o text|json]",
		Short: "Evaluate one AdmissionReview offline against a GuardConfig",
		Long: `Evaluate one AdmissionReview (JSON or YAML) against a GuardConfig, without a
cluster, the way 'serve' would decide it. CA sources resolve against the
Secrets, ConfigMaps and cert-manager objects in --objects.

Exit codes: 0 allowed (audit warnings included), 1 denied, 2 invalid input.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCheck(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&o.configPath, "config", "", "GuardConfig file (required).")
	cmd.Flags().StringVar(&o.reviewPath, "review", "", "AdmissionReview file, JSON or YAML (required).")
	cmd.Flags().StringVar(&o.objectsPath, "objects", "", "YAML stream of Secrets, ConfigMaps, Certificates, Issuers and ClusterIssuers that CA sources resolve against.")
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "Output: text (a summary) or json (the AdmissionReview with its response).")
	return cmd
}

func runCheck(ctx context.Context, o *checkOptions, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.configPath == "" || o.reviewPath == "" {
		return invalid("--config and --review are required")
	}
	if o.output != "text" && o.output != "json" {
		return invalid("--output must be text or json, got %q", o.output)
	}
	cfg, _, err := webhook.LoadConfigFile(o.configPath)
	if err != nil {
		return invalid("%v", err)
	}
	review, err := readReview(o.reviewPath)
	if err != nil {
		return invalid("review %s: %v", o.reviewPath, err)
	}
	scheme, err := webhook.NewScheme()
	if err != nil {
		return err
	}
	objects, err := loadObjects(scheme, o.objectsPath)
	if err != nil {
		return invalid("%v", err)
	}

	in, err := webhook.DecodeInput(review.Request)
	if err != nil {
		return invalid("review %s: %v", o.reviewPath, err)
	}
	resolver := &strictResolver{Resolver: casource.New(objects, casource.Options{})}
	h := &webhook.Handler{Config: webhook.StaticConfig{Config: cfg}, CA: resolver, Metrics: webhook.NewMetrics(prometheus.NewRegistry())}
	d := h.Decide(ctx, in)
	if resolver.invalid != nil {
		return invalid("objects %s: %v", o.objectsPath, resolver.invalid)
	}
	resp := webhook.Response(&d)
	resp.UID = review.Request.UID
	review.Response = &resp.AdmissionResponse
	review.Request = nil

	if o.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(review); err != nil {
			return err
		}
	} else {
		printSummary(out, &d)
	}
	if !d.Allowed() {
		return &exitError{code: ExitDenied}
	}
	return nil
}

// strictResolver turns CA data that exists but is malformed (garbage PEM in
// a Secret of --objects) into invalid input for check, where it is a mistake
// in the user's test files rather than a cluster state to decide on.
type strictResolver struct {
	*casource.Resolver
	invalid error
}

func (s *strictResolver) Resolve(ctx context.Context, req casource.Request, live bool) casource.Result {
	res := s.Resolver.Resolve(ctx, req, live)
	var se *casource.SourceError
	if errors.As(res.Err, &se) && se.InvalidData {
		s.invalid = res.Err
	}
	return res
}

func readReview(path string) (*admissionv1.AdmissionReview, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	jsonData, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("neither JSON nor YAML: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := admissionv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	obj, gvk, err := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer().Decode(jsonData, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("not an admission.k8s.io/v1 AdmissionReview: %w", err)
	}
	review, ok := obj.(*admissionv1.AdmissionReview)
	if !ok {
		return nil, fmt.Errorf("is a %s, not an admission.k8s.io/v1 AdmissionReview", gvk.Kind)
	}
	if review.Request == nil {
		return nil, errors.New("request is missing")
	}
	return review, nil
}

func printSummary(out io.Writer, d *policy.Decision) {
	mode := ""
	if d.Mode != "" {
		mode = " (" + string(d.Mode) + ")"
	}
	fmt.Fprintf(out, "decision: %s%s\n", d.Outcome, mode)
	fmt.Fprintf(out, "request:  %s %s %q by %q", d.Operation, d.Kind, d.Name, d.Subject)
	if d.DryRun {
		fmt.Fprint(out, " (dry run)")
	}
	fmt.Fprintln(out)
	mapping := d.Mapping
	if mapping == "" {
		mapping = "(none: unmanaged)"
	}
	fmt.Fprintf(out, "mapping:  %s\n", mapping)
	fmt.Fprintf(out, "rule:     %s\n", d.Rule)
	if len(d.Violations) > 0 {
		fmt.Fprintln(out, "violations:")
		for _, v := range d.Violations {
			fmt.Fprintf(out, "  - %s\n", v.String())
		}
	}
	if w := d.Warnings(); len(w) > 0 {
		fmt.Fprintf(out, "warnings:\n  - %s\n", strings.Join(w, "\n  - "))
	}
	fmt.Fprintf(out, "recorded: %t\n", d.Record)
}
