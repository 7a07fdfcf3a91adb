// Command cainjector runs cert-manager's real cainjector controllers
// (github.com/cert-manager/cert-manager/pkg/controller/cainjector, the
// version in go.mod) against a test kube-apiserver, for the e2e suite
// (e2e/framework/cainjector.go starts it).
//
// It sets up what cert-manager's cmd/cainjector (app.Run) sets up for the
// injection itself: the user agent (so the server-side apply field manager
// is "cert-manager-cainjector"), the scheme, the cache that never caches
// Secret data, the wait for the Certificate CRD and
// cainjector.RegisterAllInjectors. It leaves out what a test does not need:
// the metrics server (BindAddress "0"), health probes, pprof, leader election
// and the configuration file. The MutatingWebhookConfiguration and
// ValidatingWebhookConfiguration reconcilers run, and with --trust-objects
// the APIService and CustomResourceDefinition ones.
//
// It logs to stderr through cert-manager's own logger (klog text).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	logsapi "k8s.io/component-base/logs/api/v1"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

const certManagerModule = "github.com/cert-manager/cert-manager"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "cainjector: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := pflag.NewFlagSet("cainjector", pflag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the identity cainjector runs as (required)")
	namespace := fs.String("namespace", "", "restrict cainjector to one namespace, as cert-manager's --namespace (default: all)")
	featureGates := fs.String("feature-gates", "", "cert-manager cainjector feature gates, e.g. CAInjectorMerging=false")
	trustObjects := fs.Bool("trust-objects", false, "also inject into APIServices and CustomResourceDefinitions, as cert-manager does by default")
	logOpts := logsapi.NewLoggingConfiguration()
	logf.AddFlagsNonDeprecated(logOpts, fs) // --v, --vmodule, --logging-format
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *kubeconfig == "" {
		return errors.New("--kubeconfig is required")
	}
	// cainjector's injectables consult cert-manager's own feature gate
	// (pkg/util/feature), which its internal feature package registers on
	// import; the real binary sets it from --feature-gates the same way.
	if *featureGates != "" {
		if err := utilfeature.DefaultMutableFeatureGate.Set(*featureGates); err != nil {
			return fmt.Errorf("--feature-gates: %w", err)
		}
	}
	logf.InitLogs()
	defer logf.FlushLogs()
	if err := logf.ValidateAndApply(logOpts); err != nil {
		return fmt.Errorf("logging flags: %w", err)
	}
	ctrl.SetLogger(logf.Log)
	log := logf.Log.WithName("cainjector")

	// A release build sets util.AppVersion with -ldflags; this build takes
	// the version of the cert-manager module it was built with, so the user
	// agent reads as the release's: cert-manager-cainjector/v1.21.2 (...).
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == certManagerModule {
				util.AppVersion = m.Version
			}
		}
	}
	base, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("load %s: %w", *kubeconfig, err)
	}
	// As ctrl.GetConfigOrDie, which the real binary loads its config with:
	// no client-side rate limit (API priority and fairness applies).
	if base.QPS == 0 {
		base.QPS = -1
	}
	restConfig := util.RestConfigWithUserAgent(base, "cainjector")
	log.Info("starting", "userAgent", restConfig.UserAgent, "featureGates", *featureGates, "namespace", *namespace)

	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiext.AddToScheme(scheme))
	utilruntime.Must(apireg.AddToScheme(scheme))

	var defaultNamespaces map[string]cache.Config
	if *namespace != "" {
		defaultNamespaces = map[string]cache.Config{*namespace: {}}
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: scheme,
		Cache: cache.Options{
			ReaderFailOnMissingInformer: true,
			DefaultNamespaces:           defaultNamespaces,
		},
		// As cert-manager: Secrets are read from the API server on every
		// reconcile, never cached (only their metadata is watched).
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		// No metrics server, health probes or leader election: one
		// process per test, on shared loopback ports.
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()

	// As cert-manager: with the Certificate data source on, wait until the
	// Certificate CRD is served.
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := direct.Get(ctx, types.NamespacedName{Name: "certificates.cert-manager.io"}, &apiext.CustomResourceDefinition{})
		if apierrors.IsNotFound(err) {
			log.Info("certificates.cert-manager.io CRD not found, retrying")
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("wait for the certificates.cert-manager.io CRD: %w", err)
	}

	err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    *namespace,
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
			// As cert-manager's --enable-apiservices-injectable and
			// --enable-customresourcedefinitions-injectable (both on in
			// cert-manager): off unless the test injects into those kinds,
			// so that the other tests start two controllers, not four.
			cainjector.APIServiceName:               *trustObjects,
			cainjector.CustomResourceDefinitionName: *trustObjects,
		},
	})
	if err != nil {
		return fmt.Errorf("register injectors: %w", err)
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	log.Info("stopped")
	return nil
}
