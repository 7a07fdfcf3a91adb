package app

import (
	"fmt"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
	"github.com/webhook-guard/webhook-guard/webhook/policysync"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

func newServeCommand() *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the admission webhook server",
		Long: `Serve admission reviews for webhook configurations over TLS.

The certificate directory is a mounted cert-manager Secret (tls.crt, tls.key)
and is reloaded on change; the config file is reloaded on change, and a bad
new file is rejected while the last good one stays in force.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.completeFlags(cmd.Flags()); err != nil {
				return err
			}
			logger, err := newLogger(o.LogFormat, o.LogLevel)
			if err != nil {
				return err
			}
			ctrl.SetLogger(logger)
			restCfg, err := restConfig(o.Kubeconfig)
			if err != nil {
				return err
			}
			restCfg.QPS, restCfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
			restCfg.UserAgent = "webhook-guard/" + Version
			return runServe(ctrl.SetupSignalHandler(), o, restCfg)
		},
	}
	addServeFlags(cmd, o)
	return cmd
}

// completeFlags is Complete for the parsed flags: which defaults depend on
// other flags needs to know what was given.
func (o *serveOptions) completeFlags(fs *pflag.FlagSet) error {
	o.admissionEndpointSet = fs.Changed("admission-endpoint")
	return o.Complete()
}

// addServeFlags adds the flags in named sections, each documented.
func addServeFlags(cmd *cobra.Command, o *serveOptions) {
	app := pflag.NewFlagSet("App", pflag.ExitOnError)
	app.StringVar(&o.ConfigPath, "config", "", "GuardConfig file with the owner mappings (re-read on change).")
	app.DurationVar(&o.ConfigReloadInterval, "config-reload-interval", 2*time.Second, "How often the config file is checked for changes.")

	wh := pflag.NewFlagSet("Webhook", pflag.ExitOnError)
	wh.BoolVar(&o.AdmissionEndpoint, "admission-endpoint", true,
		"Serve AdmissionReviews on "+webhook.Path+" (the static shape: kube-apiserver calls it). Default: on, off with --policy-mode, where nothing calls it; set it to serve both.")
	wh.StringVar(&o.ClientCAFile, "client-ca-file", "",
		"PEM CA(s) a caller of "+webhook.Path+" must present a client certificate of; requests without one are refused (401). kube-apiserver presents the certificate of the kubeconfig its AdmissionConfiguration names (render static-manifest --client-cert-file). Re-read on change.")
	wh.StringVar(&o.BindAddress, "bind-address", "127.0.0.1", "Address the webhook server listens on (127.0.0.1 for the static shape).")
	wh.IntVar(&o.Port, "port", 9443, "Port the webhook server listens on.")
	wh.StringVar(&o.CertDir, "cert-dir", "", "Directory holding tls.crt and tls.key, as mounted from a cert-manager Secret; reloaded on change.")
	wh.StringVar(&o.TLSMinVersion, "tls-min-version", "VersionTLS12", "Minimum TLS version: VersionTLS12 or VersionTLS13.")
	wh.StringSliceVar(&o.TLSCipherSuites, "tls-cipher-suites", nil, "TLS 1.2 cipher suites (IANA names); default: Go's secure suites.")
	wh.DurationVar(&o.CATTL, "ca-cache-ttl", casource.DefaultTTL, "Unused: admissions and policy mode's syncer read owners' CAs from watches of exactly those objects (--ca-max-stale bounds a failing watch); accepted so that existing command lines keep working.")
	wh.DurationVar(&o.CAMaxStale, "ca-max-stale", casource.DefaultMaxStale, "How long a CA source whose watch keeps failing (API server unreachable, read forbidden) serves its last CA; then caBundle changes of its mappings fail closed. Each source has its own clock.")

	kube := pflag.NewFlagSet("Kubernetes", pflag.ExitOnError)
	kube.StringVar(&o.Kubeconfig, "kubeconfig", "", "Kubeconfig file; in-cluster configuration when empty.")
	kube.BoolVar(&o.LeaderElect, "leader-elect", false, "Elect a leader among replicas for API writes (records, policy objects).")
	kube.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the pod's namespace).")
	kube.Float32Var(&o.KubeAPIQPS, "kube-api-qps", 50, "Client-side rate limit of the guard's API requests (CA reads are also coalesced).")
	kube.IntVar(&o.KubeAPIBurst, "kube-api-burst", 100, "Burst of the guard's API requests.")

	pm := pflag.NewFlagSet("Policy mode", pflag.ExitOnError)
	pm.BoolVar(&o.PolicyMode, "policy-mode", false, "Keep policy mode's ValidatingAdmissionPolicies and bindings in step with the mappings and the owners' CAs (leader only).")
	// Policy mode no longer generates param ConfigMaps (the owner's CA is in
	// the policy): the flag is accepted and ignored so that existing
	// manifests keep starting.
	var policyNamespace string
	pm.StringVar(&policyNamespace, "policy-namespace", "", "Ignored.")
	_ = pm.MarkDeprecated("policy-namespace", "policy mode generates no param ConfigMaps any more; the flag is ignored")
	pm.DurationVar(&o.PolicySyncInterval, "policy-sync-interval", policysync.DefaultInterval, "How often the owners' CAs are re-read and the generated objects compared (a write happens only on a difference).")
	pm.StringVar(&o.PolicyAnchor, "policy-anchor", "", "ClusterRole that owns every generated object (owner references): deleting it, as helm uninstall does, makes the garbage collector remove them. While it does not exist nothing is written.")
	pm.BoolVar(&o.PolicyAnchorProtection, "policy-anchor-protection", true, "Generate a policy that denies deleting the --policy-anchor ClusterRole (or giving it rules) to everyone but break-glass. It also stops a non-break-glass `helm uninstall`: turn it off first (helm upgrade), or uninstall as break-glass.")
	pm.StringVar(&o.PolicyGuardServiceAccount, "policy-guard-service-account", "", "The guard's own service account (namespace/name): writes of the generated policies and bindings that the static webhook routes here are denied to anyone else (and break-glass).")

	obs := pflag.NewFlagSet("Observability", pflag.ExitOnError)
	obs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", "127.0.0.1:8080", "Address serving Prometheus /metrics; \"0\" disables it.")
	obs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", "127.0.0.1:8081", "Address serving /healthz and /readyz.")
	obs.StringVar(&o.PprofBindAddress, "pprof-bind-address", "0", "Address serving net/http/pprof for profiling; \"0\" (the default) disables it.")
	obs.StringVar(&o.LogFormat, "log-format", "json", "Log format: json or text.")
	obs.StringVar(&o.LogLevel, "log-level", "info", "Log level: info, debug, or a number (higher is more verbose).")

	rec := pflag.NewFlagSet("Records", pflag.ExitOnError)
	rec.DurationVar(&o.RecordsFlushInterval, "records-flush-interval", records.DefaultFlushInterval,
		"How often aggregated records are written to the OpenReports ClusterReports and Events: at most one write per report and one Event per (configuration, reason) per interval per replica.")
	rec.IntVar(&o.RecordsMaxResults, "records-max-results", records.DefaultMaxResults, "Most results kept in one ClusterReport; the oldest are dropped first and counted.")
	rec.BoolVar(&o.Observe, "observe", true,
		"Watch webhook configurations (leader only) and record every caBundle change that breaks a mapping, marked observed: what the policy shape, a stopped guard or break-glass never sends to the guard.")

	sections := []*pflag.FlagSet{app, wh, kube, pm, obs, rec}
	for _, fs := range sections {
		cmd.Flags().AddFlagSet(fs)
	}
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		out := c.OutOrStderr()
		fmt.Fprintf(out, "Usage:\n  %s\n", c.UseLine())
		for _, fs := range sections {
			fmt.Fprintf(out, "\n%s flags:\n%s", fs.Name(), fs.FlagUsages())
		}
		return nil
	})
}

func newLogger(format, level string) (logr.Logger, error) {
	opts := ctrlzap.Options{}
	switch format {
	case "json":
		opts.Encoder = zapcore.NewJSONEncoder(encoderConfig())
	case "text":
		opts.Encoder = zapcore.NewConsoleEncoder(encoderConfig())
	default:
		return logr.Logger{}, fmt.Errorf("--log-format must be json or text, got %q", format)
	}
	switch level {
	case "info":
		opts.Level = zapcore.InfoLevel
	case "debug":
		opts.Level = zapcore.DebugLevel
	default:
		n, err := strconv.Atoi(level)
		if err != nil || n < 0 || n > 127 {
			return logr.Logger{}, fmt.Errorf("--log-level must be info, debug or a number in 0..127, got %q", level)
		}
		opts.Level = zapcore.Level(-int8(n)) //nolint:gosec // bounded to 0..127 above
	}
	return ctrlzap.New(ctrlzap.UseFlagOptions(&opts)), nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig given and not running in a cluster: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

func encoderConfig() zapcore.EncoderConfig {
	return zapcore.EncoderConfig{
		TimeKey: "ts", LevelKey: "level", NameKey: "logger", MessageKey: "msg", StacktraceKey: "stacktrace",
		LineEnding: zapcore.DefaultLineEnding, EncodeLevel: zapcore.LowercaseLevelEncoder,
		EncodeTime: zapcore.ISO8601TimeEncoder, EncodeDuration: zapcore.StringDurationEncoder,
	}
}
