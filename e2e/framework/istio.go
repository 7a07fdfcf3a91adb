package framework

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"path/filepath"
	"testing"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// IstioIntermediate is a plugged-in CA as Istio's documentation makes one
// (tools/certs): an intermediate CA signed by a root, which istiod signs
// with (its own serving certificate among what it signs).
type IstioIntermediate struct {
	Root            *CA
	Cert            *x509.Certificate
	CertPEM, KeyPEM []byte
}

// NewIstioIntermediate issues an ECDSA P-256 intermediate CA named cn,
// signed by root and valid as long as it.
func NewIstioIntermediate(t testing.TB, root *CA, cn string) *IstioIntermediate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"webhook-guard e2e"}},
		NotBefore:             root.Cert.NotBefore,
		NotAfter:              root.Cert.NotAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, root.Cert, &key.PublicKey, root.Key)
	if err != nil {
		t.Fatalf("issue intermediate %q: %v", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &IstioIntermediate{
		Root:    root,
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
}

// CACerts is the data of Secret cacerts for istiod signing with in and
// trusting roots: root-cert.pem is IstioRoots(roots...), what istiod writes
// into every caBundle.
func (in *IstioIntermediate) CACerts(roots ...*CA) map[string][]byte {
	return map[string][]byte{
		"ca-cert.pem":    in.CertPEM,
		"ca-key.pem":     in.KeyPEM,
		"cert-chain.pem": append(bytes.Clone(in.CertPEM), in.Root.PEM...),
		IstioRootKey:     IstioRoots(roots...),
	}
}

// IstioRoots is a root-cert.pem holding roots, in order.
func IstioRoots(roots ...*CA) []byte {
	var out []byte
	for _, r := range roots {
		out = append(out, r.PEM...)
	}
	return out
}

// Istio is istiod's install in the suite's cluster and the e2e/writers/istio
// process that runs its webhook writers (the sidecar injector's
// WebhookCertPatcher and the validation controller, with the plugged-in CA
// and the validation webhook), acting as
// system:serviceaccount:istio-system:istiod with the RBAC of Istio's chart.
type Istio struct {
	User envtest.User
	// Bin is the built binary; Kubeconfig its identity; CertsDir its
	// ROOT_CA_DIR, Secret cacerts as the kubelet projects it.
	Bin, Kubeconfig, CertsDir string
	// HTTPSPort serves its webhooks (the validators' URL); MonitoringPort
	// its /metrics.
	HTTPSPort, MonitoringPort int
	// Log holds its stdout and stderr (Istio's text lines).
	Log *Buffer
	// StartedAt is when the process was last started.
	StartedAt time.Time

	env  *Env
	rel  istioRelease
	proc process
}

// istioReadyLine is what the writer logs once its writers are started,
// just before it serves its webhooks.
const istioReadyLine = "starting webhook service at"

// InstallIstio installs Istio's charts for an istiod outside the cluster
// (installIstioCharts): CRDs, istiod's RBAC and ConfigMaps, and its three
// webhook configurations with no caBundle and the validators failing open.
// Start runs istiod once PlugCA put its CA in place. The process is
// stopped by t.Cleanup and its log printed when the test failed.
func InstallIstio(t testing.TB, env *Env) *Istio {
	t.Helper()
	i := &Istio{
		User:           ServiceAccountUser(IstioNamespace, IstioServiceAccount),
		Bin:            WriterBinary(t, "istio-writer"),
		CertsDir:       filepath.Join(t.TempDir(), "cacerts"),
		HTTPSPort:      FreePort(t),
		MonitoringPort: FreePort(t),
		Log:            &Buffer{},
		env:            env,
	}
	i.rel = installIstioCharts(t, env, i.HTTPSPort)
	i.Kubeconfig = env.Kubeconfig(t, i.User)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- istio-writer log (last 40 lines) ---\n%s", i.Log.Tail(40))
		}
		i.Stop(t)
	})
	return i
}

// PlugCA puts data into Secret cacerts as the operator does (the admin,
// Istio's "plug in CA certificates": create, or replace its data), then,
// kubeletDelay later, into CertsDir as the kubelet projects a mounted
// Secret (an atomic swap of the whole directory), which is what istiod
// watches. It returns when the directory was swapped.
func (i *Istio) PlugCA(t testing.TB, data map[string][]byte, kubeletDelay time.Duration) time.Time {
	t.Helper()
	ctx := context.Background()
	secrets := i.env.AdminKube.CoreV1().Secrets(IstioNamespace)
	s, err := secrets.Get(ctx, IstioCASecret, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: IstioCASecret}, Data: data}, metav1.CreateOptions{})
	case err == nil:
		s.Data = data
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("write Secret %s/%s: %v", IstioNamespace, IstioCASecret, err)
	}
	time.Sleep(kubeletDelay)
	WriteSecretDir(t, i.CertsDir, data)
	return time.Now()
}

// SecretRoots is root-cert.pem of Secret cacerts, read as the admin.
func (i *Istio) SecretRoots(t testing.TB) []byte {
	t.Helper()
	s, err := i.env.AdminKube.CoreV1().Secrets(IstioNamespace).Get(context.Background(), IstioCASecret, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read Secret %s/%s: %v", IstioNamespace, IstioCASecret, err)
	}
	return s.Data[IstioRootKey]
}

// Start runs the writer (again, after Stop) with the environment the
// chart gives istiod's container and ROOT_CA_DIR=CertsDir, and waits until
// it serves its webhooks (at most 30 s).
func (i *Istio) Start(t testing.TB) {
	t.Helper()
	Eventually(t, 10*time.Second, i.User.Name+" may list what istiod's writers watch (chart RBAC)", func() bool {
		kube := i.Client(t).Kube
		one := metav1.ListOptions{Limit: 1}
		_, e1 := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(context.Background(), one)
		_, e2 := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(context.Background(), one)
		_, e3 := kube.CoreV1().ConfigMaps(IstioNamespace).List(context.Background(), one)
		return e1 == nil && e2 == nil && e3 == nil
	})
	args := []string{
		"--kubeconfig", i.Kubeconfig,
		"--httpsAddr", fmt.Sprintf("127.0.0.1:%d", i.HTTPSPort),
		"--monitoringAddr", fmt.Sprintf("127.0.0.1:%d", i.MonitoringPort),
	}
	env := append(i.rel.writerEnv(t, "istiod-e2e"), "ROOT_CA_DIR="+i.CertsDir)
	i.StartedAt = i.proc.startReady(t, "istio-writer", i.Bin, args, env, i.Log, 30*time.Second,
		fmt.Sprintf("%q in its log (its writers are started)", istioReadyLine), logHas(istioReadyLine))
}

// Stop terminates the writer (SIGTERM, then SIGKILL after 10 s). It is
// safe to call more than once.
func (i *Istio) Stop(t testing.TB) {
	t.Helper()
	i.proc.stop(t, "istio-writer")
}

// Client is a framework Client acting as istiod's identity with the
// chart's RBAC only, to write as it from outside its process.
func (i *Istio) Client(t testing.TB) *Client {
	t.Helper()
	return i.env.actingAs(t, i.User)
}

// Bundles reads the caBundle of every IstioTargets configuration, by
// "Kind/name", one per entry.
func (i *Istio) Bundles(t testing.TB) map[string][][]byte {
	t.Helper()
	return targetBundles(t, i.env, IstioTargets)
}

// WaitInjected polls every 10 ms until every caBundle of IstioTargets is
// ca, byte for byte, and returns how long that took; after timeout it
// returns an error naming the configurations that do not hold it.
func (i *Istio) WaitInjected(t testing.TB, ca []byte, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	return waitTargetBundles(t, i.env, IstioTargets, "istiod", ca, timeout)
}

// FailOpen names the validators' entries whose failurePolicy is not Fail.
func (i *Istio) FailOpen(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, name := range []string{IstioValidator, IstioDefaultValidator} {
		o, err := i.env.AdminKube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get ValidatingWebhookConfiguration %s: %v", name, err)
		}
		for _, w := range o.Webhooks {
			if w.FailurePolicy == nil || *w.FailurePolicy != admv1.Fail {
				out = append(out, name+"/"+w.Name)
			}
		}
	}
	return out
}

// IstioGatewayGVR is Istio's Gateway, the kind istiod's validation
// controller sends its dry run of.
var IstioGatewayGVR = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "gateways"}

// DryRunInvalidGateway sends, as the admin, the dry-run CREATE istiod's
// validation controller sends before it fails its validators closed: a
// Gateway istiod's validation webhook always rejects. kube-apiserver calls
// the webhook over TLS with the caBundle istiod wrote, so "denied the
// request" in the error means it trusted the certificate istiod serves;
// a TLS failure is an error "failed calling webhook" (or none, when the
// validators still fail open).
func (i *Istio) DryRunInvalidGateway(ctx context.Context) error {
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "Gateway",
		"metadata": map[string]any{
			"name": "e2e-invalid-gateway", "namespace": IstioNamespace,
			"labels":      map[string]any{"istio.io/rev": IstioRevision},
			"annotations": map[string]any{"internal.istio.io/webhook-always-reject": "true"},
		},
		"spec": map[string]any{},
	}}
	_, err := dynamic.NewForConfigOrDie(i.env.Admin).Resource(IstioGatewayGVR).Namespace(IstioNamespace).
		Create(ctx, gw, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// Metrics scrapes the writer's /metrics: istiod's own counters, among
// them webhook_patch_attempts_total and webhook_patch_failures_total of
// the injector's patcher.
func (i *Istio) Metrics(t testing.TB) Metrics {
	t.Helper()
	return scrapeMetrics(t, "istio-writer", fmt.Sprintf("http://127.0.0.1:%d/metrics", i.MonitoringPort))
}

// RefusedInLog are istiod's log lines about a write kube-apiserver
// refused (by a webhook or a policy; not a conflict).
func (i *Istio) RefusedInLog() []string { return refusedLines(i.Log) }

// InstallIstiodWorkload creates the chart's istiod Deployment and Service
// (nothing runs the Deployment's pods): what `webhook-guard discover`
// follows from the injector's Service to the service account that writes
// it, and to the Secret it mounts.
func (i *Istio) InstallIstiodWorkload(t testing.TB) {
	t.Helper()
	createObjects(t, i.env, IstioNamespace, i.rel.workload)
}
