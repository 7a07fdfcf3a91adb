package casource

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// testCA is a self-signed CA certificate in PEM.
type testCA struct {
	PEM []byte
	FP  cabundle.Fingerprint
	// KeyPEM is the CA's private key in PEM.
	KeyPEM []byte
}

func newCA(t *testing.T, cn string) testCA {
	t.Helper()
	ca, err := testpki.NewCA(cn)
	require.NoError(t, err)
	return testCA{PEM: ca.PEM, FP: sha256.Sum256(ca.Cert.Raw), KeyPEM: ca.KeyPEM}
}

func caSet(source string, cas ...testCA) cabundle.CASet {
	fps := make([]cabundle.Fingerprint, len(cas))
	for i, c := range cas {
		fps[i] = c.FP
	}
	return cabundle.NewCASetFromFingerprints(source, fps...)
}

// newScheme is webhook.NewScheme, built here because casource must not
// import webhook.
func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, cmapi.AddToScheme(s))
	return s
}

// countingReader counts GETs and, while err is set, fails them with it, as
// an unreachable API server does.
type countingReader struct {
	client.Reader

	mu   sync.Mutex
	gets int
	err  error
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.mu.Lock()
	r.gets++
	err := r.err
	r.mu.Unlock()
	if err != nil {
		return err
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r *countingReader) setErr(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

func (r *countingReader) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gets
}

func secret(ns, name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

// ownersDoc has one mapping per CA source shape; loading it applies the
// defaults (secret and configMap key ca.crt) exactly as serve does.
func ownersDoc(inline testCA) string {
	return `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
owners:
- name: secret
  match: {validating: [secret]}
  writers: {users: [owner]}
  ca: {secret: {namespace: koordinator-system, name: webhook-certs}}
- name: secret-custom-key
  match: {validating: [secret-custom-key]}
  writers: {users: [owner]}
  ca: {secret: {namespace: koordinator-system, name: webhook-certs, key: bundle.pem}}
- name: secret-no-key
  match: {validating: [secret-no-key]}
  writers: {users: [owner]}
  ca: {secret: {namespace: koordinator-system, name: tls-only}}
- name: secret-missing
  match: {validating: [secret-missing]}
  writers: {users: [owner]}
  ca: {secret: {namespace: koordinator-system, name: gone}}
- name: secret-garbage
  match: {validating: [secret-garbage]}
  writers: {users: [owner]}
  ca: {secret: {namespace: koordinator-system, name: garbage}}
- name: secret-private-key
  match: {validating: [secret-private-key]}
  writers: {users: [owner]}
  ca: {secret: {namespace: koordinator-system, name: private-key}}
- name: configmap-data
  match: {validating: [configmap-data]}
  writers: {users: [owner]}
  ca: {configMap: {namespace: app, name: ca-data}}
- name: configmap-binary
  match: {validating: [configmap-binary]}
  writers: {users: [owner]}
  ca: {configMap: {namespace: app, name: ca-binary}}
- name: configmap-empty
  match: {validating: [configmap-empty]}
  writers: {users: [owner]}
  ca: {configMap: {namespace: app, name: ca-empty}}
- name: configmap-garbage
  match: {validating: [configmap-garbage]}
  writers: {users: [owner]}
  ca: {configMap: {namespace: app, name: ca-garbage}}
- name: configmap-missing
  match: {validating: [configmap-missing]}
  writers: {users: [owner]}
  ca: {configMap: {namespace: app, name: gone}}
- name: certificate
  match: {validating: [certificate]}
  writers: {users: [owner]}
  ca: {certificate: {namespace: team-a, name: webhook}}
- name: certificate-no-secret-name
  match: {validating: [certificate-no-secret-name]}
  writers: {users: [owner]}
  ca: {certificate: {namespace: team-a, name: no-secret-name}}
- name: certificate-secret-missing
  match: {validating: [certificate-secret-missing]}
  writers: {users: [owner]}
  ca: {certificate: {namespace: team-a, name: secret-missing}}
- name: certificate-missing
  match: {validating: [certificate-missing]}
  writers: {users: [owner]}
  ca: {certificate: {namespace: team-a, name: gone}}
- name: issuer
  match: {validating: [issuer]}
  writers: {users: [owner]}
  ca: {issuer: {kind: Issuer, namespace: team-a, name: ca-issuer}}
- name: issuer-tls-only
  match: {validating: [issuer-tls-only]}
  writers: {users: [owner]}
  ca: {issuer: {kind: Issuer, namespace: team-a, name: ca-issuer-tls-only}}
- name: issuer-secret-missing
  match: {validating: [issuer-secret-missing]}
  writers: {users: [owner]}
  ca: {issuer: {kind: Issuer, namespace: team-a, name: ca-issuer-secret-missing}}
- name: issuer-selfsigned
  match: {validating: [issuer-selfsigned]}
  writers: {users: [owner]}
  ca: {issuer: {kind: Issuer, namespace: team-a, name: selfsigned}}
- name: issuer-missing
  match: {validating: [issuer-missing]}
  writers: {users: [owner]}
  ca: {issuer: {kind: Issuer, namespace: team-a, name: gone}}
- name: clusterissuer
  match: {validating: [clusterissuer]}
  writers: {users: [owner]}
  ca: {issuer: {kind: ClusterIssuer, name: shared-ca}}
- name: clusterissuer-acme
  match: {validating: [clusterissuer-acme]}
  writers: {users: [owner]}
  ca: {issuer: {kind: ClusterIssuer, name: letsencrypt}}
- name: clusterissuer-missing
  match: {validating: [clusterissuer-missing]}
  writers: {users: [owner]}
  ca: {issuer: {kind: ClusterIssuer, name: gone}}
- name: injected
  match: {validating: [injected]}
  writers: {users: [owner]}
  ca: {injectedByCertManager: {}}
- name: injected-pinned
  match: {validating: [injected-pinned]}
  writers: {users: [owner]}
  ca: {injectedByCertManager: {certificate: {namespace: team-a, name: webhook}}}
- name: injected-pinned-secret
  match: {validating: [injected-pinned-secret]}
  writers: {users: [owner]}
  ca: {injectedByCertManager: {secret: {namespace: koordinator-system, name: webhook-certs}}}
- name: inline
  match: {validating: [inline]}
  writers: {users: [owner]}
  ca:
    pem: |
` + testpki.Indent(string(inline.PEM), 6) + `
`
}

// env is a fake API with the objects every CA source shape reads.
type env struct {
	owners               map[string]*guardapi.Owner
	root, ca, ca2, other testCA
	client               client.Client
	reader               *countingReader
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{root: newCA(t, "root"), ca: newCA(t, "ca"), ca2: newCA(t, "ca-2"), other: newCA(t, "inline")}
	cfg, err := policy.Load([]byte(ownersDoc(e.other)))
	require.NoError(t, err)
	e.owners = map[string]*guardapi.Owner{}
	for i := range cfg.Spec.Owners {
		e.owners[cfg.Spec.Owners[i].Name] = &cfg.Spec.Owners[i]
	}
	leaf := newCA(t, "not-really-a-leaf") // tls.crt of a serving Secret: never read as a CA here
	e.client = fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(
		secret("koordinator-system", "webhook-certs", map[string][]byte{"ca.crt": e.ca.PEM, "bundle.pem": append(append([]byte{}, e.ca.PEM...), e.ca2.PEM...), "tls.crt": leaf.PEM}),
		secret("koordinator-system", "tls-only", map[string][]byte{"tls.crt": leaf.PEM}),
		secret("koordinator-system", "garbage", map[string][]byte{"ca.crt": []byte("garbage")}),
		secret("koordinator-system", "private-key", map[string][]byte{"ca.crt": leaf.KeyPEM}),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "ca-data"}, Data: map[string]string{"ca.crt": string(e.ca.PEM)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "ca-binary"}, BinaryData: map[string][]byte{"ca.crt": e.ca2.PEM}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "ca-empty"}, Data: map[string]string{"other": "x"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "ca-garbage"}, Data: map[string]string{"ca.crt": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}},
		&cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "webhook"}, Spec: cmapi.CertificateSpec{SecretName: "webhook-tls"}},
		secret("team-a", "webhook-tls", map[string][]byte{"ca.crt": e.ca.PEM, "tls.crt": leaf.PEM}),
		&cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "no-secret-name"}},
		&cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "secret-missing"}, Spec: cmapi.CertificateSpec{SecretName: "not-issued-yet"}},
		&cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ca-issuer"}, Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: "ca-key-pair"}}}},
		secret("team-a", "ca-key-pair", map[string][]byte{"tls.crt": e.ca.PEM, "ca.crt": e.root.PEM}),
		&cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ca-issuer-tls-only"}, Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: "ca-key-pair-tls-only"}}}},
		secret("team-a", "ca-key-pair-tls-only", map[string][]byte{"tls.crt": e.ca.PEM, "tls.key": []byte("k")}),
		&cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ca-issuer-secret-missing"}, Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: "gone"}}}},
		&cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "selfsigned"}, Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{SelfSigned: &cmapi.SelfSignedIssuer{}}}},
		&cmapi.ClusterIssuer{ObjectMeta: metav1.ObjectMeta{Name: "shared-ca"}, Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: "shared-ca"}}}},
		secret("cert-manager", "shared-ca", map[string][]byte{"tls.crt": e.ca2.PEM}),
		&cmapi.ClusterIssuer{ObjectMeta: metav1.ObjectMeta{Name: "letsencrypt"}, Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{ACME: nil}}},
	).Build()
	e.reader = &countingReader{Reader: e.client}
	return e
}

func (e *env) request(owner string, annotations map[string]string) Request {
	return Request{Owner: e.owners[owner], Annotations: annotations, ClusterResourceNamespace: "cert-manager"}
}

func ok(source string, set cabundle.CASet) Result {
	return Result{CAResult: policy.CAResult{Resolved: true, Set: set}, Source: source}
}

func failed(source string, err error) Result {
	return Result{CAResult: policy.CAResult{Resolved: true, Err: err}, Source: source}
}

func Test_Resolver_Resolve(t *testing.T) {
	e := newEnv(t)
	const (
		koordSecret = "Secret koordinator-system/webhook-certs (key ca.crt)"
		teamACert   = "Certificate team-a/webhook"
	)

	tests := map[string]struct {
		req    Request
		exp    Result
		expErr string
		// expInvalidData is SourceError.InvalidData.
		expInvalidData bool
	}{
		"if the source is a Secret without a key, read its ca.crt": {
			req: e.request("secret", nil),
			exp: ok(koordSecret, caSet(koordSecret, e.ca)),
		},
		"if the source is a Secret with a key, read that key, every certificate in it": {
			req: e.request("secret-custom-key", nil),
			exp: ok("Secret koordinator-system/webhook-certs (key bundle.pem)", caSet("Secret koordinator-system/webhook-certs (key bundle.pem)", e.ca, e.ca2)),
		},
		"if the Secret has no such key, fail naming the Secret and the key": {
			req:    e.request("secret-no-key", nil),
			exp:    failed("Secret koordinator-system/tls-only (key ca.crt)", &SourceError{Source: "Secret koordinator-system/tls-only (key ca.crt)", Reason: `the Secret has no "ca.crt" key`, Definitive: true}),
			expErr: `cannot read the owner's CA from Secret koordinator-system/tls-only (key ca.crt): the Secret has no "ca.crt" key`,
		},
		"if the Secret does not exist, fail definitively naming it": {
			req:    e.request("secret-missing", nil),
			exp:    failed("Secret koordinator-system/gone (key ca.crt)", &SourceError{Source: "Secret koordinator-system/gone (key ca.crt)", Reason: "it does not exist", Definitive: true, NotFound: true}),
			expErr: "cannot read the owner's CA from Secret koordinator-system/gone (key ca.crt): it does not exist",
		},
		"if the Secret holds garbage, fail with InvalidData": {
			req: e.request("secret-garbage", nil),
			exp: failed("Secret koordinator-system/garbage (key ca.crt)", &SourceError{
				Source: "Secret koordinator-system/garbage (key ca.crt)", Reason: `the data is not PEM: no "-----BEGIN CERTIFICATE-----" block found`, Definitive: true, InvalidData: true,
			}),
			expErr:         `cannot read the owner's CA from Secret koordinator-system/garbage (key ca.crt): the data is not PEM: no "-----BEGIN CERTIFICATE-----" block found`,
			expInvalidData: true,
		},
		"if the Secret holds a private key where the CA belongs, fail with InvalidData": {
			req: e.request("secret-private-key", nil),
			exp: failed("Secret koordinator-system/private-key (key ca.crt)", &SourceError{
				Source: "Secret koordinator-system/private-key (key ca.crt)", Reason: `the data holds no certificate kube-apiserver can use (PEM block 0 is a "EC PRIVATE KEY", not a CERTIFICATE; kube-apiserver skips such blocks)`, Definitive: true, InvalidData: true,
			}),
			expErr:         `cannot read the owner's CA from Secret koordinator-system/private-key (key ca.crt): the data holds no certificate kube-apiserver can use (PEM block 0 is a "EC PRIVATE KEY", not a CERTIFICATE; kube-apiserver skips such blocks)`,
			expInvalidData: true,
		},
		"if the source is a ConfigMap with the CA in data, read it": {
			req: e.request("configmap-data", nil),
			exp: ok("ConfigMap app/ca-data (key ca.crt)", caSet("ConfigMap app/ca-data (key ca.crt)", e.ca)),
		},
		"if the source is a ConfigMap with the CA in binaryData, read it": {
			req: e.request("configmap-binary", nil),
			exp: ok("ConfigMap app/ca-binary (key ca.crt)", caSet("ConfigMap app/ca-binary (key ca.crt)", e.ca2)),
		},
		"if the ConfigMap has the key in neither data nor binaryData, fail naming both": {
			req:    e.request("configmap-empty", nil),
			exp:    failed("ConfigMap app/ca-empty (key ca.crt)", &SourceError{Source: "ConfigMap app/ca-empty (key ca.crt)", Reason: `the ConfigMap has no "ca.crt" key in data or binaryData`, Definitive: true}),
			expErr: `cannot read the owner's CA from ConfigMap app/ca-empty (key ca.crt): the ConfigMap has no "ca.crt" key in data or binaryData`,
		},
		"if the ConfigMap's certificate does not parse, fail with InvalidData": {
			req: e.request("configmap-garbage", nil),
			exp: failed("ConfigMap app/ca-garbage (key ca.crt)", &SourceError{
				Source: "ConfigMap app/ca-garbage (key ca.crt)", Reason: "the data holds no certificate kube-apiserver can use (PEM block 0 is not a valid certificate: x509: malformed certificate; kube-apiserver skips such blocks)", Definitive: true, InvalidData: true,
			}),
			expErr:         "cannot read the owner's CA from ConfigMap app/ca-garbage (key ca.crt): the data holds no certificate kube-apiserver can use (PEM block 0 is not a valid certificate: x509: malformed certificate; kube-apiserver skips such blocks)",
			expInvalidData: true,
		},
		"if the ConfigMap does not exist, fail definitively naming it": {
			req:    e.request("configmap-missing", nil),
			exp:    failed("ConfigMap app/gone (key ca.crt)", &SourceError{Source: "ConfigMap app/gone (key ca.crt)", Reason: "it does not exist", Definitive: true, NotFound: true}),
			expErr: "cannot read the owner's CA from ConfigMap app/gone (key ca.crt): it does not exist",
		},
		"if the source is a Certificate, read its Secret's ca.crt": {
			req: e.request("certificate", nil),
			exp: ok(teamACert, caSet(teamACert+" -> Secret team-a/webhook-tls (key ca.crt)", e.ca)),
		},
		"if the Certificate has no spec.secretName, fail naming it": {
			req:    e.request("certificate-no-secret-name", nil),
			exp:    failed("Certificate team-a/no-secret-name", &SourceError{Source: "Certificate team-a/no-secret-name", Reason: "spec.secretName is empty", Definitive: true}),
			expErr: "cannot read the owner's CA from Certificate team-a/no-secret-name: spec.secretName is empty",
		},
		"if the Certificate's Secret does not exist yet, fail naming the Secret": {
			req:    e.request("certificate-secret-missing", nil),
			exp:    failed("Certificate team-a/secret-missing", &SourceError{Source: "Secret team-a/not-issued-yet (key ca.crt)", Reason: "it does not exist", Definitive: true, NotFound: true}),
			expErr: "cannot read the owner's CA from Secret team-a/not-issued-yet (key ca.crt): it does not exist",
		},
		"if the Certificate does not exist, fail naming it": {
			req:    e.request("certificate-missing", nil),
			exp:    failed("Certificate team-a/gone", &SourceError{Source: "Certificate team-a/gone", Reason: "it does not exist", Definitive: true, NotFound: true}),
			expErr: "cannot read the owner's CA from Certificate team-a/gone: it does not exist",
		},
		"if the source is a CA Issuer, read the CA in its Secret's tls.crt and its parents in ca.crt": {
			req: e.request("issuer", nil),
			exp: ok("Issuer team-a/ca-issuer", caSet("Issuer team-a/ca-issuer -> Secret team-a/ca-key-pair (key tls.crt)", e.ca, e.root)),
		},
		"if the CA Issuer's Secret has no ca.crt, read tls.crt alone": {
			req: e.request("issuer-tls-only", nil),
			exp: ok("Issuer team-a/ca-issuer-tls-only", caSet("Issuer team-a/ca-issuer-tls-only -> Secret team-a/ca-key-pair-tls-only (key tls.crt)", e.ca)),
		},
		"if the CA Issuer's Secret does not exist, fail naming the Secret and its tls.crt": {
			req:    e.request("issuer-secret-missing", nil),
			exp:    failed("Issuer team-a/ca-issuer-secret-missing", &SourceError{Source: "Secret team-a/gone (key tls.crt)", Reason: "it does not exist", Definitive: true, NotFound: true}),
			expErr: "cannot read the owner's CA from Secret team-a/gone (key tls.crt): it does not exist",
		},
		"if the Issuer is not of CA type, fail saying what to use instead": {
			req: e.request("issuer-selfsigned", nil),
			exp: failed("Issuer team-a/selfsigned", &SourceError{
				Source: "Issuer team-a/selfsigned", Reason: "it is not a CA issuer (spec.ca.secretName is empty); use a certificate or secret source for other issuer types", Definitive: true,
			}),
			expErr: "cannot read the owner's CA from Issuer team-a/selfsigned: it is not a CA issuer (spec.ca.secretName is empty); use a certificate or secret source for other issuer types",
		},
		"if the Issuer does not exist, fail naming it": {
			req:    e.request("issuer-missing", nil),
			exp:    failed("Issuer team-a/gone", &SourceError{Source: "Issuer team-a/gone", Reason: "it does not exist", Definitive: true, NotFound: true}),
			expErr: "cannot read the owner's CA from Issuer team-a/gone: it does not exist",
		},
		"if the source is a CA ClusterIssuer, read its Secret in the cluster resource namespace": {
			req: e.request("clusterissuer", nil),
			exp: ok("ClusterIssuer shared-ca", caSet("ClusterIssuer shared-ca -> Secret cert-manager/shared-ca (key tls.crt)", e.ca2)),
		},
		"if the ClusterIssuer is not of CA type, fail": {
			req: e.request("clusterissuer-acme", nil),
			exp: failed("ClusterIssuer letsencrypt", &SourceError{
				Source: "ClusterIssuer letsencrypt", Reason: "it is not a CA issuer (spec.ca.secretName is empty); use a certificate or secret source for other issuer types", Definitive: true,
			}),
			expErr: "cannot read the owner's CA from ClusterIssuer letsencrypt: it is not a CA issuer (spec.ca.secretName is empty); use a certificate or secret source for other issuer types",
		},
		"if the ClusterIssuer does not exist, fail naming it": {
			req:    e.request("clusterissuer-missing", nil),
			exp:    failed("ClusterIssuer gone", &SourceError{Source: "ClusterIssuer gone", Reason: "it does not exist", Definitive: true, NotFound: true}),
			expErr: "cannot read the owner's CA from ClusterIssuer gone: it does not exist",
		},
		"if the source is injectedByCertManager with inject-ca-from, read that Certificate's Secret's ca.crt": {
			req: e.request("injected", map[string]string{AnnotationInjectCAFrom: "team-a/webhook"}),
			exp: ok("annotation cert-manager.io/inject-ca-from -> Certificate team-a/webhook",
				caSet("annotation cert-manager.io/inject-ca-from -> Certificate team-a/webhook -> Secret team-a/webhook-tls (key ca.crt)", e.ca)),
		},
		"if the configuration carries both annotations, inject-ca-from wins as in cainjector": {
			req: e.request("injected", map[string]string{AnnotationInjectCAFrom: "team-a/webhook", AnnotationInjectCAFromSecret: "koordinator-system/garbage"}),
			exp: ok("annotation cert-manager.io/inject-ca-from -> Certificate team-a/webhook",
				caSet("annotation cert-manager.io/inject-ca-from -> Certificate team-a/webhook -> Secret team-a/webhook-tls (key ca.crt)", e.ca)),
		},
		"if the source is injectedByCertManager with inject-ca-from-secret, read that Secret's ca.crt": {
			req: e.request("injected", map[string]string{AnnotationInjectCAFromSecret: "koordinator-system/webhook-certs"}),
			exp: ok("annotation cert-manager.io/inject-ca-from-secret -> "+koordSecret,
				caSet("annotation cert-manager.io/inject-ca-from-secret -> "+koordSecret, e.ca)),
		},
		"if the injected CA is pinned to a Certificate, read the pin and ignore the annotation, which the decision requires to be the pin": {
			req: e.request("injected-pinned", map[string]string{AnnotationInjectCAFrom: "koordinator-system/elsewhere"}),
			exp: ok("pinned cert-manager.io/inject-ca-from -> Certificate team-a/webhook",
				caSet("pinned cert-manager.io/inject-ca-from -> Certificate team-a/webhook -> Secret team-a/webhook-tls (key ca.crt)", e.ca)),
		},
		"if the injected CA is pinned to a Secret, read its ca.crt without any annotation": {
			req: e.request("injected-pinned-secret", nil),
			exp: ok("pinned cert-manager.io/inject-ca-from-secret -> "+koordSecret,
				caSet("pinned cert-manager.io/inject-ca-from-secret -> "+koordSecret, e.ca)),
		},
		"if inject-ca-from-secret names a Secret that does not exist, fail naming the Secret": {
			req:    e.request("injected", map[string]string{AnnotationInjectCAFromSecret: "koordinator-system/gone"}),
			exp:    failed("annotation cert-manager.io/inject-ca-from-secret -> Secret koordinator-system/gone (key ca.crt)", &SourceError{Source: "Secret koordinator-system/gone (key ca.crt)", Reason: "it does not exist", Definitive: true, NotFound: true}),
			expErr: "cannot read the owner's CA from Secret koordinator-system/gone (key ca.crt): it does not exist",
		},
		"if the configuration carries neither annotation, fail naming both": {
			req: e.request("injected", map[string]string{"other": "x"}),
			exp: failed("unknown", &SourceError{
				Source: "injectedByCertManager", Reason: "the configuration carries neither cert-manager.io/inject-ca-from nor cert-manager.io/inject-ca-from-secret", Definitive: true,
			}),
			expErr: "cannot read the owner's CA from injectedByCertManager: the configuration carries neither cert-manager.io/inject-ca-from nor cert-manager.io/inject-ca-from-secret",
		},
		"if inject-ca-from is not namespace/name, fail quoting it": {
			req:    e.request("injected", map[string]string{AnnotationInjectCAFrom: "webhook"}),
			exp:    failed("unknown", &SourceError{Source: "annotation cert-manager.io/inject-ca-from", Reason: `value "webhook" is not "namespace/name"`, Definitive: true}),
			expErr: `cannot read the owner's CA from annotation cert-manager.io/inject-ca-from: value "webhook" is not "namespace/name"`,
		},
		"if inject-ca-from has an empty name, fail quoting it": {
			req:    e.request("injected", map[string]string{AnnotationInjectCAFrom: "team-a/"}),
			exp:    failed("unknown", &SourceError{Source: "annotation cert-manager.io/inject-ca-from", Reason: `value "team-a/" is not "namespace/name"`, Definitive: true}),
			expErr: `cannot read the owner's CA from annotation cert-manager.io/inject-ca-from: value "team-a/" is not "namespace/name"`,
		},
		"if inject-ca-from-secret is not namespace/name, fail quoting it": {
			req:    e.request("injected", map[string]string{AnnotationInjectCAFromSecret: "/webhook-certs"}),
			exp:    failed("unknown", &SourceError{Source: "annotation cert-manager.io/inject-ca-from-secret", Reason: `value "/webhook-certs" is not "namespace/name"`, Definitive: true}),
			expErr: `cannot read the owner's CA from annotation cert-manager.io/inject-ca-from-secret: value "/webhook-certs" is not "namespace/name"`,
		},
		"if the source is inline pem, return it without reading the API": {
			req: e.request("inline", nil),
			exp: ok("inline pem of owners[inline]", caSet("inline pem of owners[inline]", e.other)),
		},
		"if the mapping has no CA source, fail": {
			req:    Request{Owner: &guardapi.Owner{Name: "none"}},
			exp:    failed("unknown", errors.New("the mapping has no CA source")),
			expErr: "the mapping has no CA source",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			r := New(e.client, Options{})
			got := comparableResult(r.Resolve(t.Context(), test.req, false))
			assert.Equal(t, test.exp, got)
			if test.expErr == "" {
				require.NoError(t, got.Err)
				return
			}
			require.EqualError(t, got.Err, test.expErr)
			if se, ok := errors.AsType[*SourceError](got.Err); ok {
				assert.Equal(t, test.expInvalidData, se.InvalidData)
			}
		})
	}
}

func Test_Resolver_Resolve_forbidden(t *testing.T) {
	e := newEnv(t)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "webhook-certs",
		errors.New(`User "system:serviceaccount:webhook-guard-system:webhook-guard" cannot get resource "secrets" in the namespace "koordinator-system"`))
	e.reader.setErr(forbidden)
	r := New(e.reader, Options{})

	got := comparableResult(r.Resolve(t.Context(), e.request("secret", nil), false))

	assert.Equal(t, failed("Secret koordinator-system/webhook-certs (key ca.crt)", &SourceError{
		Source:     "Secret koordinator-system/webhook-certs (key ca.crt)",
		Reason:     "the guard may not read it (" + forbidden.Error() + "); grant get, list and watch on it (by name) in the chart's values",
		Definitive: true,
	}), got)
}

// clock is an injectable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

var errConnRefused = errors.New(`Get "https://10.96.0.1:443/api/v1/namespaces/koordinator-system/secrets/webhook-certs": dial tcp 10.96.0.1:443: connect: connection refused`)

func Test_Resolver_Resolve_cache(t *testing.T) {
	const src = "Secret koordinator-system/webhook-certs (key ca.crt)"
	newResolver := func(t *testing.T) (*env, *clock, *Resolver) {
		e := newEnv(t)
		c := &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
		return e, c, New(e.reader, Options{TTL: 30 * time.Second, MaxStale: 5 * time.Minute, Now: c.Now})
	}
	fresh := func(e *env) Result { return ok(src, caSet(src, e.ca)) }
	cached := func(e *env) Result {
		r := fresh(e)
		r.Cached = true
		return r
	}
	stale := func(e *env) Result {
		r := cached(e)
		r.Stale = true
		return r
	}

	t.Run("if a second resolve is within the TTL, serve it from the cache without reading", func(t *testing.T) {
		e, c, r := newResolver(t)
		assert.Equal(t, fresh(e), comparableResult(r.Resolve(t.Context(), e.request("secret", nil), false)))
		c.Add(29 * time.Second)
		assert.Equal(t, cached(e), comparableResult(r.Resolve(t.Context(), e.request("secret", nil), false)))
		assert.Equal(t, 1, e.reader.count())
	})

	t.Run("if two owners name the same source, they share the cached read", func(t *testing.T) {
		e, _, r := newResolver(t)
		other := &guardapi.Owner{Name: "other", CA: guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: "koordinator-system", Name: "webhook-certs", Key: "ca.crt"}}}
		r.Resolve(t.Context(), e.request("secret", nil), false)
		assert.Equal(t, cached(e), comparableResult(r.Resolve(t.Context(), Request{Owner: other}, false)))
		assert.Equal(t, 1, e.reader.count())
	})

	t.Run("if live is set, always read, and refresh the cache", func(t *testing.T) {
		e, c, r := newResolver(t)
		r.Resolve(t.Context(), e.request("secret", nil), false)
		c.Add(time.Second)
		assert.Equal(t, fresh(e), comparableResult(r.Resolve(t.Context(), e.request("secret", nil), true)))
		assert.Equal(t, fresh(e), comparableResult(r.Resolve(t.Context(), e.request("secret", nil), true)))
		assert.Equal(t, 3, e.reader.count())

		// The live read at +1s restarted the TTL.
		c.Add(29 * time.Second)
		assert.Equal(t, cached(e), comparableResult(r.Resolve(t.Context(), e.request("secret", nil), false)))
		assert.Equal(t, 3, e.reader.count())
	})

	t.Run("if the TTL has passed, read again and see the rotated CA", func(t *testing.T) {
		e, c, r := newResolver(t)
		r.Resolve(t.Context(), e.request("secret", nil), false)
		s := &corev1.Secret{}
		require.NoError(t, e.client.Get(t.Context(), client.ObjectKey{Namespace: "koordinator-system", Name: "webhook-certs"}, s))
		s.Data["ca.crt"] = append(append([]byte{}, e.ca.PEM...), e.ca2.PEM...)
		require.NoError(t, e.client.Update(t.Context(), s))

		c.Add(30 * time.Second)
		assert.Equal(t, ok(src, caSet(src, e.ca, e.ca2)), comparableResult(r.Resolve(t.Context(), e.request("secret", nil), false)))
		assert.Equal(t, 2, e.reader.count())
	})

	t.Run("if reads fail because the API cannot be reached, serve the cached answer as stale until MaxStale, then fail", func(t *testing.T) {
		e, c, r := newResolver(t)
		r.Resolve(t.Context(), e.request("secret", nil), false)
		e.reader.setErr(errConnRefused)

		c.Add(31 * time.Second)
		assert.Equal(t, stale(e), comparableResult(r.Resolve(t.Context(), e.request("secret", nil), false)))
		assert.Equal(t, stale(e), comparableResult(r.Resolve(t.Context(), e.request("secret", nil), true)), "a live read during the outage is stale too")
		c.Add(5*time.Minute - 31*time.Second - time.Nanosecond)
		assert.Equal(t, stale(e), comparableResult(r.Resolve(t.Context(), e.request("secret", nil), false)))
		assert.Equal(t, 4, e.reader.count(), "every stale answer tried a read first")

		c.Add(time.Nanosecond)
		got := comparableResult(r.Resolve(t.Context(), e.request("secret", nil), false))
		assert.Equal(t, failed(src, &SourceError{Source: src, Reason: errConnRefused.Error()}), got)
		require.EqualError(t, got.Err, "cannot read the owner's CA from "+src+": "+errConnRefused.Error())

		// When the API answers again, the source is read fresh.
		e.reader.setErr(nil)
		assert.Equal(t, fresh(e), comparableResult(r.Resolve(t.Context(), e.request("secret", nil), false)))
	})

	t.Run("if nothing was ever read and the API cannot be reached, fail at once", func(t *testing.T) {
		e, _, r := newResolver(t)
		e.reader.setErr(errConnRefused)
		assert.Equal(t, failed(src, &SourceError{Source: src, Reason: errConnRefused.Error()}), comparableResult(r.Resolve(t.Context(), e.request("secret", nil), false)))
	})

	t.Run("if the source is deleted, the cache does not paper over the NotFound once the TTL has passed", func(t *testing.T) {
		e, c, r := newResolver(t)
		r.Resolve(t.Context(), e.request("secret", nil), false)
		require.NoError(t, e.client.Delete(t.Context(), secret("koordinator-system", "webhook-certs", nil)))

		c.Add(31 * time.Second)
		assert.Equal(t, failed(src, &SourceError{Source: src, Reason: "it does not exist", Definitive: true, NotFound: true}), comparableResult(r.Resolve(t.Context(), e.request("secret", nil), false)))
	})

	t.Run("if a live read finds the source deleted, drop the cached answer at once", func(t *testing.T) {
		e, c, r := newResolver(t)
		r.Resolve(t.Context(), e.request("secret", nil), false)
		require.NoError(t, e.client.Delete(t.Context(), secret("koordinator-system", "webhook-certs", nil)))
		notFound := failed(src, &SourceError{Source: src, Reason: "it does not exist", Definitive: true, NotFound: true})

		c.Add(time.Second)
		assert.Equal(t, notFound, comparableResult(r.Resolve(t.Context(), e.request("secret", nil), true)))
		c.Add(time.Second)
		assert.Equal(t, notFound, comparableResult(r.Resolve(t.Context(), e.request("secret", nil), false)), "within the TTL, but the source is known to be gone")
		assert.Equal(t, 3, e.reader.count())
	})

	t.Run("if the source now holds garbage, fail at once instead of serving the cached CA", func(t *testing.T) {
		e, _, r := newResolver(t)
		r.Resolve(t.Context(), e.request("secret", nil), false)
		s := &corev1.Secret{}
		require.NoError(t, e.client.Get(t.Context(), client.ObjectKey{Namespace: "koordinator-system", Name: "webhook-certs"}, s))
		s.Data["ca.crt"] = []byte("garbage")
		require.NoError(t, e.client.Update(t.Context(), s))

		assert.Equal(t, failed(src, &SourceError{Source: src, Reason: `the data is not PEM: no "-----BEGIN CERTIFICATE-----" block found`, Definitive: true, InvalidData: true}),
			r.Resolve(t.Context(), e.request("secret", nil), true))
	})

	t.Run("if the cache is invalidated, read again within the TTL", func(t *testing.T) {
		e, c, r := newResolver(t)
		r.Resolve(t.Context(), e.request("secret", nil), false)
		r.Resolve(t.Context(), e.request("certificate", nil), false)
		r.Invalidate()
		c.Add(time.Second)
		assert.Equal(t, fresh(e), comparableResult(r.Resolve(t.Context(), e.request("secret", nil), false)))
		assert.Equal(t, 4, e.reader.count(), "Secret, Certificate and its Secret, Secret again")
		assert.Equal(t, "Certificate team-a/webhook", comparableResult(r.Resolve(t.Context(), e.request("certificate", nil), false)).Source)
		assert.Equal(t, 6, e.reader.count(), "the Certificate was dropped too")
	})

	t.Run("if resolved concurrently, stay consistent", func(t *testing.T) {
		e, c, r := newResolver(t)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				for j := range 20 {
					got := comparableResult(r.Resolve(t.Context(), e.request("secret", nil), (i+j)%5 == 0))
					assert.NoError(t, got.Err)
					assert.Equal(t, 1, got.Set.Len())
					if j%7 == 0 {
						c.Add(10 * time.Second)
					}
					if j == 10 && i == 0 {
						r.Invalidate()
					}
				}
			})
		}
		wg.Wait()
	})
}

func Test_New(t *testing.T) {
	now := func() time.Time { return time.Time{} }
	tests := map[string]struct {
		opts        Options
		expTTL      time.Duration
		expMaxStale time.Duration
	}{
		"if nothing is set, use the defaults": {
			expTTL: DefaultTTL, expMaxStale: DefaultMaxStale,
		},
		"if both are set sensibly, keep them": {
			opts:   Options{TTL: time.Second, MaxStale: time.Minute, Now: now},
			expTTL: time.Second, expMaxStale: time.Minute,
		},
		"if MaxStale is shorter than TTL, use the default MaxStale": {
			opts:   Options{TTL: time.Minute, MaxStale: time.Second},
			expTTL: time.Minute, expMaxStale: DefaultMaxStale,
		},
		"if TTL is longer than the default MaxStale, MaxStale becomes TTL": {
			opts:   Options{TTL: time.Hour},
			expTTL: time.Hour, expMaxStale: time.Hour,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			r := New(nil, test.opts)
			assert.Equal(t, test.expTTL, r.opts.TTL)
			assert.Equal(t, test.expMaxStale, r.opts.MaxStale)
			assert.NotNil(t, r.opts.Now)
		})
	}
}

func Test_getError(t *testing.T) {
	gr := schema.GroupResource{Resource: "secrets"}
	tests := map[string]struct {
		err error
		exp *SourceError
	}{
		"if the object is not found, the answer is definitive": {
			err: apierrors.NewNotFound(gr, "x"),
			exp: &SourceError{Source: "S", Reason: "it does not exist", Definitive: true, NotFound: true},
		},
		"if reading is forbidden, the answer is definitive and says how to grant it": {
			err: apierrors.NewForbidden(gr, "x", errors.New("no")),
			exp: &SourceError{Source: "S", Reason: `the guard may not read it (secrets "x" is forbidden: no); grant get, list and watch on it (by name) in the chart's values`, Definitive: true},
		},
		"if the API server times out, the answer is not definitive": {
			err: apierrors.NewTimeoutError("slow", 1),
			exp: &SourceError{Source: "S", Reason: "Timeout: slow"},
		},
		"if the connection fails, the answer is not definitive": {
			err: errConnRefused,
			exp: &SourceError{Source: "S", Reason: errConnRefused.Error()},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			err := getError("S", test.err)
			assert.Equal(t, test.exp, err)
			assert.Equal(t, test.exp.Definitive, IsDefinitive(err))
		})
	}
}

// comparableResult drops what the expected results do not spell out (the CA
// set's expiry, covered by policy's tests), so whole results compare exactly.
func comparableResult(r Result) Result {
	if r.Set.Len() > 0 {
		r.Set = cabundle.NewCASetFromFingerprints(r.Set.Source, r.Set.Fingerprints()...)
	}
	return r
}
