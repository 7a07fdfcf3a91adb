package framework

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
)

// Kyverno's admission controller as its chart deploys it (release
// "kyverno" in namespace kyverno, charts/kyverno of the module).
const (
	KyvernoNamespace      = "kyverno"
	KyvernoServiceAccount = "kyverno-admission-controller"
	KyvernoService        = "kyverno-svc"
	// KyvernoCASecret holds the CA its renewer generates (tls.crt: every
	// CA certificate still valid, PEM; tls.key), KyvernoTLSSecret the
	// serving pair: the chart's --caSecretName and --tlsSecretName.
	KyvernoCASecret  = KyvernoService + "." + KyvernoNamespace + ".svc.kyverno-tls-ca"
	KyvernoTLSSecret = KyvernoService + "." + KyvernoNamespace + ".svc.kyverno-tls-pair"
	// kyvernoRenewBefore is --renewBefore when Options.CALead is set.
	kyvernoRenewBefore = time.Hour
	// kyvernoReadyLine is what the writer logs once its controllers run.
	kyvernoReadyLine = "kyverno-writer running"
)

// KyvernoUser is the identity Kyverno's admission controller runs as.
var KyvernoUser = ServiceAccountUser(KyvernoNamespace, KyvernoServiceAccount)

// Kyverno's webhook configurations (pkg/config): the policy, verify,
// exception and global context ones have fixed entries; the resource ones
// have an entry per failure policy and timeout its policies need.
var (
	KyvernoValidating = []string{
		"kyverno-policy-validating-webhook-cfg", "kyverno-resource-validating-webhook-cfg",
		"kyverno-exception-validating-webhook-cfg", "kyverno-cel-exception-validating-webhook-cfg",
		"kyverno-global-context-validating-webhook-cfg",
	}
	KyvernoMutating = []string{
		"kyverno-policy-mutating-webhook-cfg", "kyverno-resource-mutating-webhook-cfg", "kyverno-verify-mutating-webhook-cfg",
	}
)

// ClusterPolicyGVR is Kyverno's ClusterPolicy resource.
var ClusterPolicyGVR = schema.GroupVersionResource{Group: "kyverno.io", Version: "v1", Resource: "clusterpolicies"}

// KyvernoOptions configure the writer.
type KyvernoOptions struct {
	// CALead makes the renewer's CA due for renewal CALead after it was
	// generated: --renewBefore 1h and --ca-validity 1h+CALead. Zero keeps
	// Kyverno's (a CA of 365 days, renewed 15 days before it expires).
	CALead time.Duration
}

// Kyverno is a running e2e/writers/kyverno process (bin/kyverno-writer):
// Kyverno's certificate renewer and webhook controllers acting as
// system:serviceaccount:kyverno:kyverno-admission-controller with the
// chart's RBAC, and a stand-in for its admission server that admits every
// review, reached through the Service kyverno-svc (ExternalName 127.0.0.1,
// port Port: kube-apiserver resolves a webhook's Service to its
// ExternalName).
type Kyverno struct {
	Opts KyvernoOptions
	// Bin, Kubeconfig, Args and Env are what the process runs with.
	Bin, Kubeconfig string
	Args, Env       []string
	// Port is the Service's and the webhooks' port, where the stand-in listens.
	Port int
	// Log holds its output (Kyverno's text logger), across restarts.
	Log *Buffer
	// StartedAt is when the process was last started.
	StartedAt time.Time

	env  *Env
	proc process
}

// StartKyverno installs Kyverno's CRDs, the admission controller's RBAC,
// Deployment and ConfigMap from its chart (nothing more: no CA or TLS
// Secret, no webhook configuration), starts the writer with the chart's
// arguments and environment and returns once its controllers run. It is
// stopped by t.Cleanup and its log is printed when the test failed.
func StartKyverno(t testing.TB, env *Env, opts KyvernoOptions) *Kyverno {
	t.Helper()
	k := &Kyverno{Opts: opts, Bin: WriterBinary(t, "kyverno-writer"), Log: &Buffer{}, env: env, Port: FreePort(t)}
	InstallKyvernoCRDs(t, env)
	objs := RenderKyvernoChart(t)
	installKyvernoChartObjects(t, env, objs)
	k.createService(t, objs)
	k.Args, k.Env = kyvernoContainer(t, objs, k.Port)
	if opts.CALead > 0 {
		k.Args = append(k.Args, "--renewBefore", kyvernoRenewBefore.String(), "--ca-validity", (kyvernoRenewBefore + opts.CALead).String())
	}
	k.Args = append(k.Args, "--admit-address", "127.0.0.1:"+strconv.Itoa(k.Port))
	k.Kubeconfig = env.Kubeconfig(t, KyvernoUser)
	k.Args = append([]string{"--kubeconfig", k.Kubeconfig}, k.Args...)
	k.waitRBAC(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- kyverno-writer log (last 40 lines) ---\n%s", k.Log.Tail(40))
		}
		k.Stop(t)
	})
	k.Start(t)
	return k
}

// createService replaces the chart's ClusterIP Service (no pod serves it
// here) by one kube-apiserver resolves to the stand-in on loopback; it
// keeps the chart's selector, which leads `webhook-guard discover` from the
// webhooks to the Deployment.
func (k *Kyverno) createService(t testing.TB, objs []*unstructured.Unstructured) {
	t.Helper()
	var selector map[string]string
	for _, o := range objs {
		if o.GetKind() == "Service" && o.GetName() == KyvernoService {
			selector, _, _ = unstructured.NestedStringMap(o.Object, "spec", "selector")
		}
	}
	_, err := k.env.AdminKube.CoreV1().Services(KyvernoNamespace).Create(context.Background(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: KyvernoService},
		Spec: corev1.ServiceSpec{
			Selector: selector,
			Type:     corev1.ServiceTypeExternalName, ExternalName: "127.0.0.1",
			Ports: []corev1.ServicePort{{Name: "https", Port: int32(k.Port)}},
		},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create Service %s/%s: %v", KyvernoNamespace, KyvernoService, err)
	}
}

// kyvernoWriterFlags are the chart's arguments the writer takes (Kyverno's
// names); the others configure what it leaves out.
var kyvernoWriterFlags = []string{"caSecretName", "tlsSecretName", "webhookTimeout", "autoUpdateWebhooks", "renewBefore", "resyncPeriod"}

// kyvernoContainer is the rendered Deployment's kyverno container: the
// arguments the writer takes (--servicePort set to port) and its
// environment, with the pod's fields (fieldRef) filled as the kubelet
// would.
func kyvernoContainer(t testing.TB, objs []*unstructured.Unstructured, port int) (args, env []string) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != KyvernoServiceAccount {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			c, _ := c.(map[string]any)
			if c["name"] != "kyverno" {
				continue
			}
			cargs, _, _ := unstructured.NestedStringSlice(c, "args")
			for _, a := range cargs {
				name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				for _, f := range kyvernoWriterFlags {
					if name == f {
						args = append(args, a)
					}
				}
			}
			envs, _, _ := unstructured.NestedSlice(c, "env")
			for _, e := range envs {
				e, _ := e.(map[string]any)
				name, _ := e["name"].(string)
				if v, ok := e["value"].(string); ok {
					env = append(env, name+"="+v)
					continue
				}
				switch field, _, _ := unstructured.NestedString(e, "valueFrom", "fieldRef", "fieldPath"); field {
				case "metadata.namespace":
					env = append(env, name+"="+KyvernoNamespace)
				case "metadata.name":
					env = append(env, name+"="+KyvernoServiceAccount+"-0")
				}
			}
			return append(args, "--servicePort="+strconv.Itoa(port)), env
		}
	}
	t.Fatalf("the rendered chart has no Deployment %s with a kyverno container", KyvernoServiceAccount)
	return nil, nil
}

// waitRBAC waits until the authorizer's RBAC informer lets Kyverno's
// identity list what its informers list.
func (k *Kyverno) waitRBAC(t testing.TB) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig)
	if err != nil {
		t.Fatalf("load Kyverno's kubeconfig: %v", err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx := context.Background()
	one := metav1.ListOptions{Limit: 1}
	Eventually(t, 10*time.Second, KyvernoUser.Name+" may list what Kyverno watches (chart RBAC)", func() bool {
		_, e1 := kube.CoreV1().Secrets(KyvernoNamespace).List(ctx, one)
		_, e2 := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, one)
		_, e3 := dyn.Resource(ClusterPolicyGVR).List(ctx, one)
		_, e4 := kube.RbacV1().ClusterRoles().List(ctx, one)
		return e1 == nil && e2 == nil && e3 == nil && e4 == nil
	})
}

// Start runs the writer (again, after Stop) and waits until its
// controllers run (at most 60 s: its informers list every Kyverno kind).
func (k *Kyverno) Start(t testing.TB) {
	t.Helper()
	k.StartedAt = k.proc.startReady(t, "kyverno-writer", k.Bin, k.Args, k.Env, k.Log, 60*time.Second,
		fmt.Sprintf("%q in its log (its controllers run)", kyvernoReadyLine), logHas(kyvernoReadyLine))
}

// Stop terminates the writer (SIGTERM, then SIGKILL after 10 s). It is
// safe to call more than once.
func (k *Kyverno) Stop(t testing.TB) {
	t.Helper()
	k.proc.stop(t, "kyverno-writer")
}

// CA is the CA Secret's tls.crt (nil before the renewer created it).
func (k *Kyverno) CA(t testing.TB) []byte {
	t.Helper()
	s, err := k.env.AdminKube.CoreV1().Secrets(KyvernoNamespace).Get(context.Background(), KyvernoCASecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("read Secret %s/%s: %v", KyvernoNamespace, KyvernoCASecret, err)
	}
	return s.Data[corev1.TLSCertKey]
}

// WaitCA waits until the CA Secret's tls.crt is neither empty nor any of
// not, polling every 10 ms, and returns it.
func (k *Kyverno) WaitCA(t testing.TB, timeout time.Duration, not ...[]byte) []byte {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ca := k.CA(t)
		fresh := len(ca) > 0
		for _, n := range not {
			fresh = fresh && !bytes.Equal(ca, n)
		}
		if fresh {
			return ca
		}
		if time.Now().After(deadline) {
			t.Fatalf("Kyverno wrote no new CA into Secret %s/%s within %s\n--- kyverno-writer log (last 20 lines) ---\n%s",
				KyvernoNamespace, KyvernoCASecret, timeout, k.Log.Tail(20))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Entries are the webhooks[] of Kyverno's configurations: their names and
// caBundles by "Kind/name" (a configuration that does not exist is absent).
func (k *Kyverno) Entries(t testing.TB) (names map[string][]string, bundles map[string][][]byte) {
	t.Helper()
	ctx := context.Background()
	names, bundles = map[string][]string{}, map[string][][]byte{}
	api := k.env.AdminKube.AdmissionregistrationV1()
	for _, n := range KyvernoValidating {
		o, err := api.ValidatingWebhookConfigurations().Get(ctx, n, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			t.Fatalf("get ValidatingWebhookConfiguration %s: %v", n, err)
		}
		key := string(Validating) + "/" + n
		names[key], bundles[key] = []string{}, [][]byte{}
		for _, w := range o.Webhooks {
			names[key], bundles[key] = append(names[key], w.Name), append(bundles[key], w.ClientConfig.CABundle)
		}
	}
	for _, n := range KyvernoMutating {
		o, err := api.MutatingWebhookConfigurations().Get(ctx, n, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			t.Fatalf("get MutatingWebhookConfiguration %s: %v", n, err)
		}
		key := string(Mutating) + "/" + n
		names[key], bundles[key] = []string{}, [][]byte{}
		for _, w := range o.Webhooks {
			names[key], bundles[key] = append(names[key], w.Name), append(bundles[key], w.ClientConfig.CABundle)
		}
	}
	return names, bundles
}

// notInjected describes what keeps ca from being in every entry of all of
// Kyverno's configurations ("" when it is).
func (k *Kyverno) notInjected(t testing.TB, ca []byte) string {
	t.Helper()
	_, bundles := k.Entries(t)
	if len(bundles) < len(KyvernoValidating)+len(KyvernoMutating) {
		return fmt.Sprintf("%d of Kyverno's %d configurations exist", len(bundles), len(KyvernoValidating)+len(KyvernoMutating))
	}
	for name, bs := range bundles {
		for i, b := range bs {
			if !bytes.Equal(b, ca) {
				return fmt.Sprintf("%s webhooks[%d] holds %s", name, i, DescribeBundle(b))
			}
		}
	}
	return ""
}

// WaitInjected waits until every configuration of Kyverno exists and each
// of its entries holds exactly ca, and returns how long that took.
func (k *Kyverno) WaitInjected(t testing.TB, ca []byte, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		why := k.notInjected(t, ca)
		if why == "" {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return time.Since(start), fmt.Errorf("not every entry holds the CA %s after %s: %s", DescribeBundle(ca), timeout, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Rotate forces a CA rotation through Kyverno's renewer: it waits until the
// current CA is due (its last certificate expires within --renewBefore;
// needs Options.CALead), then touches an annotation of the CA Secret (as
// the admin), whose update event makes the certmanager controller run
// RenewCA at once instead of at its 12-hour tick. RenewCA then generates
// the next CA (Kyverno keeps the CA's key) and the webhook controllers
// rewrite every caBundle on the Secret's event. Rotate returns once the
// new CA is in the Secret (at most 10 s after the trigger).
func (k *Kyverno) Rotate(t testing.TB) Rotation {
	t.Helper()
	if k.Opts.CALead == 0 {
		t.Fatal("Kyverno.Rotate needs KyvernoOptions.CALead")
	}
	old := k.CA(t)
	certs, err := BundleCerts(old)
	if err != nil || len(certs) == 0 {
		t.Fatalf("the CA Secret's tls.crt: %d certificates, %v", len(certs), err)
	}
	due := latestCert(certs).NotAfter.Add(-kyvernoRenewBefore)
	time.Sleep(time.Until(due) + 50*time.Millisecond)
	secrets := k.env.AdminKube.CoreV1().Secrets(KyvernoNamespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := secrets.Get(context.Background(), KyvernoCASecret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations["e2e.webhook-guard.io/touched"] = time.Now().Format(time.RFC3339Nano)
		_, err = secrets.Update(context.Background(), s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("touch Secret %s/%s: %v", KyvernoNamespace, KyvernoCASecret, err)
	}
	rot := Rotation{Old: old, Triggered: time.Now()}
	rot.New = k.WaitCA(t, 10*time.Second, old)
	rot.Rotated = time.Now()
	return rot
}

func latestCert(certs []*x509.Certificate) *x509.Certificate {
	l := certs[0]
	for _, c := range certs[1:] {
		if c.NotAfter.After(l.NotAfter) {
			l = c
		}
	}
	return l
}

// ApplyClusterPolicy creates or replaces a ClusterPolicy as the admin.
func ApplyClusterPolicy(t testing.TB, env *Env, policy map[string]any) {
	t.Helper()
	ctx := context.Background()
	ri := dynamic.NewForConfigOrDie(env.Admin).Resource(ClusterPolicyGVR)
	o := &unstructured.Unstructured{Object: policy}
	o.SetAPIVersion("kyverno.io/v1")
	o.SetKind("ClusterPolicy")
	err := whileKyvernoStarts(func() error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, err = ri.Create(ctx, o, metav1.CreateOptions{})
				return err
			} else if err != nil {
				return err
			}
			o.SetResourceVersion(cur.GetResourceVersion())
			_, err = ri.Update(ctx, o, metav1.UpdateOptions{})
			return err
		})
	})
	if err != nil {
		t.Fatalf("apply ClusterPolicy %s: %v", o.GetName(), err)
	}
}

// kyvernoStartup bounds how long a policy write may fail because Kyverno's
// own policy webhooks cannot be called yet.
const kyvernoStartup = 20 * time.Second

// whileKyvernoStarts retries write while kube-apiserver cannot call
// Kyverno's policy webhooks (failurePolicy Fail): its renewer writes the CA
// first and the serving pair after it, so the configurations can name the
// CA before the server has a certificate to serve, as in a real install,
// where a user's first apply can meet the same moment.
func whileKyvernoStarts(write func() error) error {
	deadline := time.Now().Add(kyvernoStartup)
	for {
		err := write()
		if err == nil || !apierrors.IsInternalError(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// DeleteClusterPolicy deletes a ClusterPolicy as the admin.
func DeleteClusterPolicy(t testing.TB, env *Env, name string) {
	t.Helper()
	err := whileKyvernoStarts(func() error {
		return dynamic.NewForConfigOrDie(env.Admin).Resource(ClusterPolicyGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if err != nil {
		t.Fatalf("delete ClusterPolicy %s: %v", name, err)
	}
}

// Stopped reports whether the process is not running.
func (k *Kyverno) Stopped() bool { return !k.proc.running() }
