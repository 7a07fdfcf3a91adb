// Command rotator runs the Gatekeeper family's certificate rotator,
// github.com/open-policy-agent/cert-controller's pkg/rotator, unmodified,
// configured as Gatekeeper's main.go configures it: controller-runtime's
// config (no client-side rate limit) with a gatekeeper/... user agent (so
// kube-apiserver's field manager is "gatekeeper"), a manager without leader
// election (every Gatekeeper replica rotates), EnableReadinessCheck, and the
// CA and serving certificate kept in one Secret (ca.crt, ca.key, tls.crt,
// tls.key). It writes the Secret's ca.crt, byte for byte, into every
// webhooks[] entry of the named configurations (replacing the caBundle).
//
// The e2e suite (e2e/framework/rotator.go) runs it as its own service
// account against the suite's kube-apiserver. It logs JSON lines to stderr.
//
// The rotator holds its webhook writes back, and does not report ready,
// until tls.crt exists in --cert-dir (the Secret mounted into Gatekeeper's
// pod); like the kubelet, this command projects the Secret into --cert-dir.
//
// When it rotates: the rotator regenerates the CA (and the serving
// certificate with it) whenever ca.crt or ca.key is missing, does not parse
// or does not match, or the CA is not valid at now+--lookahead (its expiry
// check); only the serving certificate when tls.crt/tls.key fail the same
// check. It checks on start, every --rotation-check-frequency, and on every
// event of the Secret or of a named configuration.
package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// names is a repeatable string flag.
type names []string

func (n *names) String() string     { return strings.Join(*n, ",") }
func (n *names) Set(v string) error { *n = append(*n, v); return nil }

func main() {
	var (
		namespace, secret, certDir      string
		caName, caOrganization, dnsName string
		fieldOwner, userAgent           string
		validating, mutating            names
		caDuration, serverDuration      time.Duration
		lookahead, checkEvery           time.Duration
		projectEvery                    time.Duration
		restartOnRefresh                bool
	)
	// --kubeconfig is controller-runtime's own flag (registered on the
	// global FlagSet), read by ctrl.GetConfigOrDie as in Gatekeeper.
	flag.StringVar(&namespace, "namespace", "gatekeeper-system", "Namespace of the certificate Secret.")
	flag.StringVar(&secret, "secret", "gatekeeper-webhook-server-cert", "The certificate Secret (ca.crt, ca.key, tls.crt, tls.key); it must exist.")
	flag.Var(&validating, "validating", "A ValidatingWebhookConfiguration to inject the CA into (repeatable).")
	flag.Var(&mutating, "mutating", "A MutatingWebhookConfiguration to inject the CA into (repeatable).")
	flag.StringVar(&certDir, "cert-dir", "", "Where the Secret is projected, as the kubelet mounts it into Gatekeeper's pod (required).")
	flag.StringVar(&caName, "ca-name", "gatekeeper-ca", "CommonName (and DNS name) of the generated CA; Gatekeeper's value by default.")
	flag.StringVar(&caOrganization, "ca-organization", "gatekeeper", "Organization of the generated CA; Gatekeeper's value by default.")
	flag.StringVar(&dnsName, "dns-name", "", "DNS name of the serving certificate (default gatekeeper-webhook-service.<namespace>.svc, as Gatekeeper).")
	flag.StringVar(&fieldOwner, "field-owner", "", "The rotator's FieldOwner for webhook updates; empty (Gatekeeper's setting) leaves the field manager to the user agent.")
	flag.StringVar(&userAgent, "user-agent", "gatekeeper/v0.0.0-e2e ("+runtime.GOOS+"/"+runtime.GOARCH+") e2e/rotator",
		"User agent; Gatekeeper sets gatekeeper/<version> (<os>/<arch>) <commit>/<date>, so its field manager is \"gatekeeper\". Empty: client-go's default (the binary's name).")
	flag.DurationVar(&caDuration, "ca-cert-duration", 0, "CaCertDuration: lifetime of a generated CA (0: the package's 10 years).")
	flag.DurationVar(&serverDuration, "server-cert-duration", 0, "ServerCertDuration: lifetime of a serving certificate (0: the package's 1 year).")
	flag.DurationVar(&lookahead, "lookahead", 0, "LookaheadInterval: a certificate not valid at now+lookahead is regenerated (0: the package's 90 days).")
	flag.DurationVar(&checkEvery, "rotation-check-frequency", 0, "RotationCheckFrequency: how often the certificates are checked besides Secret and webhook events (0: the package's 12 hours).")
	flag.DurationVar(&projectEvery, "project-interval", 500*time.Millisecond, "How often the Secret is re-projected into --cert-dir.")
	flag.BoolVar(&restartOnRefresh, "restart-on-secret-refresh", false, "RestartOnSecretRefresh: exit 0 after writing new certificates (Gatekeeper leaves it off).")
	flag.Parse()

	logger := zap.New(zap.UseDevMode(false), zap.WriteTo(os.Stderr), func(o *zap.Options) {
		o.TimeEncoder = zapcore.RFC3339NanoTimeEncoder
	})
	// client-go's klog lines stay klog's own text on stderr.
	ctrl.SetLogger(logger)
	log := logger.WithName("e2e-rotator")

	if certDir == "" {
		log.Error(errors.New("--cert-dir is required"), "bad flags")
		os.Exit(2)
	}
	// As Gatekeeper: controller-runtime's config (client-side rate limiting
	// off), Gatekeeper's user agent.
	cfg := ctrl.GetConfigOrDie()
	cfg.UserAgent = userAgent
	if dnsName == "" {
		dnsName = "gatekeeper-webhook-service." + namespace + ".svc"
	}
	cr := &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: namespace, Name: secret},
		CertDir:        certDir,
		CAName:         caName,
		CAOrganization: caOrganization,
		DNSName:        dnsName,
		IsReady:        make(chan struct{}),
		// Gatekeeper's webhook also calls external data providers, so its
		// serving certificate is good for client auth too.
		ExtKeyUsages:           &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		EnableReadinessCheck:   true,
		RequireLeaderElection:  false,
		FieldOwner:             fieldOwner,
		CaCertDuration:         caDuration,
		ServerCertDuration:     serverDuration,
		LookaheadInterval:      lookahead,
		RotationCheckFrequency: checkEvery,
		RestartOnSecretRefresh: restartOnRefresh,
	}
	for _, n := range validating {
		cr.Webhooks = append(cr.Webhooks, rotator.WebhookInfo{Name: n, Type: rotator.Validating})
	}
	for _, n := range mutating {
		cr.Webhooks = append(cr.Webhooks, rotator.WebhookInfo{Name: n, Type: rotator.Mutating})
	}
	if err := run(log, cfg, cr, projectEvery); err != nil {
		log.Error(err, "rotator failed")
		os.Exit(1)
	}
}

func run(log logr.Logger, cfg *rest.Config, cr *rotator.CertRotator, projectEvery time.Duration) error {
	if len(cr.Webhooks) == 0 {
		return errors.New("name at least one --validating or --mutating configuration")
	}
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
	})
	if err != nil {
		return fmt.Errorf("create the manager: %w", err)
	}
	if err := rotator.AddRotator(mgr, cr); err != nil {
		return fmt.Errorf("add the rotator: %w", err)
	}

	ctx := ctrl.SetupSignalHandler()
	go project(ctx, log, mgr.GetAPIReader(), cr.SecretKey, cr.CertDir, projectEvery)
	go func() {
		select {
		case <-cr.IsReady:
			log.Info("rotator ready: certificates mounted and the CA injected")
		case <-ctx.Done():
		}
	}()
	log.Info("starting", "secret", cr.SecretKey.String(), "webhooks", cr.Webhooks, "caName", cr.CAName,
		"caCertDuration", cr.CaCertDuration.String(), "lookahead", cr.LookaheadInterval.String(),
		"rotationCheckFrequency", cr.RotationCheckFrequency.String(), "fieldOwner", cr.FieldOwner, "userAgent", cfg.UserAgent)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	log.Info("stopped")
	return nil
}

// project writes the Secret's keys into dir, as the kubelet keeps a Secret
// volume up to date (each file replaced by rename), until ctx ends.
func project(ctx context.Context, log logr.Logger, r client.Reader, key types.NamespacedName, dir string, every time.Duration) {
	written := map[string]string{}
	for {
		s := &corev1.Secret{}
		if err := r.Get(ctx, key, s); err == nil {
			for k, v := range s.Data {
				if written[k] == string(v) {
					continue
				}
				if err := writeAtomic(filepath.Join(dir, k), v); err != nil {
					log.Error(err, "project the Secret", "key", k)
					continue
				}
				written[k] = string(v)
			}
		} else if ctx.Err() == nil {
			log.Error(err, "read the Secret to project it", "secret", key.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
