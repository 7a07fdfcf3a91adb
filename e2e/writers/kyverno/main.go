// Command kyverno-writer runs the code of Kyverno's admission controller
// (github.com/kyverno/kyverno, the version in go.mod) that writes webhook
// configurations and their CA, against a test kube-apiserver, for the e2e
// suite (e2e/framework/kyverno.go starts it; hack/build-writers.sh builds it
// into bin/kyverno-writer: Kyverno's dependency graph stays in this module).
//
// It wires what cmd/kyverno (main and createrLeaderControllers) wires for
// that, with Kyverno's flag names and defaults: the clients, the config
// controller reading the kyverno ConfigMap, the CA and TLS Secret informers,
// the certificate renewer (pkg/tls NewCertRenewer) run by the certmanager
// controller, the webhook controller (resource, policy and verify
// configurations, rewritten as policies change) and the three generic
// webhook controllers (policy exceptions, CEL policy exceptions, global
// context entries). Its configuration is read from the environment
// (KYVERNO_NAMESPACE, KYVERNO_SVC, ...), as the chart's Deployment sets it.
//
// It leaves out what does not write webhook configurations: leader election
// (one process), metrics, tracing, the policy cache, the engine, events, the
// background and reports controllers and the admission policy generator.
// Kyverno's admission server is replaced by an answer that admits
// everything (--admit-address, see admit.go): the policy webhooks Kyverno
// registers fail closed, so without a server no ClusterPolicy could be
// created or changed.
//
// The webhook controller decides whether to rewrite its resource
// configurations from two checks, both kept: its health Lease
// (kyverno-health, which its own watchdog creates and renews every 10 s,
// with no request needed from the server), and the Deployment named by
// KYVERNO_DEPLOYMENT (a rolling update while it has more replicas than
// wanted). The test creates that Deployment as the chart does; nothing runs
// its pods, so it never shows a rolling update.
//
// --ca-validity and --tls-validity are test hooks: the validities cmd/kyverno
// passes to NewCertRenewer as constants (365 and 150 days). With a CA valid
// for less than --renewBefore (Kyverno's own flag) plus a few seconds, the
// renewer finds the CA due at its next check and renews it on its own path,
// as it does 15 days before a real CA expires.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kyverno/kyverno/pkg/client/clientset/versioned"
	kyvernoinformer "github.com/kyverno/kyverno/pkg/client/informers/externalversions"
	"github.com/kyverno/kyverno/pkg/clients/dclient"
	"github.com/kyverno/kyverno/pkg/config"
	"github.com/kyverno/kyverno/pkg/controllers"
	"github.com/kyverno/kyverno/pkg/controllers/certmanager"
	genericconfigmapcontroller "github.com/kyverno/kyverno/pkg/controllers/generic/configmap"
	webhookcontroller "github.com/kyverno/kyverno/pkg/controllers/webhook"
	"github.com/kyverno/kyverno/pkg/informers"
	"github.com/kyverno/kyverno/pkg/logging"
	"github.com/kyverno/kyverno/pkg/tls"
	kubeutils "github.com/kyverno/kyverno/pkg/utils/kube"
	runtimeutils "github.com/kyverno/kyverno/pkg/utils/runtime"
	corev1 "k8s.io/api/core/v1"
	apiserver "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/dynamic"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

type options struct {
	kubeconfig                  string
	caSecretName, tlsSecretName string
	servicePort, webhookTimeout int
	autoUpdateWebhooks          bool
	renewBefore, resyncPeriod   time.Duration
	caValidity, tlsValidity     time.Duration
	admitAddress                string
	logLevel                    int
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "kyverno-writer: %v\n", err)
		os.Exit(1)
	}
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("kyverno-writer", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the identity Kyverno runs as (required)")
	// Kyverno's own flags, with cmd/kyverno's defaults.
	fs.StringVar(&o.caSecretName, "caSecretName", "", "Name of the secret containing CA.")
	fs.StringVar(&o.tlsSecretName, "tlsSecretName", "", "Name of the secret containing TLS pair.")
	fs.IntVar(&o.servicePort, "servicePort", 443, "Port used by the Kyverno Service resource and for webhook configurations.")
	fs.IntVar(&o.webhookTimeout, "webhookTimeout", webhookcontroller.DefaultWebhookTimeout, "Timeout for webhook configurations (number of seconds, integer).")
	fs.BoolVar(&o.autoUpdateWebhooks, "autoUpdateWebhooks", true, "Set this flag to 'false' to disable auto-configuration of the webhook.")
	fs.DurationVar(&o.renewBefore, "renewBefore", 15*24*time.Hour, "The certificate renewal time before expiration")
	fs.DurationVar(&o.resyncPeriod, "resyncPeriod", 15*time.Minute, "Configure the resync period for informer factory")
	fs.IntVar(&o.logLevel, "v", 2, "log level (Kyverno's -v)")
	// Test hooks.
	fs.DurationVar(&o.caValidity, "ca-validity", tls.CAValidityDuration, "validity of the CA the renewer generates (cmd/kyverno: tls.CAValidityDuration)")
	fs.DurationVar(&o.tlsValidity, "tls-validity", tls.TLSValidityDuration, "validity of the serving certificate (cmd/kyverno: tls.TLSValidityDuration)")
	fs.StringVar(&o.admitAddress, "admit-address", "", "host:port of the TLS server, with Kyverno's serving Secret, that admits every review (empty: none)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.kubeconfig == "" || o.caSecretName == "" || o.tlsSecretName == "" {
		return o, errors.New("--kubeconfig, --caSecretName and --tlsSecretName are required")
	}
	return o, nil
}

// clients are the clients cmd/internal's Setup creates, at Kyverno's
// default client rate limit (20 QPS, burst 50).
type clients struct {
	kube    kubernetes.Interface
	kyverno versioned.Interface
	dyn     dclient.Interface
	apiext  apiserver.Interface
}

func newClients(ctx context.Context, o options) (clients, error) {
	cfg, err := config.CreateClientConfig(o.kubeconfig, 20, 50)
	if err != nil {
		return clients{}, err
	}
	// The field manager kube-apiserver names is the user agent's first
	// word: the binary's name, "kyverno" for Kyverno's image.
	ua := rest.DefaultKubernetesUserAgent()
	cfg.UserAgent = "kyverno"
	if _, version, ok := strings.Cut(ua, "/"); ok {
		cfg.UserAgent += "/" + version
	}
	var c clients
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return c, err
	}
	if c.kyverno, err = versioned.NewForConfig(cfg); err != nil {
		return c, err
	}
	if c.apiext, err = apiserver.NewForConfig(cfg); err != nil {
		return c, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return c, err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return c, err
	}
	c.dyn, err = dclient.NewClient(ctx, dyn, c.kube, o.resyncPeriod, false, meta)
	return c, err
}

func run(args []string) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	if err := logging.Setup(logging.TextFormat, logging.DefaultTime, o.logLevel, true); err != nil {
		return fmt.Errorf("logging: %w", err)
	}
	logger := logging.WithName("kyverno-writer")
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()

	c, err := newClients(ctx, o)
	if err != nil {
		return fmt.Errorf("clients: %w", err)
	}
	configuration, err := startConfigController(ctx, c.kube, o.resyncPeriod)
	if err != nil {
		return err
	}
	ns := config.KyvernoNamespace()
	caSecret := informers.NewSecretInformer(c.kube, ns, o.caSecretName, o.resyncPeriod)
	tlsSecret := informers.NewSecretInformer(c.kube, ns, o.tlsSecretName, o.resyncPeriod)
	kyvernoDeployment := informers.NewDeploymentInformer(c.kube, ns, config.KyvernoDeploymentName(), o.resyncPeriod)
	if !informers.StartInformersAndWaitForCacheSync(ctx, logger, caSecret, tlsSecret, kyvernoDeployment) {
		return errors.New("failed to wait for the Secrets' cache sync")
	}
	if err := kubeutils.CRDsInstalled(c.apiext, "clusterpolicies.kyverno.io", "policies.kyverno.io"); err != nil {
		return fmt.Errorf("sanity checks failed: %w", err)
	}
	kubeInformer := kubeinformers.NewSharedInformerFactory(c.kube, o.resyncPeriod)
	kubeKyvernoInformer := kubeinformers.NewSharedInformerFactoryWithOptions(c.kube, o.resyncPeriod, kubeinformers.WithNamespace(ns))
	kyvernoInformer := kyvernoinformer.NewSharedInformerFactory(c.kyverno, o.resyncPeriod)

	certRenewer := tls.NewCertRenewer(
		c.kube.CoreV1().Secrets(ns),
		tls.CertRenewalInterval,
		o.caValidity,
		o.tlsValidity,
		o.renewBefore,
		"",
		config.KyvernoServiceName(),
		config.DnsNames(config.KyvernoServiceName(), ns),
		ns,
		o.caSecretName,
		o.tlsSecretName,
		tls.RSA,
	)
	runtime := runtimeutils.NewRuntime(logger.WithName("runtime-checks"), "", kubeKyvernoInformer.Apps().V1().Deployments(), certRenewer)
	ctrls := []namedController{{certmanager.ControllerName, certmanager.Workers,
		certmanager.NewController(caSecret, tlsSecret, certRenewer, o.caSecretName, o.tlsSecretName, ns)}}
	ctrls = append(ctrls, webhookControllers(o, c, configuration, factories{kubeInformer, kubeKyvernoInformer, kyvernoInformer},
		caSecret, kyvernoDeployment, runtime)...)

	kubeInformer.Start(ctx.Done())
	kubeKyvernoInformer.Start(ctx.Done())
	kyvernoInformer.Start(ctx.Done())
	if err := waitForCacheSync(ctx, kubeInformer, kubeKyvernoInformer, kyvernoInformer); err != nil {
		return err
	}
	if o.admitAddress != "" {
		if err := serveAdmit(ctx, logger, o.admitAddress, func() (*corev1.Secret, error) {
			return tlsSecret.Lister().Secrets(ns).Get(o.tlsSecretName)
		}); err != nil {
			return err
		}
	}
	for _, nc := range ctrls {
		logger.Info("starting controller", "name", nc.name, "workers", nc.workers)
		go nc.ctrl.Run(ctx, nc.workers)
	}
	logger.Info("kyverno-writer running", "namespace", ns, "caSecretName", o.caSecretName, "tlsSecretName", o.tlsSecretName)
	<-ctx.Done()
	logger.Info("stopped")
	return nil
}

// namedController is a controller with cmd/kyverno's name and worker count.
type namedController struct {
	name    string
	workers int
	ctrl    controllers.Controller
}

// startConfigController loads the kyverno ConfigMap (INIT_CONFIG) into the
// configuration and keeps it current, as cmd/internal's config controller.
func startConfigController(ctx context.Context, kube kubernetes.Interface, resync time.Duration) (config.Configuration, error) {
	configuration := config.NewDefaultConfiguration(false)
	cc := genericconfigmapcontroller.NewController("config-controller", kube, resync,
		config.KyvernoNamespace(), config.KyvernoConfigMapName(),
		func(_ context.Context, cm *corev1.ConfigMap) error {
			configuration.Load(cm)
			return nil
		})
	if err := cc.WarmUp(ctx); err != nil {
		return nil, fmt.Errorf("init config controller: %w", err)
	}
	go cc.Run(ctx, 1)
	return configuration, nil
}
