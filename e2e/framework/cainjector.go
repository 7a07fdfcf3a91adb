package framework

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
)

// cert-manager's cainjector as cert-manager's chart deploys it.
const (
	CAInjectorNamespace      = "cert-manager"
	CAInjectorServiceAccount = "cert-manager-cainjector"
	// CAInjectorFieldManager is the server-side apply field manager of
	// cainjector's writes: the prefix of its user agent
	// (util.RestConfigWithUserAgent(cfg, "cainjector")).
	CAInjectorFieldManager = "cert-manager-cainjector"
	// caInjectorClusterRole is the chart's ClusterRole name for the
	// release name "cert-manager".
	caInjectorClusterRole = "cert-manager-cainjector"
)

// CAInjectorUser is the identity cainjector runs as.
var CAInjectorUser = ServiceAccountUser(CAInjectorNamespace, CAInjectorServiceAccount)

// CertificateGVR is cert-manager's Certificate resource.
var CertificateGVR = cmapi.SchemeGroupVersion.WithResource("certificates")

// caInjectorRules are the rules of the ClusterRole cert-manager v1.21.2's
// chart gives cainjector (deploy/charts/cert-manager/templates/cainjector-rbac.yaml),
// and nothing more. Its leader election Role is left out: leader election
// is off.
var caInjectorRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"cert-manager.io"}, Resources: []string{"certificates"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "create", "update", "patch"}},
	{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
	{APIGroups: []string{"apiregistration.k8s.io"}, Resources: []string{"apiservices"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
	{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
}

// CAInjectorOptions configure the cainjector process.
type CAInjectorOptions struct {
	// FeatureGates is cainjector's --feature-gates, e.g.
	// "CAInjectorMerging=false" (merging is on by default: GA in v1.21).
	FeatureGates string
	// Namespace restricts cainjector to one namespace (--namespace).
	Namespace string
	// Verbosity is klog's -v (default 2, cert-manager's info level, at
	// which cainjector logs each "Updated object").
	Verbosity int
	// TrustObjects also runs the APIService and CustomResourceDefinition
	// controllers (--trust-objects).
	TrustObjects bool
}

// CAInjector is cert-manager's real cainjector (e2e/writers/cainjector,
// built from the cert-manager module in go.mod) running as
// system:serviceaccount:cert-manager:cert-manager-cainjector.
type CAInjector struct {
	// Bin is the built binary, Kubeconfig its identity, Args its arguments.
	Bin, Kubeconfig string
	Args            []string
	// Log holds its stderr and stdout (klog text); it is printed when the
	// test fails. It spans restarts.
	Log *Buffer

	// controllers are the controllers Start waits for.
	controllers []string
	proc        process
}

// StartCAInjector provisions cainjector's identity with the chart's RBAC,
// runs it and waits until both of its controllers (Validating and Mutating
// WebhookConfigurations) run their workers. The environment needs
// Options.CertManagerCRDs. It is stopped by t.Cleanup, and its log is
// printed if the test failed.
func StartCAInjector(t testing.TB, env *Env, opts CAInjectorOptions) *CAInjector {
	t.Helper()
	ctx := context.Background()
	if _, err := env.AdminKube.Discovery().ServerResourcesForGroupVersion(cmapi.SchemeGroupVersion.String()); err != nil {
		t.Fatalf("StartCAInjector: cert-manager.io/v1 is not served (%v); start the environment with Options.CertManagerCRDs", err)
	}
	if opts.Verbosity == 0 {
		opts.Verbosity = 2
	}
	bin := BuildBinary(t, "./e2e/writers/cainjector")

	env.EnsureNamespace(t, CAInjectorNamespace)
	_, err := env.AdminKube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: caInjectorClusterRole, Labels: map[string]string{"app.kubernetes.io/component": "cainjector"}},
		Rules:      caInjectorRules,
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create cainjector's ClusterRole: %v", err)
	}
	env.bind(t, caInjectorClusterRole, caInjectorClusterRole, CAInjectorUser.Name)
	kubeconfig := env.Kubeconfig(t, CAInjectorUser)
	waitForCAInjectorRBAC(t, kubeconfig)

	c := &CAInjector{
		Bin:        bin,
		Kubeconfig: kubeconfig,
		Args:       []string{"--kubeconfig", kubeconfig, "--v", strconv.Itoa(opts.Verbosity)},
		Log:        &Buffer{},
	}
	if opts.FeatureGates != "" {
		c.Args = append(c.Args, "--feature-gates", opts.FeatureGates)
	}
	if opts.Namespace != "" {
		c.Args = append(c.Args, "--namespace", opts.Namespace)
	}
	c.controllers = []string{"validatingwebhookconfiguration", "mutatingwebhookconfiguration"}
	if opts.TrustObjects {
		c.Args = append(c.Args, "--trust-objects")
		c.controllers = append(c.controllers, "apiservice", "customresourcedefinition")
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- cainjector log (last 40 lines) ---\n%s", c.Log.Tail(40))
		}
		c.Stop(t)
	})
	c.Start(t)
	return c
}

// waitForCAInjectorRBAC waits until the authorizer's RBAC informer lets
// cainjector's identity list what it watches.
func waitForCAInjectorRBAC(t testing.TB, kubeconfig string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("load cainjector's kubeconfig: %v", err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx := context.Background()
	one := metav1.ListOptions{Limit: 1}
	var last error
	Eventually(t, 10*time.Second, CAInjectorUser.Name+" may list what cainjector watches (chart RBAC)", func() bool {
		_, last = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, one)
		if last == nil {
			_, last = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, one)
		}
		if last == nil {
			_, last = kube.CoreV1().Secrets("").List(ctx, one)
		}
		if last == nil {
			_, last = dyn.Resource(CertificateGVR).List(ctx, one)
		}
		return last == nil
	})
}

// caInjectorReadyLine is what controller-runtime logs once a controller's
// caches have synced and its workers start.
const caInjectorReadyLine = `"Starting workers"`

// Start runs cainjector (again, after Stop) and waits until each of its
// controllers runs its workers (at most 30 s).
func (c *CAInjector) Start(t testing.TB) {
	t.Helper()
	c.proc.startReady(t, "cainjector", c.Bin, c.Args, nil, c.Log, 30*time.Second,
		fmt.Sprintf("%s for each of its controllers %v", caInjectorReadyLine, c.controllers),
		func(since string) bool {
			for _, ctrl := range c.controllers {
				found := false
				for l := range strings.SplitSeq(since, "\n") {
					if strings.Contains(l, caInjectorReadyLine) && strings.Contains(l, `controller="`+ctrl+`"`) {
						found = true
						break
					}
				}
				if !found {
					return false
				}
			}
			return true
		})
}

// Stop terminates cainjector (SIGTERM, then SIGKILL after 10 s). It is safe
// to call more than once.
func (c *CAInjector) Stop(t testing.TB) {
	t.Helper()
	c.proc.stop(t, "cainjector")
}

// Running reports whether the process is alive.
func (c *CAInjector) Running() bool { return c.proc.running() }

// LinesContaining are cainjector's log lines holding s.
func (c *CAInjector) LinesContaining(s string) []string { return c.Log.Containing(s) }

// ApplyErrors are the log lines of writes kube-apiserver rejected: the
// reconciler logs "unable to apply target object with CA data" with the
// API error for each failed server-side apply of a caBundle.
func (c *CAInjector) ApplyErrors() []string {
	return c.LinesContaining(`"unable to apply target object with CA data"`)
}

// Updates are the log lines of successful applies ("Updated object", one
// per reconcile that wrote, including writes that changed nothing).
func (c *CAInjector) Updates() []string {
	return c.LinesContaining(`"Updated object"`)
}

// CertificateOptions describe a cert-manager Certificate.
type CertificateOptions struct {
	Namespace, Name string
	// SecretName is spec.secretName (default: Name).
	SecretName string
	// IssuerName names the CA Issuer of spec.issuerRef (default: Name+"-issuer").
	IssuerName string
	// DNSNames of the serving certificate (default: <Name>.<Namespace>.svc).
	DNSNames []string
	// AllowDirectInjection puts cert-manager.io/allow-direct-injection: "true"
	// into spec.secretTemplate.annotations, so cert-manager copies it onto
	// the Secret and cainjector honours inject-ca-from-secret for it.
	AllowDirectInjection bool
	// CA is the issuing CA (default: a new one).
	CA *CA
}

// IssuedCertificate is a Certificate and the Secret cert-manager issued for
// it, as a CA Issuer whose CA is a self-signed cert-manager Certificate
// writes it (ca.crt is that CA).
type IssuedCertificate struct {
	CertificateOptions
	// Leaf is the current tls.crt and tls.key.
	Leaf *ServingCert
	// CAs are the CAs the Secret's ca.crt has held, oldest first; the last
	// is the current one (also in CertificateOptions.CA).
	CAs []*CA
}

// InjectCAFrom is the value of cert-manager.io/inject-ca-from naming this
// Certificate.
func (c *IssuedCertificate) InjectCAFrom() string { return c.Namespace + "/" + c.Name }

// InjectCAFromSecret is the value of cert-manager.io/inject-ca-from-secret
// naming its Secret.
func (c *IssuedCertificate) InjectCAFromSecret() string { return c.Namespace + "/" + c.SecretName }

// CreateCertificate creates a cert-manager.io/v1 Certificate and the
// kubernetes.io/tls Secret cert-manager would have issued for it, in
// cert-manager's format: tls.crt, tls.key, ca.crt; the certificate-name,
// issuer-name, issuer-kind and issuer-group annotations and the
// certificate's details (common-name, alt-names, ip-sans, uri-sans);
// secretTemplate's annotations; the controller.cert-manager.io/fao label.
// Nothing runs cert-manager's controller: the test plays it.
func CreateCertificate(t testing.TB, env *Env, opts CertificateOptions) *IssuedCertificate {
	t.Helper()
	if opts.Namespace == "" || opts.Name == "" {
		t.Fatal("CreateCertificate: Namespace and Name are required")
	}
	if opts.SecretName == "" {
		opts.SecretName = opts.Name
	}
	if opts.IssuerName == "" {
		opts.IssuerName = opts.Name + "-issuer"
	}
	if len(opts.DNSNames) == 0 {
		opts.DNSNames = []string{opts.Name + "." + opts.Namespace + ".svc"}
	}
	if opts.CA == nil {
		opts.CA = NewCA(t, opts.Name+"-ca-0")
	}
	ctx := context.Background()
	env.EnsureNamespace(t, opts.Namespace)

	crt := &cmapi.Certificate{
		TypeMeta:   metav1.TypeMeta{APIVersion: cmapi.SchemeGroupVersion.String(), Kind: cmapi.CertificateKind},
		ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Namespace: opts.Namespace},
		Spec: cmapi.CertificateSpec{
			SecretName: opts.SecretName,
			DNSNames:   opts.DNSNames,
			IssuerRef:  cmmeta.IssuerReference{Name: opts.IssuerName, Kind: cmapi.IssuerKind, Group: "cert-manager.io"},
		},
	}
	if opts.AllowDirectInjection {
		crt.Spec.SecretTemplate = &cmapi.CertificateSecretTemplate{Annotations: map[string]string{cmapi.AllowsInjectionFromSecretAnnotation: "true"}}
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crt)
	if err != nil {
		t.Fatalf("convert the Certificate: %v", err)
	}
	if _, err := dynamic.NewForConfigOrDie(env.Admin).Resource(CertificateGVR).Namespace(opts.Namespace).
		Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Certificate %s/%s: %v", opts.Namespace, opts.Name, err)
	}

	c := &IssuedCertificate{CertificateOptions: opts, CAs: []*CA{opts.CA}}
	c.Leaf = opts.CA.Issue(t, opts.DNSNames[0], opts.DNSNames...)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: opts.SecretName, Namespace: opts.Namespace},
		Type:       corev1.SecretTypeTLS,
	}
	c.fill(secret)
	if _, err := env.AdminKube.CoreV1().Secrets(opts.Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the Certificate's Secret %s/%s: %v", opts.Namespace, opts.SecretName, err)
	}
	return c
}

// fill sets the Secret's data, annotations and label as cert-manager's
// issuing controller does for the current CA and leaf.
func (c *IssuedCertificate) fill(s *corev1.Secret) {
	s.Data = SecretData(c.CA, c.Leaf)
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	if c.AllowDirectInjection {
		s.Annotations[cmapi.AllowsInjectionFromSecretAnnotation] = "true"
	}
	var ips []string
	for _, ip := range c.Leaf.Cert.IPAddresses {
		ips = append(ips, ip.String())
	}
	s.Annotations[cmapi.CommonNameAnnotationKey] = c.Leaf.Cert.Subject.CommonName
	s.Annotations[cmapi.AltNamesAnnotationKey] = strings.Join(c.Leaf.Cert.DNSNames, ",")
	s.Annotations[cmapi.IPSANAnnotationKey] = strings.Join(ips, ",")
	s.Annotations[cmapi.URISANAnnotationKey] = ""
	s.Annotations[cmapi.CertificateNameKey] = c.Name
	s.Annotations[cmapi.IssuerNameAnnotationKey] = c.IssuerName
	s.Annotations[cmapi.IssuerKindAnnotationKey] = cmapi.IssuerKind
	s.Annotations[cmapi.IssuerGroupAnnotationKey] = "cert-manager.io"
	s.Labels[cmapi.PartOfCertManagerControllerLabelKey] = "true"
}

// RotateCertificateSecret replaces the Certificate's Secret data with a
// new CA (ca == nil: a freshly generated one) and a leaf it signed, as
// cert-manager's CA Issuer does after its self-signed CA Certificate was
// re-issued and the serving Certificate renewed. It returns the new CA
// once kube-apiserver stored the Secret.
func RotateCertificateSecret(t testing.TB, env *Env, c *IssuedCertificate, ca *CA) *CA {
	t.Helper()
	if ca == nil {
		ca = NewCA(t, fmt.Sprintf("%s-ca-%d", c.Name, len(c.CAs)))
	}
	c.CA = ca
	c.CAs = append(c.CAs, ca)
	c.Leaf = ca.Issue(t, c.DNSNames[0], c.DNSNames...)
	secrets := env.AdminKube.CoreV1().Secrets(c.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := secrets.Get(context.Background(), c.SecretName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.fill(s)
		_, err = secrets.Update(context.Background(), s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("rotate Secret %s/%s to CA %s: %v", c.Namespace, c.SecretName, ca, err)
	}
	return ca
}

// BundleCerts parses every CERTIFICATE block of a caBundle.
func BundleCerts(bundle []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := bundle
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return out, fmt.Errorf("%d bytes after the last PEM block", len(bytes.TrimSpace(rest)))
	}
	return out, nil
}

// DescribeBundle names the certificates of a caBundle by the CAs given
// (their common names), "?" for others, for failure messages.
func DescribeBundle(bundle []byte, cas ...*CA) string {
	if len(bundle) == 0 {
		return "(empty)"
	}
	certs, err := BundleCerts(bundle)
	var names []string
	for _, c := range certs {
		name := "?" + c.Subject.CommonName
		for _, ca := range cas {
			if bytes.Equal(ca.Cert.Raw, c.Raw) {
				name = ca.Cert.Subject.CommonName
				break
			}
		}
		names = append(names, name)
	}
	s := fmt.Sprintf("%d bytes [%s]", len(bundle), strings.Join(names, " "))
	if err != nil {
		s += " (" + err.Error() + ")"
	}
	return s
}
