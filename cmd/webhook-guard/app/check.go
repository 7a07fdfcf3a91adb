package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	admissionv1 "k8s.io/api/admission/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

type checkOptions struct {
	source      configSource
	reviewPath  string
	objectsPath string
	output      string
	// guardServiceAccount is serve's --policy-guard-service-account.
	guardServiceAccount string
}

func newCheckCommand() *cobra.Command {
	o := &checkOptions{}
	cmd := &cobra.Command{
		Use:   "check --config guard.yaml|--values values.yaml --review review.json [--objects objects.yaml] [-o table|json|yaml]",
		Short: "Evaluate one AdmissionReview offline against a GuardConfig",
		Long: `Evaluate one AdmissionReview (JSON or YAML) against a GuardConfig, without a
cluster, through the same decoder and decision as 'serve'. CA sources
resolve against the Secrets, ConfigMaps and cert-manager objects in
--objects; one that cannot be read (missing, or holding garbage) is decided
as the server decides it: caBundle changes are denied (ca-unavailable).

Exit codes: 0 allowed (audit warnings included), 1 denied, 2 invalid input
(a malformed review, config or objects file; -o json still prints the
server's 400 answer).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCheck(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	o.source.addFiles(cmd, " (this or --values is required)")
	cmd.Flags().StringVar(&o.reviewPath, "review", "", "AdmissionReview file, JSON or YAML (required).")
	cmd.Flags().StringVar(&o.objectsPath, "objects", "", "YAML stream of Secrets, ConfigMaps, Certificates, Issuers and ClusterIssuers that CA sources resolve against.")
	cmd.Flags().StringVarP(&o.output, "output", "o", "table", "Output: table (a summary), json or yaml (the AdmissionReview with its response), the vocabulary of scan and review. text is the old name of table.")
	cmd.Flags().StringVar(&o.guardServiceAccount, "policy-guard-service-account", "", "As serve's flag: the guard's own service account (namespace/name), the one writer besides break-glass of policy mode's generated objects.")
	return cmd
}

func runCheck(ctx context.Context, o *checkOptions, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.reviewPath == "" {
		return invalid("--review is required")
	}
	if o.output == "text" {
		// The old name, kept so that scripts written for it keep working.
		o.output = "table"
	}
	if err := validOutput(o.output); err != nil {
		return err
	}
	cfg, err := o.source.loadRequired(ctx)
	if err != nil {
		return err
	}
	body, err := readReview(o.reviewPath)
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

	// The server's own handler and decoder. A CA source in --objects that
	// holds garbage is cluster state, decided (ca-unavailable) as the
	// server decides it; garbage in the GuardConfig failed to load above.
	var admissionPolicyWriter string
	if sa := o.guardServiceAccount; sa != "" {
		if _, _, ok := guardapi.SplitServiceAccount(sa); !ok {
			return invalid("--policy-guard-service-account must be \"namespace/name\", got %q", sa)
		}
		admissionPolicyWriter = guardapi.ServiceAccountUsername(sa)
	}
	h, err := webhook.NewHandler(webhook.HandlerOptions{
		Config:                webhook.StaticConfig{Config: cfg},
		CA:                    casource.New(objects, casource.Options{}),
		AdmissionPolicyWriter: admissionPolicyWriter,
		Log:                   logr.Discard(),
	})
	if err != nil {
		return err
	}
	v := h.Review(ctx, body)

	if o.output != "table" {
		if err := printStructured(out, o.output, reviewAnswer{APIVersion: v.APIVersion, Kind: "AdmissionReview", Response: v.Response}); err != nil {
			return err
		}
	} else if v.Decision != nil {
		printSummary(out, v.Decision)
	}
	switch {
	case v.Decision == nil:
		// Rejected before a decision: the review is malformed.
		return invalid("review %s: %s", o.reviewPath, v.Response.Result.Message)
	case !v.Decision.Allowed():
		return &exitError{code: ExitDenied}
	}
	return nil
}

// reviewAnswer is the AdmissionReview check prints, as the server answers.
type reviewAnswer struct {
	APIVersion string                         `json:"apiVersion"`
	Kind       string                         `json:"kind"`
	Response   *admissionv1.AdmissionResponse `json:"response"`
}

// readReview reads a review file as the JSON body the server would be sent.
// JSON (and an empty file) is passed on byte for byte, so that the decoder
// sees exactly what the server would: duplicate members and invalid UTF-8
// are its to reject. YAML is converted to JSON first, rejecting duplicate
// keys; what is neither a JSON nor a YAML object is passed on for the
// decoder to reject as the server would.
func readReview(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 || utilyaml.IsJSONBuffer(data) {
		return data, nil
	}
	jsonData, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("not JSON, and not valid YAML: %w", err)
	}
	if !utilyaml.IsJSONBuffer(jsonData) {
		return data, nil
	}
	return jsonData, nil
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
	switch {
	case mapping != "":
	case d.Kind == policy.KindAdmissionPolicy || d.Kind == policy.KindAdmissionPolicyBinding:
		mapping = "(none: an object policy mode generates)"
	default:
		mapping = "(none: unmanaged)"
	}
	fmt.Fprintf(out, "mapping:  %s\n", mapping)
	fmt.Fprintf(out, "rule:     %s (%s)\n", d.Rule, d.Rule.Info().Summary)
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
