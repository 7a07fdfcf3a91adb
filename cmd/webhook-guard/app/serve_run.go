package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// LeaderElectionID names the Lease replicas compete for.
const LeaderElectionID = "webhook-guard"

// runServe serves admission reviews until ctx ends. The initial configuration
// must load: a guard that starts without its mappings would allow
// everything, so it refuses to start (and never becomes ready) instead.
func runServe(ctx context.Context, o *serveOptions, restCfg *rest.Config) error {
	log := ctrl.Log.WithName("webhook-guard")
	cfg, data, err := webhook.LoadConfigFile(o.ConfigPath)
	if err != nil {
		return err
	}
	scheme, err := webhook.NewScheme()
	if err != nil {
		return err
	}
	// The webhook server exists only with the admission endpoint: the
	// manager starts it on the first GetWebhookServer, which nothing else
	// calls, so without it there is no listener at all.
	var webhookServer *webhook.Server
	if o.AdmissionEndpoint {
		// Ours: controller-runtime's has no read/write timeouts and
		// cancels in-flight reviews on SIGTERM (webhook/httpserver.go).
		webhookServer = webhook.NewServer(webhook.ServerOptions{
			Host:    o.BindAddress,
			Port:    o.Port,
			CertDir: o.CertDir,
			TLSOpts: []func(*tls.Config){o.TLSConfig},
			// Only kube-apiserver may submit reviews: they become records,
			// Events and metrics.
			ClientCAFile: o.ClientCAFile,
		})
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
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
		return fmt.Errorf("setting up the manager: %w", err)
	}

	metrics := webhook.NewMetrics(ctrlmetrics.Registry)
	store := webhook.NewConfigStore(cfg)
	// Admissions read owners' CA sources from watches of exactly those
	// objects (list/watch by metadata.name, so RBAC names each one): no API
	// call per admission. Policy mode's syncer has watches of its own.
	resolver, err := newWatchingResolver(mgr, scheme, o.CAMaxStale)
	if err != nil {
		return err
	}
	reloader := webhook.NewConfigReloader(o.ConfigPath, data, store, o.ConfigReloadInterval, metrics, log.WithName("config"))
	reloader.OnReload = func(*policy.Config) { resolver.Invalidate() }
	if err := mgr.Add(reloader); err != nil {
		return err
	}
	if o.PolicyMode {
		if err := addPolicySync(mgr, o, store, reloader, log.WithName("policy")); err != nil {
			return err
		}
	}

	// Reports are read and written directly (no informer: one GET per
	// report per flush, and no list/watch permission needed).
	reportClient, err := client.New(mgr.GetConfig(), client.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
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
	if err := mgr.Add(reports); err != nil {
		return err
	}
	if err := mgr.Add(&webhook.CAExpiryWatcher{Config: store, CA: resolver, Metrics: metrics, Interval: webhook.CAExpiryInterval, Log: log.WithName("ca-expiry")}); err != nil {
		return err
	}
	recorder := webhook.Recorders{webhook.LogRecorder{Log: log.WithName("records")}, reports}
	var admissionPolicyWriter string
	if o.PolicyGuardServiceAccount != "" {
		admissionPolicyWriter = policy.ServiceAccountUsername(o.PolicyGuardServiceAccount)
	}
	handler, err := webhook.NewHandler(webhook.HandlerOptions{Config: store, CA: resolver, Metrics: metrics, Recorder: recorder, AdmissionPolicyWriter: admissionPolicyWriter})
	if err != nil {
		return err
	}
	if webhookServer != nil {
		// One decode of the review and its objects instead of
		// controller-runtime's generic admission.Webhook; Register wraps it
		// in controller-runtime's webhook metrics all the same.
		webhookServer.Register(webhook.Path, handler)
		if err := mgr.Add(webhookServer); err != nil {
			return err
		}
		// Ready only once the webhook server answers TLS with its
		// certificate.
		if err := mgr.AddReadyzCheck("webhook-server", webhookServer.StartedChecker()); err != nil {
			return err
		}
	}
	if o.Observe {
		if err := addObserver(mgr, store, handler, recorder, log.WithName("observer")); err != nil {
			return err
		}
	}

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	// Ready only once the config is loaded (it is, or runServe returned
	// above).
	if err := mgr.AddReadyzCheck("config", func(*http.Request) error {
		if store.Current() == nil {
			return fmt.Errorf("no configuration loaded")
		}
		return nil
	}); err != nil {
		return err
	}
	if webhookServer != nil {
		log.Info("starting", "config", o.ConfigPath, "owners", len(cfg.Spec.Owners), "defaultMode", cfg.Spec.DefaultMode,
			"listen", fmt.Sprintf("%s:%d", o.BindAddress, o.Port), "path", webhook.Path)
	} else {
		log.Info("starting without an admission endpoint (nothing calls it in the policy shape)", "config", o.ConfigPath,
			"owners", len(cfg.Spec.Owners), "defaultMode", cfg.Spec.DefaultMode)
	}
	return mgr.Start(ctx)
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
