// Package scan is `webhook-guard scan`: the live cluster's webhook health
// and, given a GuardConfig, its owner mappings.
package scan

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/internal/scan"
	"github.com/webhook-guard/webhook-guard/policy"
)

// Options are scan's flags.
type Options struct {
	Kube            *cmdutil.KubeFlags
	Source          cmdutil.ConfigSource
	ExpiryThreshold time.Duration
	DialTimeout     time.Duration
	PolicyAnchor    string
	Output          cmdutil.OutputFlags

	// Client reads the cluster; Complete builds it from Kube.
	Client client.Client
	// Config is the GuardConfig, nil for the health checks only; Complete
	// loads it from Source.
	Config *policy.Mappings
	// Now is the time certificates are checked at.
	Now time.Time
}

// NewCommand is `webhook-guard scan`.
func NewCommand() *cobra.Command {
	o := &Options{Kube: cmdutil.NewKubeFlags()}
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

Exit codes: 0 nothing to fix (info findings only), 1 a warn or fail finding,
2 invalid input or the cluster could not be read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Now = time.Now()
			if err := o.Validate(); err != nil {
				return err
			}
			if err := o.Complete(cmd.Context()); err != nil {
				return err
			}
			return o.Run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	o.Kube.AddFlags(cmd.Flags())
	o.Source.AddFlags(cmd, "; without a GuardConfig only the health checks run")
	cmd.Flags().DurationVar(&o.ExpiryThreshold, "expiry-threshold", 30*24*time.Hour, "Warn when the owner's CA or a serving certificate expires within this duration.")
	cmd.Flags().DurationVar(&o.DialTimeout, "dial-timeout", 2*time.Second, "Timeout of one TLS dial to a webhook to read its serving certificate.")
	cmd.Flags().StringVar(&o.PolicyAnchor, "policy-anchor", "", "Policy shape: the anchor ClusterRole (the chart's <release>-webhook-guard-policy-anchor); a fail finding when it is missing.")
	o.Output.AddFlags(cmd)
	return cmd
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

// Complete loads the GuardConfig, if one is named, and builds the client.
func (o *Options) Complete(ctx context.Context) error {
	cfg, err := o.Source.Load(ctx, o.Kube)
	if err != nil {
		return err
	}
	o.Config = cfg
	return o.Kube.CompleteClient(&o.Client)
}

// Run scans and prints the findings; a warn or fail finding exits 1.
func (o *Options) Run(ctx context.Context, out io.Writer) error {
	res, err := scan.Run(ctx, o.Client, o.Config, scan.Options{
		Now: o.Now, ExpiryThreshold: o.ExpiryThreshold, DialTimeout: o.DialTimeout, PolicyAnchor: o.PolicyAnchor,
	})
	if err != nil {
		return &cmdutil.ExitError{Code: cmdutil.ExitInvalid, Err: err}
	}
	if err := printScan(out, &o.Output, res); err != nil {
		return err
	}
	if res.Problems > 0 {
		return cmdutil.Denied()
	}
	return nil
}
