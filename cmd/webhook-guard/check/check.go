// Package check is `webhook-guard check`: one AdmissionReview decided
// offline by the server's own handler.
package check

import (
	"context"

	"github.com/spf13/cobra"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/offline"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Options are check's flags.
type Options struct {
	genericiooptions.IOStreams

	Source      cmdutil.ConfigSource
	ReviewPath  string
	ObjectsPath string
	// ServedChains are --served-chain's [ENTRY=]FILE values.
	ServedChains []string
	// Output is table (a summary), json or yaml.
	Output string
	// GuardServiceAccount is serve's --policy-guard-service-account.
	GuardServiceAccount string

	// admissionPolicyWriter is GuardServiceAccount's username.
	admissionPolicyWriter string
}

// NewCmdCheck is `webhook-guard check`.
func NewCmdCheck(ctx context.Context, streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "check --config guard.yaml|--values values.yaml --review review.json [--objects objects.yaml] [--served-chain [ENTRY=]chain.pem]... [-o table|json|yaml]",
		Short: "Evaluate one AdmissionReview offline against a GuardConfig",
		Long: `Evaluate one AdmissionReview (JSON or YAML) against a GuardConfig, without a
cluster, through the same decoder and decision as 'serve'. CA sources
resolve against the Secrets, ConfigMaps and cert-manager objects in
--objects; one that cannot be read (missing, or holding garbage) is decided
as the server decides it: caBundle changes are denied (ca-unavailable).

--served-chain decides the write as the server does after a probe round
that found the entry's endpoint serving the chain in the file (PEM, leaf
first): a caBundle the write sets that does not verify it gets the
server's warning, or with the mapping's verifyServing: deny is refused
(serving-unverified). ENTRY= names one entry of the reviewed object (for a
CRD "conversion", for an APIService "service"); without it the chain is
every entry's. The chain is verified for the name kube-apiserver uses (the
entry's URL host, or <service>.<namespace>.svc), at the current time.

Exit codes: 0 allowed (audit warnings included), 1 denied, 2 invalid input
(a malformed review, config or objects file; -o json still prints the
server's 400 answer).`,
		Example: `  # Decide a sample review against a sample GuardConfig, its CAs from objects.yaml
  webhook-guard check --config config/samples/guard-koordinator.yaml \
    --objects config/samples/objects.yaml --review config/samples/reviews/owner.json

  # Would this write break kube-apiserver's calls? Check it against the chain
  # the endpoint serves (openssl s_client -showcerts, or the Secret's tls.crt)
  webhook-guard check --config guard.yaml --objects objects.yaml --review review.json \
    --served-chain vpod.koordinator.sh=served.pem

  # Print the AdmissionReview with the server's answer
  webhook-guard check --values values.yaml --review review.json -o yaml`,
		Args: cobra.NoArgs,
		RunE: cmdutil.Runner(ctx, o),
	}
	o.Source.AddFileFlags(cmd, " (this or --values is required)")
	cmd.Flags().StringVar(&o.ReviewPath, "review", "", "AdmissionReview file, JSON or YAML (required).")
	cmd.Flags().StringVar(&o.ObjectsPath, "objects", "", "YAML stream of Secrets, ConfigMaps, Certificates, Issuers and ClusterIssuers that CA sources resolve against.")
	cmd.Flags().StringArrayVar(&o.ServedChains, "served-chain", nil, "[ENTRY=]FILE: the PEM chain (leaf first) the reviewed object's entry serves (every entry's without ENTRY=), as a probe would find it; repeatable.")
	cmd.Flags().StringVarP(&o.Output, "output", "o", cmdutil.OutputTable, "Output: table (a summary), json or yaml (the AdmissionReview with its response), the vocabulary of scan and review.")
	cmd.Flags().StringVar(&o.GuardServiceAccount, "policy-guard-service-account", "", "As serve's flag: the guard's own service account (namespace/name), the one writer besides break-glass of the policy shape's generated objects.")
	return cmd
}

// Complete derives the guard's username from its service account; Run
// reports a malformed one after the GuardConfig and the files load, so
// that a broken input file is named first.
func (o *Options) Complete(_ []string) error {
	if _, _, ok := guardapi.SplitServiceAccount(o.GuardServiceAccount); ok {
		o.admissionPolicyWriter = guardapi.ServiceAccountUsername(o.GuardServiceAccount)
	}
	return nil
}

// Validate checks the flags that need no file read.
func (o *Options) Validate() error {
	if o.ReviewPath == "" {
		return cmdutil.Invalid("--review is required")
	}
	return cmdutil.ValidateStructured(o.Output)
}

// Run decides the review and prints the summary or the answer; a denial
// exits 1, a review the server rejects before deciding exits 2.
func (o *Options) Run(ctx context.Context) error {
	out := o.Out
	cfg, err := o.Source.LoadRequired(ctx)
	if err != nil {
		return err
	}
	body, err := offline.ReadReview(o.ReviewPath)
	if err != nil {
		return cmdutil.Invalid("review %s: %v", o.ReviewPath, err)
	}
	objects, err := cmdutil.LoadObjects(o.ObjectsPath)
	if err != nil {
		return err
	}
	if sa := o.GuardServiceAccount; sa != "" && o.admissionPolicyWriter == "" {
		return cmdutil.Invalid("--policy-guard-service-account must be \"namespace/name\", got %q", sa)
	}
	served, err := readServedChains(o.ServedChains)
	if err != nil {
		return err
	}
	h, err := offline.NewHandler(cfg, objects, o.admissionPolicyWriter, served.servingCheck())
	if err != nil {
		return err
	}
	v := h.Review(ctx, body)
	if err := served.check(v); err != nil {
		return err
	}

	if o.Output != cmdutil.OutputTable {
		if err := cmdutil.PrintStructured(out, o.Output, reviewAnswer{APIVersion: v.APIVersion, Kind: "AdmissionReview", Response: v.Response}); err != nil {
			return err
		}
	} else if v.Decision != nil {
		printSummary(out, v.Decision)
	}
	switch {
	case v.Decision == nil:
		// Rejected before a decision: the review is malformed.
		return cmdutil.Invalid("review %s: %s", o.ReviewPath, v.Response.Result.Message)
	case !v.Decision.Allowed():
		return cmdutil.Denied()
	}
	return nil
}

// reviewAnswer is the AdmissionReview check prints, as the server answers.
type reviewAnswer struct {
	APIVersion string                         `json:"apiVersion"`
	Kind       string                         `json:"kind"`
	Response   *admissionv1.AdmissionResponse `json:"response"`
}
