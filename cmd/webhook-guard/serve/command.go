// Package serve is `webhook-guard serve`: the guard itself, the
// controller-runtime manager that runs webhook/'s pieces as one process.
package serve

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
	"github.com/webhook-guard/webhook-guard/webhook/policysync"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// NewCmdServe is `webhook-guard serve`; version goes into the client's
// user agent.
func NewCmdServe(ctx context.Context, streams genericiooptions.IOStreams, version string) *cobra.Command {
	o := NewOptions()
	o.IOStreams, o.version = streams, version
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the admission webhook server",
		Long: `Serve admission reviews for webhook configurations over TLS.

The certificate directory is a mounted cert-manager Secret (tls.crt, tls.key)
and is reloaded on change; the config file is reloaded on change, and a bad
new file is rejected while the last good one stays in force.

Without --kubeconfig (or KUBECONFIG, or ~/.kube/config) it uses the pod's
in-cluster configuration.`,
		Example: `  # On loopback, as the static shape's DaemonSet runs it on a control-plane node
  webhook-guard serve --config /etc/webhook-guard/guard.yaml \
    --cert-dir /var/run/webhook-guard/tls --bind-address 127.0.0.1

  # The policy shape: keep the generated policies, serve no admission endpoint
  webhook-guard serve --config guard.yaml --policy-mode --leader-elect`,
		Args: cobra.NoArgs,
		RunE: cmdutil.Runner(ctx, o),
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags adds the flags in named sections, each documented, and prints
// them by section in the usage.
func (o *Options) AddFlags(cmd *cobra.Command) {
	o.flags = cmd.Flags()
	var fss cliflag.NamedFlagSets
	o.addAppFlags(fss.FlagSet("App"))
	o.addWebhookFlags(fss.FlagSet("Webhook"))
	o.addKubernetesFlags(fss.FlagSet("Kubernetes"))
	o.addPolicyModeFlags(fss.FlagSet("Policy shape"))
	o.addObservabilityFlags(fss.FlagSet("Observability"))
	o.addRecordsFlags(fss.FlagSet("Records"))
	for _, name := range fss.Order {
		cmd.Flags().AddFlagSet(fss.FlagSets[name])
	}
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		fmt.Fprintf(c.OutOrStderr(), "Usage:\n  %s\n", c.UseLine())
		if c.HasExample() {
			fmt.Fprintf(c.OutOrStderr(), "\nExamples:\n%s\n", c.Example)
		}
		cliflag.PrintSections(c.OutOrStderr(), fss, 0)
		return nil
	})
}

func (o *Options) addAppFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ConfigPath, "config", "", "GuardConfig file with the owner mappings (re-read on change).")
	fs.DurationVar(&o.ConfigReloadInterval, "config-reload-interval", 2*time.Second, "How often the config file is checked for changes.")
}

func (o *Options) addWebhookFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.AdmissionEndpoint, "admission-endpoint", true,
		"Serve AdmissionReviews on "+webhook.Path+" (the static shape: kube-apiserver calls it). Default: on, off with --policy-mode, where nothing calls it; set it to serve both.")
	fs.StringVar(&o.ClientCAFile, "client-ca-file", "",
		"PEM CA(s) a caller of "+webhook.Path+" must present a client certificate of; requests without one are refused (401). kube-apiserver presents the certificate of the kubeconfig its AdmissionConfiguration names (render static-manifest --client-cert-file). Re-read on change.")
	fs.StringVar(&o.BindAddress, "bind-address", "127.0.0.1", "Address the webhook server listens on (127.0.0.1 for the static shape).")
	fs.IntVar(&o.Port, "port", 9443, "Port the webhook server listens on.")
	fs.StringVar(&o.CertDir, "cert-dir", "", "Directory holding tls.crt and tls.key, as mounted from a cert-manager Secret; reloaded on change.")
	fs.StringVar(&o.TLSMinVersion, "tls-min-version", "VersionTLS12", "Minimum TLS version: VersionTLS12 or VersionTLS13.")
	fs.StringSliceVar(&o.TLSCipherSuites, "tls-cipher-suites", nil, "TLS 1.2 cipher suites (IANA names); default: Go's secure suites.")
	fs.DurationVar(&o.CAMaxStale, "ca-max-stale", casource.DefaultMaxStale, "How long a CA source whose watch keeps failing (API server unreachable, read forbidden) serves its last CA; then caBundle changes of its mappings fail closed. Each source has its own clock.")
}

// addKubernetesFlags adds kubectl's cluster flags (the one way every
// command reaches a cluster) and the guard's own client settings.
func (o *Options) addKubernetesFlags(fs *pflag.FlagSet) {
	o.Kube.AddFlags(fs)
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "Elect a leader among replicas for API writes (records, policy objects).")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the pod's namespace).")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", 50, "Client-side rate limit of the guard's API requests (CA reads are also coalesced).")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", 100, "Burst of the guard's API requests.")
}

func (o *Options) addPolicyModeFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.PolicyMode, "policy-mode", false, "Keep the policy shape's ValidatingAdmissionPolicies and bindings in step with the mappings and the owners' CAs (leader only).")
	fs.DurationVar(&o.PolicySyncInterval, "policy-sync-interval", policysync.DefaultInterval, "How often the owners' CAs are re-read and the generated objects compared (a write happens only on a difference).")
	fs.StringVar(&o.PolicyAnchor, "policy-anchor", "", "ClusterRole that owns every generated object (owner references): deleting it, as helm uninstall does, makes the garbage collector remove them. While it does not exist nothing is written.")
	fs.BoolVar(&o.PolicyAnchorProtection, "policy-anchor-protection", true, "Generate a policy that denies deleting the --policy-anchor ClusterRole (or giving it rules) to everyone but break-glass. It also stops a non-break-glass `helm uninstall`: turn it off first (helm upgrade), or uninstall as break-glass.")
	fs.StringVar(&o.PolicyGuardServiceAccount, "policy-guard-service-account", "", "The guard's own service account (namespace/name): writes of the generated policies and bindings that the static webhook routes here are denied to anyone else (and break-glass).")
}

func (o *Options) addObservabilityFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", "127.0.0.1:8080", "Address serving Prometheus /metrics; \"0\" disables it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", "127.0.0.1:8081", "Address serving /healthz and /readyz.")
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", "0", "Address serving net/http/pprof for profiling; \"0\" (the default) disables it.")
	fs.StringVar(&o.LogFormat, "log-format", "json", "Log format: json or text.")
	fs.StringVar(&o.LogLevel, "log-level", "info", "Log level: info, debug, or a number (higher is more verbose).")
}

func (o *Options) addRecordsFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.RecordsFlushInterval, "records-flush-interval", records.DefaultFlushInterval,
		"How often aggregated records are written to the OpenReports ClusterReports and Events: at most one write per report and one Event per (configuration, reason) per interval per replica.")
	fs.IntVar(&o.RecordsMaxResults, "records-max-results", records.DefaultMaxResults, "Most results kept in one ClusterReport; the oldest are dropped first and counted.")
	fs.BoolVar(&o.Observe, "observe", true,
		"Watch webhook configurations (leader only) and record every caBundle change that breaks a mapping, marked observed: what the policy shape, a stopped guard or break-glass never sends to the guard.")
	fs.DurationVar(&o.ProbeInterval, "probe-interval", 30*time.Second,
		"How often each replica dials every guarded webhook entry, CRD conversion webhook and APIService as kube-apiserver would and verifies the served certificate against the stored caBundle (webhook_guard_trust_path_verified, exported by the leader; a write whose caBundle does not verify what was served is warned about); 0 turns it off.")
}

// restConfig is the client configuration of kubectl's flags with the
// guard's rate limits and user agent.
func (o *Options) restConfig(version string) error {
	cfg, err := o.Kube.RESTConfig()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	cfg.UserAgent = "webhook-guard/" + version
	o.rest = cfg
	return nil
}
