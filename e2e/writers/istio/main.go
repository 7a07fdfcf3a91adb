// Command istio-writer runs istiod's own code that writes webhook
// configurations (istio.io/istio at the commit go.mod pins), wired as
// istiod's pilot/pkg/bootstrap wires it:
//
//   - webhooks.WebhookCertPatcher (pkg/webhooks) watches every
//     MutatingWebhookConfiguration and, in those labelled istio.io/rev=
//     $REVISION, writes the CA bundle into every entry whose name ends in
//     sidecar-injector.istio.io (a full UPDATE from its informer's copy), on
//     every event of such a configuration and every change of the bundle;
//   - the validation controller (pkg/webhooks/validation/controller) does
//     the same for the ValidatingWebhookConfigurations labelled
//     istio.io/rev=$REVISION (Istio's chart installs two:
//     istio-validator-<ns> and, from the base chart, istiod-default-validator)
//     and switches their failurePolicy from Ignore to Fail once a dry-run
//     CREATE of an invalid Gateway is denied by istiod's own validation
//     webhook;
//   - both read the CA bundle from the keycertbundle.Watcher that istiod's
//     built-in CA fills. The CA is the plugged-in one (security/pkg/pki/ca,
//     NewPluggedCertIstioCAOptions): Secret cacerts mounted at $ROOT_CA_DIR
//     (ca-cert.pem, ca-key.pem, cert-chain.pem, root-cert.pem). The bundle is
//     root-cert.pem byte for byte, read at start and again on every change of
//     the directory (fsnotify): istiod accepts a new root-cert.pem only with
//     ISTIO_MULTIROOT_MESH=true and only when one bundle contains the other
//     (old+new, then new), verifies the signing certificate against it, and
//     issues itself a new serving certificate;
//   - istiod's webhook HTTPS server (--httpsAddr, TLS from the same watcher,
//     reloaded on every change) with the validation webhook
//     (pkg/webhooks/validation/server) on /validate, which kube-apiserver
//     calls for that dry run and for every Istio config write.
//
// Copied from pilot/pkg/bootstrap, where it is unexported (the functions
// named below say which): the CA's start (createIstioCA's plugged-in
// branch), the first certificates (initDNSCertsIstiod's plugged-in branch,
// getDNSNames), the reaction to a change of $ROOT_CA_DIR (handleEvent,
// handleCACertsFileWatch, updateRootCertAndGenKeyCert), the serving
// certificate's reload (loadIstiodCert) and the conditions under which
// istiod starts each writer (initSidecarInjector: the injector's ConfigMap
// exists; initConfigValidation). Istiod's environment variables keep their
// names and defaults (POD_NAMESPACE, REVISION, ROOT_CA_DIR,
// ISTIOD_CUSTOM_HOST, ISTIO_MULTIROOT_MESH, INJECTION_WEBHOOK_CONFIG_NAME,
// VALIDATION_WEBHOOK_CONFIG_NAME), and so do its flags (--kubeconfig,
// --httpsAddr, --monitoringAddr, --domain).
//
// Left out, because none of it writes a webhook configuration: xDS and the
// CA's gRPC service, the sidecar injection handler itself (the patcher
// starts once inject.NewWebhook succeeds; the injector needs the mesh
// environment, and no pod is created), the namespace controller (which
// copies the same bundle into ConfigMap istio-ca-root-cert of every
// namespace), CRL files, the self-signed CA and its root rotator (the
// plugged-in CA replaces them), and the workload trust bundle that
// ISTIO_MULTIROOT_MESH also updates for xDS.
//
// The e2e suite (e2e/framework/istio.go) runs it as
// system:serviceaccount:istio-system:istiod with the RBAC of Istio's chart.
// It logs Istio's text lines on stdout.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"istio.io/istio/pilot/pkg/features"
	"istio.io/istio/pilot/pkg/keycertbundle"
	"istio.io/istio/pkg/cluster"
	"istio.io/istio/pkg/config/schema/collections"
	"istio.io/istio/pkg/env"
	kubelib "istio.io/istio/pkg/kube"
	"istio.io/istio/pkg/log"
	"istio.io/istio/pkg/monitoring"
	"istio.io/istio/pkg/util/sets"
	"istio.io/istio/pkg/webhooks"
	"istio.io/istio/pkg/webhooks/validation/controller"
	"istio.io/istio/pkg/webhooks/validation/server"
	seccmd "istio.io/istio/security/pkg/cmd"
	"istio.io/istio/security/pkg/pki/ca"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// Istiod's environment, registered as pilot/pkg/bootstrap registers it
// (options.go, istio_ca.go, sidecarinjector.go).
var (
	podNamespace     = env.Register("POD_NAMESPACE", "istio-system", "").Get()
	revision         = env.Register("REVISION", "", "").Get()
	localCertDir     = env.Register("ROOT_CA_DIR", "./etc/cacerts", "Location of a local or mounted CA root").Get()
	injectionEnabled = env.Register("INJECT_ENABLED", true, "Enable mutating webhook handler.").Get()
)

// Istiod's constants and defaults for what this runs (pilot/pkg/bootstrap:
// sidecarinjector.go, istio_ca.go, server.go).
const (
	webhookName                  = "sidecar-injector.istio.io"
	defaultInjectorConfigMapName = "istio-sidecar-injector"
	caRSAKeySize                 = 2048
	clusterID                    = cluster.ID("Kubernetes")
)

// options are pilot-discovery's flags this uses, with its defaults.
type options struct {
	kubeconfig     string
	httpsAddr      string
	monitoringAddr string
	domain         string
}

// istiod holds what bootstrap.Server holds for these components.
type istiod struct {
	opts       options
	kubeClient kubelib.Client
	ca         *ca.IstioCA
	fileBundle ca.SigningCAFileBundle
	dnsNames   []string
	// certBundle is bootstrap's istiodCertBundleWatcher: the serving
	// certificate and the CA bundle every writer reads.
	certBundle *keycertbundle.Watcher

	certMu     sync.RWMutex
	istiodCert *tls.Certificate
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "Use a Kubernetes configuration file instead of in-cluster configuration")
	flag.StringVar(&o.httpsAddr, "httpsAddr", ":15017", "Discovery service HTTPS address (the webhooks)")
	flag.StringVar(&o.monitoringAddr, "monitoringAddr", ":15014", "HTTP address to use for pilot's self-monitoring information")
	flag.StringVar(&o.domain, "domain", "cluster.local", "DNS domain suffix")
	flag.Parse()
	if err := log.Configure(log.DefaultOptions()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stop := make(chan struct{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; close(stop) }()
	if err := run(o, stop); err != nil {
		log.Errorf("istio-writer: %v", err)
		os.Exit(1)
	}
}

func run(o options, stop chan struct{}) error {
	s := &istiod{opts: o, certBundle: keycertbundle.NewWatcher()}
	// initKubeClient.
	cfg, err := kubelib.DefaultRestConfig(o.kubeconfig, "", func(c *rest.Config) {
		c.QPS, c.Burst = 80, 160 // KubernetesAPIQPS, KubernetesAPIBurst
	})
	if err != nil {
		return fmt.Errorf("failed creating kube config: %w", err)
	}
	if s.kubeClient, err = kubelib.NewClient(kubelib.NewClientConfigForRestConfig(cfg), clusterID); err != nil {
		return fmt.Errorf("failed creating kube client: %w", err)
	}
	monitoringHandler, err := monitoring.RegisterPrometheusExporter(nil, nil)
	if err != nil {
		return fmt.Errorf("could not set up prometheus exporter: %w", err)
	}

	// maybeCreateCA, then initIstiodCerts, as NewServer orders them.
	if err := s.createIstioCA(stop); err != nil {
		return fmt.Errorf("failed to create CA: %w", err)
	}
	if err := s.initDNSCertsIstiod(); err != nil {
		return err
	}
	if err := s.loadIstiodCert(); err != nil {
		return fmt.Errorf("first time load IstiodCert failed: %w", err)
	}
	_, reloadCh := s.certBundle.AddWatcher()

	// initSecureWebhookServer, initSidecarInjector, initConfigValidation:
	// what they register runs once everything is built, in this order.
	mux := http.NewServeMux()
	var startFuncs []func()
	startFuncs = append(startFuncs, func() { go s.reloadIstiodCert(reloadCh, stop) })
	injector, err := s.initSidecarInjector()
	if err != nil {
		return fmt.Errorf("error initializing sidecar injector: %w", err)
	}
	if injector && features.InjectionWebhookConfigName != "" {
		startFuncs = append(startFuncs, func() {
			// No leader election - different istiod revisions will patch their own cert.
			patcher, err := webhooks.NewWebhookCertPatcher(s.kubeClient, revision, webhookName, s.certBundle)
			if err != nil {
				log.Errorf("failed to create webhook cert patcher: %v", err)
				return
			}
			go patcher.Run(stop)
		})
	}
	if _, err := server.New(server.Options{Schemas: collections.PilotGatewayAPI(), DomainSuffix: o.domain, Mux: mux}); err != nil {
		return fmt.Errorf("error initializing config validator: %w", err)
	}
	if features.ValidationWebhookConfigName != "" {
		startFuncs = append(startFuncs, func() {
			log.Infof("Starting validation controller")
			go controller.NewValidatingWebhookController(s.kubeClient, revision, podNamespace, s.certBundle).Run(stop)
		})
	}
	// The kube client's informers start last: every informer is known.
	startFuncs = append(startFuncs, func() { go s.kubeClient.RunAndWait(stop) })
	for _, f := range startFuncs {
		f()
	}

	go serveMonitoring(o.monitoringAddr, monitoringHandler, stop)
	return s.serveWebhooks(mux, stop)
}

// createIstioCA is bootstrap's createIstioCA for a complete plugged-in
// bundle in ROOT_CA_DIR (istiod's file format; the kubernetes.io/tls one is
// not supported here): the CA, the directory's watcher, the CA's Run.
func (s *istiod) createIstioCA(stop chan struct{}) error {
	s.fileBundle = ca.SigningCAFileBundle{
		RootCertFile:    path.Join(localCertDir, ca.RootCertFile),
		CertChainFiles:  []string{path.Join(localCertDir, ca.CertChainFile)},
		SigningCertFile: path.Join(localCertDir, ca.CACertFile),
		SigningKeyFile:  path.Join(localCertDir, ca.CAPrivateKeyFile),
	}
	log.Info("Use local CA certificate")
	caOpts, err := ca.NewPluggedCertIstioCAOptions(s.fileBundle, seccmd.DefaultWorkloadCertTTL, seccmd.DefaultMaxWorkloadCertTTL, caRSAKeySize)
	if err != nil {
		return fmt.Errorf("failed to create an istiod CA: %w", err)
	}
	// Istiod starts the directory's watcher just before it builds the CA;
	// here the CA exists before the first event can need it.
	if s.ca, err = ca.NewIstioCA(caOpts); err != nil {
		return fmt.Errorf("failed to create an istiod CA: %w", err)
	}
	if err := s.initCACertsWatcher(stop); err != nil {
		return err
	}
	s.ca.Run(stop)
	return nil
}

// initDNSCertsIstiod is bootstrap's for a plugged-in CA: a serving
// certificate for getDNSNames signed by the CA, and root-cert.pem as the
// bundle the writers patch.
func (s *istiod) initDNSCertsIstiod() error {
	s.dnsNames = getDNSNames()
	log.Infof("initializing Istiod DNS certificates host: %s, custom host: %s", s.dnsNames[0], features.IstiodServiceCustomHost)
	certChain, keyPEM, err := s.ca.GenKeyCert(s.dnsNames, seccmd.DefaultSelfSignedCACertTTL, false)
	if err != nil {
		return fmt.Errorf("failed generating istiod key cert %w", err)
	}
	log.Infof("Use root cert from %v", s.fileBundle.RootCertFile)
	caBundle, err := os.ReadFile(s.fileBundle.RootCertFile)
	if err != nil {
		return fmt.Errorf("failed reading %s: %w", s.fileBundle.RootCertFile, err)
	}
	s.certBundle.SetAndNotify(keyPEM, certChain, caBundle)
	return nil
}

// getDNSNames is bootstrap's: ISTIOD_CUSTOM_HOST, then the known Service
// names in the namespace, sorted.
func getDNSNames() []string {
	var hosts []string
	if features.IstiodServiceCustomHost != "" {
		hosts = strings.Split(features.IstiodServiceCustomHost, ",")
	}
	sans := sets.New(hosts...)
	known := []string{"istiod", "istiod-remote", "istio-pilot"}
	if revision != "" && revision != "default" {
		known = append(known, "istiod-"+revision)
	}
	for _, h := range known {
		sans.Insert(fmt.Sprintf("%s.%s.svc", h, podNamespace))
	}
	names := sets.SortedList(sans)
	log.Infof("Discover server subject alt names: %v", names)
	return names
}

// initCACertsWatcher is bootstrap's initCACertsAndCRLWatcher.
func (s *istiod) initCACertsWatcher(stop chan struct{}) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("failed to add CAcerts watcher: %w", err)
	}
	if err := w.Add(localCertDir); err != nil {
		return fmt.Errorf("failed to add CAcerts file watcher: %w", err)
	}
	log.Infof("Added cacerts files watcher at %v", localCertDir)
	go s.handleCACertsFileWatch(w, stop)
	return nil
}

// handleCACertsFileWatch is bootstrap's: a write or create in the
// directory, then 100 ms of quiet, then handleEvent.
func (s *istiod) handleCACertsFileWatch(w *fsnotify.Watcher, stop chan struct{}) {
	var timerC <-chan time.Time
	for {
		select {
		case <-timerC:
			timerC = nil
			s.handleEvent()
		case event, ok := <-w.Events:
			if !ok {
				return
			}
			if event.Has(fsnotify.Write) || event.Has(fsnotify.Create) {
				if timerC == nil {
					timerC = time.After(100 * time.Millisecond)
				}
			}
		case err := <-w.Errors:
			if err != nil {
				log.Errorf("failed to catch events on cacerts file: %v", err)
				return
			}
		case <-stop:
			return
		}
	}
}

// handleEvent is bootstrap's, without CRL files: a new root-cert.pem is
// taken only with ISTIO_MULTIROOT_MESH and when one bundle contains the
// other; the signing certificate is verified against it.
func (s *istiod) handleEvent() {
	log.Info("Update Istiod cacerts")
	newCABundle, err := os.ReadFile(s.fileBundle.RootCertFile)
	if err != nil {
		log.Errorf("failed reading root-cert.pem: %v", err)
		return
	}
	currentCABundle := s.ca.GetCAKeyCertBundle().GetRootCertPem()
	if !bytes.Equal(currentCABundle, newCABundle) {
		if !features.MultiRootMesh {
			log.Warn("Multi root is disabled, updating new ROOT-CA not supported")
			return
		}
		if pemBundleHasSubsetRelation(currentCABundle, newCABundle) {
			log.Info("Updating new ROOT-CA")
		} else {
			log.Warn("Updating new ROOT-CA not supported")
			return
		}
	}
	err = s.ca.GetCAKeyCertBundle().UpdateVerifiedKeyCertBundleFromFile(
		s.fileBundle.SigningCertFile,
		s.fileBundle.SigningKeyFile,
		s.fileBundle.CertChainFiles,
		s.fileBundle.RootCertFile,
		s.fileBundle.CRLFile,
	)
	if err != nil {
		log.Errorf("Failed to update new Plug-in CA certs: %v", err)
		return
	}
	if err := s.updateRootCertAndGenKeyCert(); err != nil {
		log.Errorf("Failed generating plugged-in istiod key cert: %v", err)
		return
	}
	log.Info("Istiod has detected the newly added intermediate CA and updated its key and certs accordingly")
}

// updateRootCertAndGenKeyCert is bootstrap's, without the workload trust
// bundle (xDS): a new serving certificate and the CA's roots, notified to
// every writer.
func (s *istiod) updateRootCertAndGenKeyCert() error {
	log.Infof("update root cert and generate new dns certs")
	caBundle := s.ca.GetCAKeyCertBundle().GetRootCertPem()
	certChain, keyPEM, err := s.ca.GenKeyCert(s.dnsNames, seccmd.DefaultSelfSignedCACertTTL, false)
	if err != nil {
		return err
	}
	s.certBundle.SetAndNotify(keyPEM, certChain, caBundle)
	return nil
}

// pemBundleHasSubsetRelation is bootstrap's: true when a ⊆ b or b ⊆ a,
// comparing the DER of their CERTIFICATE blocks.
func pemBundleHasSubsetRelation(a, b []byte) bool {
	certsA, certsB := pemToRawCertSet(a), pemToRawCertSet(b)
	if certsA.IsEmpty() || certsB.IsEmpty() {
		return false
	}
	return certsA.SupersetOf(certsB) || certsB.SupersetOf(certsA)
}

func pemToRawCertSet(pemData []byte) sets.String {
	certs := sets.New[string]()
	for {
		var block *pem.Block
		block, pemData = pem.Decode(pemData)
		if block == nil {
			return certs
		}
		if block.Type == "CERTIFICATE" {
			certs.Insert(string(block.Bytes))
		}
	}
}

// initSidecarInjector is bootstrap's decision to run the injector (and so
// the patcher): injection enabled and the injector's ConfigMap present.
func (s *istiod) initSidecarInjector() (bool, error) {
	if !injectionEnabled {
		log.Infof("Skipping sidecar injector, injection path is missing or disabled.")
		return false, nil
	}
	name := defaultInjectorConfigMapName
	if revision != "" && revision != "default" {
		name += "-" + revision
	}
	if _, err := s.kubeClient.Kube().CoreV1().ConfigMaps(podNamespace).Get(context.TODO(), name, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			log.Infof("Skipping sidecar injector, template not found")
			return false, nil
		}
		return false, err
	}
	log.Info("initializing sidecar injector")
	return true, nil
}

// loadIstiodCert is bootstrap's: the serving certificate from the watcher.
func (s *istiod) loadIstiodCert() error {
	b := s.certBundle.GetKeyCertBundle()
	keyPair, err := tls.X509KeyPair(b.CertPem, b.KeyPem)
	if err != nil {
		return fmt.Errorf("istiod loading x509 key pairs failed: %w", err)
	}
	log.Info("Istiod certificates are reloaded")
	s.certMu.Lock()
	s.istiodCert = &keyPair
	s.certMu.Unlock()
	return nil
}

// reloadIstiodCert is bootstrap's.
func (s *istiod) reloadIstiodCert(watchCh <-chan struct{}, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-watchCh:
			if err := s.loadIstiodCert(); err != nil {
				log.Errorf("reload istiod cert failed: %v", err)
			}
		}
	}
}

// serveWebhooks is istiod's https server (initSecureWebhookServer, Start)
// until stop.
func (s *istiod) serveWebhooks(mux *http.ServeMux, stop <-chan struct{}) error {
	srv := &http.Server{
		Addr:    s.opts.httpsAddr,
		Handler: mux,
		TLSConfig: &tls.Config{
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				s.certMu.RLock()
				defer s.certMu.RUnlock()
				if s.istiodCert != nil {
					return s.istiodCert, nil
				}
				return nil, errors.New("cert not initialized")
			},
			MinVersion: tls.VersionTLS12,
		},
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       90 * time.Second,
	}
	l, err := net.Listen("tcp", s.opts.httpsAddr)
	if err != nil {
		return err
	}
	log.Infof("starting webhook service at %s", l.Addr())
	go func() {
		<-stop
		_ = srv.Close()
	}()
	if err := srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// serveMonitoring serves istiod's /metrics (the patcher's and the
// validation controller's own counters among them) until stop.
func serveMonitoring(addr string, metrics http.Handler, stop <-chan struct{}) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		<-stop
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Errorf("monitoring server: %v", err)
	}
}
