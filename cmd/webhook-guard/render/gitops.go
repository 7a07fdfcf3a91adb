package render

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/policy/gitops"
)

// GitOpsOptions are the flags of render gitops.
type GitOpsOptions struct {
	genericiooptions.IOStreams

	Source cmdutil.ConfigSource
	Kube   *cmdutil.KubeFlags
	// Tool is argocd or flux.
	Tool string
	// Patch is the Application or Kustomization ("namespace/name") to
	// write a merge patch for; empty: the fields to paste.
	Patch string
	// WebhookEntries is how many entries per configuration Flux's rules
	// cover.
	WebhookEntries int
}

// NewCmdGitOps is `render gitops`.
func NewCmdGitOps(ctx context.Context, streams genericiooptions.IOStreams) *cobra.Command {
	o := &GitOpsOptions{IOStreams: streams, Kube: cmdutil.NewKubeFlags()}
	cmd := &cobra.Command{
		Use:   "gitops --tool argocd|flux --config guard.yaml|--values values.yaml|--from-cluster [--patch namespace/name]",
		Short: "Render the GitOps ignore rules for the caBundles another writer injects",
		Long: `Argo CD and Flux compare what they applied with the cluster and write
their own value back. A caBundle that cert-manager's cainjector or the
owner's own controller writes at run time is then reverted on every sync and
rewritten by its writer; the guard denies the GitOps tool's write of a
caBundle that is not the owner's CA, so the fight shows up as failed syncs.

This renders, from the GuardConfig, the rules that leave exactly those
fields to their writer: the caBundle of every webhook entry of each
configuration whose mapping's CA source is written at run time (every kind
but pem, whose CA Git can carry). cainjector writes only the caBundles, so
no annotation needs a rule.

--tool argocd prints ignoreDifferences entries for the Application's spec
(add the sync option RespectIgnoreDifferences=true, or a sync still writes
Git's value); --tool flux prints ignore rules for the Kustomization's spec
(kustomize-controller's spec.ignore). With --patch namespace/name it prints
the whole object as a merge patch. See docs/gitops.md.`,
		Example: `  # Argo CD's ignoreDifferences for the caBundles cainjector writes
  webhook-guard render gitops --tool argocd --values values.yaml

  # A merge patch of a Flux Kustomization, from the installed GuardConfig
  webhook-guard render gitops --tool flux --from-cluster --patch flux-system/infra`,
		Args: cobra.NoArgs,
		RunE: cmdutil.Runner(ctx, o),
	}
	f := cmd.Flags()
	o.Kube.AddFlags(f)
	o.Source.AddFlags(cmd, " (this, --values or --from-cluster is required)")
	f.StringVar(&o.Tool, "tool", "", "The GitOps tool: argocd or flux. Required.")
	f.StringVar(&o.Patch, "patch", "", "Print a merge patch of this Application or Kustomization (namespace/name) instead of the fields to paste under its spec.")
	f.IntVar(&o.WebhookEntries, "webhook-entries", gitops.DefaultWebhookEntries, "Flux: how many webhook entries per configuration the rules cover (JSON Pointers name one index each; extra ones are harmless).")
	return cmd
}

// Complete has nothing to derive: Run loads the GuardConfig the flags name.
func (o *GitOpsOptions) Complete(_ []string) error { return nil }

// Validate checks the flags; errors name the flag.
func (o *GitOpsOptions) Validate() error {
	tools := make([]string, 0, len(gitops.Tools()))
	known := false
	for _, t := range gitops.Tools() {
		tools = append(tools, string(t))
		known = known || string(t) == o.Tool
	}
	if !known {
		return fmt.Errorf("--tool must be %s, got %q", strings.Join(tools, " or "), o.Tool)
	}
	if o.WebhookEntries < 1 {
		return fmt.Errorf("--webhook-entries must be at least 1, got %d", o.WebhookEntries)
	}
	if o.Patch != "" {
		if ns, name, ok := strings.Cut(o.Patch, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("--patch must be \"namespace/name\", got %q", o.Patch)
		}
	}
	return nil
}

// Run loads the GuardConfig and prints the rules; what a tool's rules
// cannot cover is a warning on ErrOut.
func (o *GitOpsOptions) Run(ctx context.Context) error {
	out := o.Out
	cfg, err := o.Source.Load(ctx, o.Kube)
	if err != nil {
		return err
	}
	if cfg == nil {
		return cmdutil.Invalid("--config, --values or --from-cluster is required")
	}
	res, err := gitops.Generate(gitops.Input{
		Config:         &cfg.Spec,
		Tool:           gitops.Tool(o.Tool),
		WebhookEntries: o.WebhookEntries,
		Patch:          o.Patch,
	})
	if err != nil {
		return cmdutil.Invalid("%v", err)
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(o.ErrOut, "warning: %s\n", w)
	}
	fmt.Fprintf(out, "# webhook-guard gitops rules for %s, generated from %s\n", o.Tool, o.Source.Name())
	_, err = out.Write(res.YAML)
	return err
}
