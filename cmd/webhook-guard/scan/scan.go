// Package scan is `webhook-guard scan`: the live cluster's webhook health
// and, given a GuardConfig, its owner mappings.
package scan

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/scan"
	"github.com/webhook-guard/webhook-guard/policy"
)

// Options are scan's flags.
type Options struct {
	genericiooptions.IOStreams

	Kube            *cmdutil.KubeFlags
	Source          cmdutil.ConfigSource
	ExpiryThreshold time.Duration
	DialTimeout     time.Duration
	PolicyAnchor    string
	Output          cmdutil.OutputFlags

	// Client reads the cluster; Run builds it from Kube unless a test gave
	// one.
	Client client.Client
	// Config is the GuardConfig, nil for the health checks only; Run
	// loads it from Source unless a test gave one.
	Config *policy.Mappings
	// Now is the time certificates are checked at; Complete sets it unless
	// a test did.
	Now time.Time
}

// NewCmdScan is `webhook-guard scan`.
func NewCmdScan(ctx context.Context, streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{IOStreams: streams, Kube: cmdutil.NewKubeFlags()}
	cmd := &cobra.Command{
		Use:   "scan [--config guard.yaml] [--expiry-threshold 720h] [-o table|wide|json|yaml|name|jsonpath=TEMPLATE]",
		Short: "Check the live cluster's webhooks' health and, with --config, the owner mappings",
		Long: `Check the health of every webhook in the cluster: a Service with no ready
endpoints behind failurePolicy Fail, a serving certificate (read from the
Secret the workload behind the Service mounts) that does not verify against
the caBundle or expires within --expiry-threshold, failurePolicy Fail on
rules that catch kube-system, kube-node-lease or the webhook's own namespace,
timeoutSeconds above 10, sideEffects Unknown or Some, and a caBundle written
by more than one field manager. Each finding names the field and the fix.

With --config, also compare every webhook configuration with the owner mappings:
each guarded configuration's caBundle against the owner's CA, the owner's CA
and the webhook's serving certificate expiry, the field managers of caBundle
(more than one is a second CA writer), configurations no mapping covers, and
mappings that name configurations that do not exist.

The serving certificate is read by dialing clientConfig.url or the service
(<name>.<namespace>.svc:<port>) with --dial-timeout; when it cannot be
reached (for instance from outside the cluster) its expiry is reported as
unknown.

Where the guard runs with its prober (serve --probe-interval), scan also
reads the guard's last trust-path round (ClusterReport
webhook-guard.trust-paths): each guarded entry whose caBundle did not
verify what its endpoint served, dialed from inside the cluster as
kube-apiserver calls it, is a trust-path finding (fail, or warn for
failurePolicy Ignore), with the reason and the fix.

Exit codes: 0 nothing to fix (info findings only), 1 a warn or fail finding,
2 invalid input or the cluster could not be read.`,
		Example: `  # The health of every webhook in the current kubeconfig context's cluster
  webhook-guard scan

  # And the owner mappings of the guard's GuardConfig, certificates within 14 days
  webhook-guard scan --from-cluster --expiry-threshold 336h -o wide`,
		Args: cobra.NoArgs,
		RunE: cmdutil.Runner(ctx, o),
	}
	o.Kube.AddFlags(cmd.Flags())
	o.Source.AddFlags(cmd, "; without a GuardConfig only the health checks run")
	cmd.Flags().DurationVar(&o.ExpiryThreshold, "expiry-threshold", 30*24*time.Hour, "Warn when the owner's CA or a serving certificate expires within this duration.")
	cmd.Flags().DurationVar(&o.DialTimeout, "dial-timeout", 2*time.Second, "Timeout of one TLS dial to a webhook to read its serving certificate.")
	cmd.Flags().StringVar(&o.PolicyAnchor, "policy-anchor", "", "Policy shape: the anchor ClusterRole (the chart's <release>-webhook-guard-policy-anchor); a fail finding when it is missing.")
	o.Output.AddFlags(cmd)
	return cmd
}

// Complete takes the time certificates are checked at.
func (o *Options) Complete(_ []string) error {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	return nil
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if err := o.Output.Validate(); err != nil {
		return err
	}
	if o.ExpiryThreshold <= 0 || o.DialTimeout <= 0 {
		return cmdutil.Invalid("--expiry-threshold and --dial-timeout must be > 0")
	}
	return nil
}

// connect loads the GuardConfig, if one is named, and builds the client,
// unless a test gave them.
func (o *Options) connect(ctx context.Context) error {
	if o.Config == nil {
		cfg, err := o.Source.Load(ctx, o.Kube)
		if err != nil {
			return err
		}
		o.Config = cfg
	}
	return o.Kube.CompleteClient(&o.Client)
}

// Run connects, scans and prints the findings; a warn or fail finding
// exits 1.
func (o *Options) Run(ctx context.Context) error {
	if err := o.connect(ctx); err != nil {
		return err
	}
	res, err := scan.Run(ctx, o.Client, o.Config, scan.Options{
		Now: o.Now, ExpiryThreshold: o.ExpiryThreshold, DialTimeout: o.DialTimeout, PolicyAnchor: o.PolicyAnchor,
	})
	if err != nil {
		return &cmdutil.ExitError{Code: cmdutil.ExitInvalid, Err: err}
	}
	if err := printScan(o.Out, &o.Output, res); err != nil {
		return err
	}
	if res.Problems > 0 {
		return cmdutil.Denied()
	}
	return nil
}
