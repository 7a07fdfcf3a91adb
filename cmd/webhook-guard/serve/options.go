package serve

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Options configure `webhook-guard serve`. Every field is a flag.
type Options struct {
	genericiooptions.IOStreams

	// App

	// ConfigPath is the GuardConfig file; it is re-read when it changes.
	ConfigPath string
	// ConfigReloadInterval is how often the config file is checked.
	ConfigReloadInterval time.Duration

	// Webhook

	// BindAddress is the webhook server's listen address (127.0.0.1 for the
	// static shape, where kube-apiserver calls https://127.0.0.1).
	BindAddress string
	// Port is the webhook server's port.
	Port int
	// CertDir holds tls.crt and tls.key as mounted from a cert-manager
	// Secret; they are reloaded on change without a restart.
	CertDir string
	// TLSMinVersion is VersionTLS12 or VersionTLS13.
	TLSMinVersion string
	// TLSCipherSuites restricts TLS 1.2 suites (IANA names); empty means Go's
	// secure defaults. TLS 1.3 suites are not configurable in Go.
	TLSCipherSuites []string
	// CAMaxStale is how long a cached CA keeps serving while its source
	// cannot be read (API server unreachable); then caBundle changes fail closed.
	CAMaxStale time.Duration

	// Kubernetes

	// Kube are kubectl's cluster flags (--kubeconfig, --context, ...);
	// in-cluster configuration when they name no kubeconfig.
	Kube *cmdutil.KubeFlags
	// LeaderElect makes API writers (records, policy objects) leader-only.
	LeaderElect bool
	// LeaderElectionNamespace holds the Lease.
	LeaderElectionNamespace string
	// KubeAPIQPS and KubeAPIBurst bound the guard's own API requests (CA
	// reads); client-go's default of 5 QPS would queue CA re-reads under a
	// write storm.
	KubeAPIQPS   float32
	KubeAPIBurst int

	// AdmissionEndpoint serves AdmissionReviews on webhook.Path over TLS.
	// Only the static shape needs it (kube-apiserver calls it there); in the
	// policy shape nothing calls it, and an endpoint anyone on the pod
	// network may post forged reviews to would only feed them into the
	// records, Events and metrics. Complete turns it off with --policy-mode
	// unless --admission-endpoint was given.
	AdmissionEndpoint bool
	// admissionEndpointSet says --admission-endpoint was given.
	admissionEndpointSet bool
	// ClientCAFile, when set, is the CA a caller of the admission endpoint
	// must present a client certificate of (kube-apiserver's, from the
	// kubeconfig its AdmissionConfiguration names); any other request is
	// refused. Re-read when it changes.
	ClientCAFile string

	// Policy shape

	// PolicyMode runs the leader-elected controller that keeps the policy shape's
	// ValidatingAdmissionPolicies and bindings in step with the mappings
	// and the owners' CA sources (policy/vap).
	PolicyMode bool
	// PolicySyncInterval is how often the owners' CAs are re-read and the
	// generated objects compared with the live ones.
	PolicySyncInterval time.Duration
	// PolicyGuardServiceAccount ("namespace/name") is the guard's own
	// identity; when set, the handler lets only it (and break-glass) change
	// the generated policies and bindings when the static webhook routes
	// their writes to the guard.
	PolicyGuardServiceAccount string
	// PolicyAnchor names the ClusterRole every generated object is owned
	// by, so that deleting it (uninstall) garbage-collects them.
	PolicyAnchor string
	// PolicyAnchorProtection generates the anchor's own policy.
	PolicyAnchorProtection bool

	// Observability

	// MetricsBindAddress serves /metrics; "0" disables it.
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz.
	HealthProbeBindAddress string
	// PprofBindAddress serves net/http/pprof; "" or "0" (the default)
	// disables it. For profiling a guard under load, never in production.
	PprofBindAddress string
	// LogFormat is json or text.
	LogFormat string
	// LogLevel is info or debug (or a number: higher is more verbose).
	LogLevel string

	// Records

	// RecordsFlushInterval is how often aggregated records are written to
	// the ClusterReports and Events: at most one write per report and one
	// Event per (configuration, reason) per interval per replica.
	RecordsFlushInterval time.Duration
	// RecordsMaxResults bounds the results of one ClusterReport (oldest
	// dropped first).
	RecordsMaxResults int
	// Observe runs the observer (webhook/observe) on the leader: a watch of
	// webhook configurations that records what changes the guard was not
	// asked about (policy shape, guard down, break-glass) would break.
	Observe bool
	// ProbeInterval is how often each replica probes every guarded trust
	// path (webhook/probe); 0 turns the probes off.
	ProbeInterval time.Duration

	// rest is the client configuration Run builds from Kube.
	rest *rest.Config
	// flags are the parsed flags (AddFlags), for what Complete derives
	// from whether a flag was given.
	flags *pflag.FlagSet
	// version goes into the client's user agent.
	version string
}

// NewOptions are the options with kubectl's cluster flags, before the
// flags are parsed.
func NewOptions() *Options {
	return &Options{Kube: cmdutil.NewKubeFlags()}
}

// saNamespaceFile holds the pod's namespace.
const saNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Complete derives what depends on other flags, from the parsed flag set
// (none before AddFlags: no flag was given on the command line):
// --policy-mode turns the admission endpoint off unless
// --admission-endpoint was given, and --leader-election-namespace defaults
// to the pod's namespace.
func (o *Options) Complete(_ []string) error {
	o.admissionEndpointSet = o.flags != nil && o.flags.Changed("admission-endpoint")
	if o.PolicyMode && !o.admissionEndpointSet {
		o.AdmissionEndpoint = false
	}
	if o.LeaderElect && o.LeaderElectionNamespace == "" {
		if ns, err := os.ReadFile(saNamespaceFile); err == nil {
			o.LeaderElectionNamespace = strings.TrimSpace(string(ns))
		}
	}
	return nil
}

// Validate checks the options, returning every error, each naming its
// flag.
func (o *Options) Validate() error {
	var errs []string
	if o.ConfigPath == "" {
		errs = append(errs, "--config is required: the GuardConfig file with the owner mappings")
	}
	errs = append(errs, o.validateWebhook()...)
	errs = append(errs, o.validateIntervals()...)
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Sprintf("--kube-api-qps must be > 0 and --kube-api-burst >= 1, got %g and %d", o.KubeAPIQPS, o.KubeAPIBurst))
	}
	if o.LogFormat != "json" && o.LogFormat != "text" {
		errs = append(errs, fmt.Sprintf("--log-format must be json or text, got %q", o.LogFormat))
	}
	if o.LeaderElect && o.LeaderElectionNamespace == "" {
		errs = append(errs, "--leader-election-namespace is required outside a cluster when --leader-elect is set")
	}
	errs = append(errs, o.validatePolicyMode()...)
	if len(errs) > 0 {
		return fmt.Errorf("invalid options:\n  %s", strings.Join(errs, "\n  "))
	}
	return nil
}

// validateWebhook checks the admission endpoint's flags: its serving
// certificate, its client CA, its port and its TLS policy.
func (o *Options) validateWebhook() []string {
	var errs []string
	switch {
	case !o.AdmissionEndpoint:
		// No TLS server: the serving certificate is not read.
	case o.CertDir == "":
		errs = append(errs, "--cert-dir is required: a directory holding tls.crt and tls.key (a mounted cert-manager Secret)")
	default:
		for _, f := range []string{"tls.crt", "tls.key"} {
			if _, err := os.Stat(filepath.Join(o.CertDir, f)); err != nil {
				errs = append(errs, fmt.Sprintf("--cert-dir %s: %v", o.CertDir, err))
			}
		}
	}
	if o.ClientCAFile != "" {
		if !o.AdmissionEndpoint {
			errs = append(errs, "--client-ca-file authenticates callers of the admission endpoint, which is not served (--policy-mode without --admission-endpoint)")
		} else if _, err := os.Stat(o.ClientCAFile); err != nil {
			errs = append(errs, fmt.Sprintf("--client-ca-file: %v", err))
		}
	}
	if o.Port < 1 || o.Port > 65535 {
		errs = append(errs, fmt.Sprintf("--port must be in 1..65535, got %d", o.Port))
	}
	if _, err := o.tlsVersion(); err != nil {
		errs = append(errs, err.Error())
	}
	if _, err := o.cipherSuites(); err != nil {
		errs = append(errs, err.Error())
	}
	return errs
}

// validateIntervals checks the durations and bounds of the reloads, the CA
// cache and the records.
func (o *Options) validateIntervals() []string {
	var errs []string
	if o.ConfigReloadInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Sprintf("--config-reload-interval must be >= 100ms, got %s", o.ConfigReloadInterval))
	}
	if o.CAMaxStale <= 0 {
		errs = append(errs, fmt.Sprintf("--ca-max-stale must be > 0, got %s", o.CAMaxStale))
	}
	if o.RecordsFlushInterval < time.Second {
		errs = append(errs, fmt.Sprintf("--records-flush-interval must be >= 1s, got %s", o.RecordsFlushInterval))
	}
	if o.ProbeInterval < 0 || (o.ProbeInterval > 0 && o.ProbeInterval < time.Second) {
		errs = append(errs, fmt.Sprintf("--probe-interval must be 0 (off) or >= 1s, got %s", o.ProbeInterval))
	}
	if o.RecordsMaxResults < 1 {
		errs = append(errs, fmt.Sprintf("--records-max-results must be >= 1, got %d", o.RecordsMaxResults))
	}
	return errs
}

func (o *Options) tlsVersion() (uint16, error) {
	switch o.TLSMinVersion {
	case "VersionTLS12":
		return tls.VersionTLS12, nil
	case "VersionTLS13":
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("--tls-min-version must be VersionTLS12 or VersionTLS13, got %q", o.TLSMinVersion)
}

// cipherSuites maps names to IDs, accepting only suites Go considers secure.
func (o *Options) cipherSuites() ([]uint16, error) {
	if len(o.TLSCipherSuites) == 0 {
		return nil, nil
	}
	secure := map[string]uint16{}
	var names []string
	for _, s := range tls.CipherSuites() {
		secure[s.Name] = s.ID
		names = append(names, s.Name)
	}
	slices.Sort(names)
	var ids []uint16
	for _, n := range o.TLSCipherSuites {
		id, ok := secure[n]
		if !ok {
			return nil, fmt.Errorf("--tls-cipher-suites: %q is not a supported secure suite; choose from %s", n, strings.Join(names, ", "))
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// TLSConfig applies the TLS policy to a server config.
func (o *Options) TLSConfig(cfg *tls.Config) {
	v, _ := o.tlsVersion()
	ids, _ := o.cipherSuites()
	cfg.MinVersion = v
	cfg.CipherSuites = ids
	// kube-apiserver speaks HTTP/2 to webhooks; keep the HTTP/1.1 fallback
	// for curl and older clients.
	cfg.NextProtos = []string{"h2", "http/1.1"}
}

func (o *Options) validatePolicyMode() []string {
	var errs []string
	if sa := o.PolicyGuardServiceAccount; sa != "" {
		if _, _, ok := guardapi.SplitServiceAccount(sa); !ok {
			errs = append(errs, fmt.Sprintf("--policy-guard-service-account must be \"namespace/name\", got %q", sa))
		}
	}
	if !o.PolicyMode {
		return errs
	}
	if o.PolicySyncInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Sprintf("--policy-sync-interval must be >= 100ms, got %s", o.PolicySyncInterval))
	}
	return errs
}
