package app

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/discovery"
)

// Proposal formats of `discover`.
const (
	formatValues = "values"
	formatConfig = "config"
)

type discoverOptions struct {
	kube       kubeFlags
	format     string
	caInjector string
}

func newDiscoverCommand() *cobra.Command {
	o := &discoverOptions{}
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
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.format != formatValues && o.format != formatConfig {
				return invalid("--format must be values or config, got %q", o.format)
			}
			if o.caInjector != "" {
				if err := validServiceAccount(o.caInjector); err != nil {
					return invalid("--cainjector-service-account: %v", err)
				}
			}
			c, err := o.kube.client()
			if err != nil {
				return invalid("%v", err)
			}
			return runDiscover(cmd.Context(), c, o, cmd.OutOrStdout())
		},
	}
	o.kube.add(cmd)
	cmd.Flags().StringVar(&o.format, "format", formatValues, "Proposal format: values (Helm values, config.owners) or config (a GuardConfig file).")
	cmd.Flags().StringVar(&o.caInjector, "cainjector-service-account", "", "cert-manager cainjector's service account, namespace/name (default "+guardapi.DefaultCAInjectorServiceAccount+"); written to certManager.caInjectorServiceAccount when it differs.")
	return cmd
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

func runDiscover(ctx context.Context, c client.Reader, o *discoverOptions, out io.Writer) error {
	caInjector := o.caInjector
	if caInjector == "" {
		caInjector = guardapi.DefaultCAInjectorServiceAccount
	}
	configs, cluster, err := gatherEvidence(ctx, c, caInjector)
	if err != nil {
		return &exitError{code: ExitInvalid, err: err}
	}
	p := discovery.Propose(configs, cluster)
	b, err := renderProposal(p, o.format, caInjector)
	if err != nil {
		return err
	}
	_, err = out.Write(b)
	return err
}
