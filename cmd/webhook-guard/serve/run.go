package serve

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
	"github.com/webhook-guard/webhook-guard/webhook/probe"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// LeaderElectionID names the Lease replicas compete for.
const LeaderElectionID = "webhook-guard"

// Run sets up logging and the client, then serves until ctx ends (the
// signal that stops the command).
func (o *Options) Run(ctx context.Context) error {
	logger, err := newLogger(o.LogFormat, o.LogLevel)
	if err != nil {
		return err
	}
	ctrl.SetLogger(logger)
	if err := o.restConfig(o.version); err != nil {
		return err
	}
	return o.serve(ctx)
}

// serve serves admission reviews until ctx ends. The initial configuration
// must load: a guard that starts without its mappings would allow
// everything, so it refuses to start (and never becomes ready) instead.
func (o *Options) serve(ctx context.Context) error {
	log := ctrl.Log.WithName("webhook-guard")
	cfg, data, err := webhook.LoadConfigFile(o.ConfigPath)
	if err != nil {
		return err
	}
	scheme, err := webhook.NewScheme()
	if err != nil {
		return err
	}
	mgr, err := o.newManager(scheme)
	if err != nil {
		return err
	}
	metrics := webhook.NewMetrics(ctrlmetrics.Registry)
	store := webhook.NewConfigStore(cfg)
	// Admissions read owners' CA sources from watches of exactly those
	// objects (list/watch by metadata.name, so RBAC names each one): no API
	// call per admission. Policy shape's syncer has watches of its own.
	resolver, err := newWatchingResolver(mgr, scheme, o.CAMaxStale)
	if err != nil {
		return err
	}
	reloader := webhook.NewConfigReloader(o.ConfigPath, data, store, o.ConfigReloadInterval, metrics, log.WithName("config"))
	reloader.OnReload = func(*policy.Mappings) { resolver.Invalidate() }
	if err := mgr.Add(reloader); err != nil {
		return err
	}
	if o.PolicyMode {
		if err := addPolicySync(mgr, o, store, reloader, log.WithName("policy")); err != nil {
			return err
		}
	}
	reports, err := o.addRecords(mgr, scheme, log)
	if err != nil {
		return err
	}
	if err := mgr.Add(&webhook.CAExpiryWatcher{Config: store, CA: resolver, Metrics: metrics, Interval: webhook.CAExpiryInterval, Log: log.WithName("ca-expiry")}); err != nil {
		return err
	}
	recorder := webhook.Recorders{webhook.LogRecorder{Log: log.WithName("records")}, reports}
	if err := o.addAdmission(mgr, webhook.HandlerOptions{Config: store, CA: resolver, Metrics: metrics, Recorder: recorder}, log); err != nil {
		return err
	}
	if err := addChecks(mgr, store); err != nil {
		return err
	}
	o.logStart(log, cfg)
	return mgr.Start(ctx)
}

// addAdmission adds the admission handler of hopts and what runs beside
// it: the prober, whose last round the handler checks a written caBundle
// against, and the observer, which decides through the handler's CA
// resolver.
func (o *Options) addAdmission(mgr ctrl.Manager, hopts webhook.HandlerOptions, log logr.Logger) error {
	// The prober's last round, kept for the write-time check of a caBundle
	// against what its endpoint served (nothing to compare with when off).
	served := &probe.Served{}
	if o.ProbeInterval > 0 {
		hopts.Serving = webhook.ProbedServing{Served: served}
		if err := addProber(mgr, hopts.Config, served, o.ProbeInterval, log.WithName("probe")); err != nil {
			return err
		}
	}
	handler, err := o.addHandler(mgr, hopts)
	if err != nil {
		return err
	}
	if o.Observe {
		return addObserver(mgr, hopts.Config, handler, hopts.Recorder, log.WithName("observer"))
	}
	return nil
}

// newManager is the controller-runtime manager of the flags.
func (o *Options) newManager(scheme *runtime.Scheme) (ctrl.Manager, error) {
	mgr, err := ctrl.NewManager(o.rest, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsBindAddress},
		HealthProbeBindAddress:  o.HealthProbeBindAddress,
		PprofBindAddress:        o.PprofBindAddress,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		// Runnables that need no leader (the webhook server, the reloader)
		// keep serving while leadership moves.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return nil, fmt.Errorf("setting up the manager: %w", err)
	}
	return mgr, nil
}

// addRecords adds the ClusterReports and Events writer. Reports are read
// and written directly (no informer: one GET per report per flush, and no
// list/watch permission needed).
func (o *Options) addRecords(mgr ctrl.Manager, scheme *runtime.Scheme, log logr.Logger) (*records.Recorder, error) {
	reportClient, err := client.New(mgr.GetConfig(), client.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, err
	}
	reports := records.New(records.Options{
		Client: reportClient,
		// Written synchronously, so the last flush on shutdown is stored
		// before the process exits, each Event with its latest note.
		Events:        records.NewEventWriter(reportClient, "webhook-guard", eventInstance(), log.WithName("events")),
		FlushInterval: o.RecordsFlushInterval,
		MaxResults:    o.RecordsMaxResults,
		Metrics:       records.NewMetrics(ctrlmetrics.Registry),
		Log:           log.WithName("reports"),
	})
	return reports, mgr.Add(reports)
}

// addHandler builds the admission handler and, with the admission
// endpoint, the webhook server that serves it.
func (o *Options) addHandler(mgr ctrl.Manager, opts webhook.HandlerOptions) (*webhook.Handler, error) {
	if o.PolicyGuardServiceAccount != "" {
		opts.AdmissionPolicyWriter = guardapi.ServiceAccountUsername(o.PolicyGuardServiceAccount)
	}
	handler, err := webhook.NewHandler(opts)
	if err != nil {
		return nil, err
	}
	// The webhook server exists only with the admission endpoint: the
	// manager starts it on the first GetWebhookServer, which nothing else
	// calls, so without it there is no listener at all.
	if !o.AdmissionEndpoint {
		return handler, nil
	}
	// Ours: controller-runtime's has no read/write timeouts and cancels
	// in-flight reviews on SIGTERM (webhook/httpserver.go).
	webhookServer := webhook.NewServer(webhook.ServerOptions{
		Host:    o.BindAddress,
		Port:    o.Port,
		CertDir: o.CertDir,
		TLSOpts: []func(*tls.Config){o.TLSConfig},
		// Only kube-apiserver may submit reviews: they become records,
		// Events and metrics.
		ClientCAFile: o.ClientCAFile,
	})
	// One decode of the review and its objects instead of
	// controller-runtime's generic admission.Webhook; Register wraps it in
	// controller-runtime's webhook metrics all the same.
	webhookServer.Register(webhook.Path, handler)
	if err := mgr.Add(webhookServer); err != nil {
		return nil, err
	}
	// Ready only once the webhook server answers TLS with its certificate.
	return handler, mgr.AddReadyzCheck("webhook-server", webhookServer.StartedChecker())
}

// addChecks adds the liveness ping and the readiness of the configuration.
func addChecks(mgr ctrl.Manager, store *webhook.ConfigStore) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	// Ready only once the config is loaded (it is, or serve returned
	// before).
	return mgr.AddReadyzCheck("config", func(*http.Request) error {
		if store.Current() == nil {
			return fmt.Errorf("no configuration loaded")
		}
		return nil
	})
}

func (o *Options) logStart(log logr.Logger, cfg *policy.Mappings) {
	if o.AdmissionEndpoint {
		log.Info("starting", "config", o.ConfigPath, "owners", len(cfg.Spec.Owners), "defaultMode", cfg.Spec.DefaultMode,
			"listen", fmt.Sprintf("%s:%d", o.BindAddress, o.Port), "path", webhook.Path)
		return
	}
	log.Info("starting without an admission endpoint (nothing calls it in the policy shape)", "config", o.ConfigPath,
		"owners", len(cfg.Spec.Owners), "defaultMode", cfg.Spec.DefaultMode)
}

// newWatchingResolver is the admissions' CA resolver: watches started by the
// manager's lifetime (stopped on shutdown).
func newWatchingResolver(mgr ctrl.Manager, scheme *runtime.Scheme, maxStale time.Duration) (*casource.Resolver, error) {
	c, err := client.NewWithWatch(mgr.GetConfig(), client.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, err
	}
	watches := casource.NewWatchReader(c, casource.WatchOptions{})
	if err := mgr.Add(watches); err != nil {
		return nil, err
	}
	return casource.NewWatching(watches, casource.Options{MaxStale: maxStale}), nil
}

// eventInstance is the Events' reportingInstance: the pod (its hostname).
func eventInstance() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "webhook-guard"
}
