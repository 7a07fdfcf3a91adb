// Package discover is `webhook-guard discover`: owner mappings proposed
// from the live cluster, read-only.
package discover

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/discover"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Options are discover's flags.
type Options struct {
	genericiooptions.IOStreams

	Kube *cmdutil.KubeFlags
	// Format is values or config.
	Format string
	// CAInjector is cainjector's service account, namespace/name; empty
	// is cert-manager's default.
	CAInjector string

	// Client reads the cluster; Run builds it from Kube unless a test
	// gave one.
	Client client.Client
}

// NewCmdDiscover is `webhook-guard discover`.
func NewCmdDiscover(ctx context.Context, streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{IOStreams: streams, Kube: cmdutil.NewKubeFlags()}
	cmd := &cobra.Command{
		Use:   "discover [--format values|config]",
		Short: "Propose owner mappings from the live cluster (read-only)",
		Long: `Read the cluster's webhook configurations and what surrounds them, and
propose owner mappings in audit mode, one per owning controller:

  writer:    clientConfig.service -> the Service's selector -> the Deployment,
             StatefulSet or DaemonSet it selects -> its serviceAccountName;
  CA source: a cert-manager.io/inject-ca-from(-secret) annotation
             (injectedByCertManager), otherwise the Secret or ConfigMap key
             holding every certificate of the current caBundle, preferring one
             the workload mounts; a cert-manager Certificate's Secret becomes a
             certificate source.

Every mapping carries its evidence as comments; configurations it could not
decide are listed in comments with the reason and are left unmapped. The
output is Helm values (--format values: config.defaultMode and config.owners,
for helm install -f) or a GuardConfig file (--format config).

It only lists: webhook configurations, namespaces, services, endpointslices,
deployments, statefulsets, daemonsets, secrets, configmaps and cert-manager
certificates (the chart renders this ClusterRole with discoverRBAC.create).

Exit codes: 0 a proposal was printed (undecided configurations included),
2 invalid flags or the cluster could not be read.`,
		Example: `  # Propose Helm values for the current kubeconfig context's cluster
  webhook-guard discover > values-owners.yaml

  # A GuardConfig file instead, for serve --config or check
  webhook-guard discover --format config --context prod > guard.yaml`,
		Args: cobra.NoArgs,
		RunE: cmdutil.Runner(ctx, o),
	}
	o.Kube.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.Format, "format", string(discover.FormatValues), "Proposal format: values (Helm values, config.owners) or config (a GuardConfig file).")
	cmd.Flags().StringVar(&o.CAInjector, "cainjector-service-account", "", "cert-manager cainjector's service account, namespace/name (default "+guardapi.DefaultCAInjectorServiceAccount+"); written to certManager.caInjectorServiceAccount when it differs.")
	return cmd
}

// Complete defaults cainjector's service account.
func (o *Options) Complete(_ []string) error {
	if o.CAInjector == "" {
		o.CAInjector = guardapi.DefaultCAInjectorServiceAccount
	}
	return nil
}

// Validate checks --format and --cainjector-service-account.
func (o *Options) Validate() error {
	if o.Format != string(discover.FormatValues) && o.Format != string(discover.FormatConfig) {
		return cmdutil.Invalid("--format must be values or config, got %q", o.Format)
	}
	if o.CAInjector != "" {
		if err := validServiceAccount(o.CAInjector); err != nil {
			return cmdutil.Invalid("--cainjector-service-account: %v", err)
		}
	}
	return nil
}

func validServiceAccount(sa string) error {
	ns, name, ok := strings.Cut(sa, "/")
	if !ok {
		return fmt.Errorf("want namespace/name, got %q", sa)
	}
	for _, msg := range append(validation.IsDNS1123Label(ns), validation.IsDNS1123Subdomain(name)...) {
		return fmt.Errorf("%q: %s", sa, msg)
	}
	return nil
}

// Run builds the client, gathers the evidence and prints the proposal.
func (o *Options) Run(ctx context.Context) error {
	if err := o.Kube.CompleteClient(&o.Client); err != nil {
		return err
	}
	configs, cluster, err := discover.Gather(ctx, o.Client, o.CAInjector)
	if err != nil {
		return &cmdutil.ExitError{Code: cmdutil.ExitInvalid, Err: err}
	}
	b, err := discover.Render(discover.Propose(configs, cluster), discover.Format(o.Format), o.CAInjector)
	if err != nil {
		return err
	}
	_, err = o.Out.Write(b)
	return err
}
