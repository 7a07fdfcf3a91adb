package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KnativeTargets are the objects Knative's reconcilers write the CA into:
// serving's three configurations (one entry each) and the Widget CRD.
var KnativeTargets = []Target{
	{Mutating, KnativeDefaulting},
	{Validating, KnativeValidation},
	{Validating, KnativeConfigMaps},
	{CRD, KnativeWidgetCRD},
}

// KnativeOptions configure one run of e2e/writers/knative.
type KnativeOptions struct {
	// Resync is the informers' resync period: every resync each reconciler
	// compares its objects with what it would write (and writes when they
	// differ). Zero keeps Knative's 10 hours.
	Resync time.Duration
	// ExtraArgs are appended to the binary's arguments.
	ExtraArgs []string
}

// Knative is a running e2e/writers/knative process: knative.dev/pkg's
// certificates, defaulting, validation, configmaps and conversion
// reconcilers under sharedmain, as serving's webhook Deployment runs them,
// acting as system:serviceaccount:knative-serving:controller with the RBAC
// InstallKnativeServing created.
type Knative struct {
	Opts KnativeOptions
	User envtest.User
	// Bin is the built binary; Kubeconfig its identity.
	Bin, Kubeconfig string
	// Log holds its stdout and stderr (Knative's JSON lines).
	Log *Buffer
	// StartedAt is when the process was started.
	StartedAt time.Time

	env  *Env
	proc process
}

// knativeStartedLine is what sharedmain logs once the informers are
// started, just before the controllers.
const knativeStartedLine = "Starting controllers..."

// StartKnative starts bin/knative-writer (make tools) as serving's webhook
// service account, with the environment serving's webhook Deployment sets,
// and returns once sharedmain started its controllers. InstallKnativeServing
// must have run. It is stopped by t.Cleanup and its log is printed when the
// test failed.
func StartKnative(t testing.TB, env *Env, opts KnativeOptions) *Knative {
	t.Helper()
	k := &Knative{
		Opts: opts,
		User: ServiceAccountUser(KnativeNamespace, KnativeServiceAccount),
		Bin:  WriterBinary(t, "knative-writer"),
		Log:  &Buffer{},
		env:  env,
	}
	k.Kubeconfig = env.Kubeconfig(t, k.User)
	k.waitRBAC(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- knative-writer log (last 40 lines) ---\n%s", k.Log.Tail(40))
		}
		k.proc.stop(t, "knative-writer")
	})
	// A second of draining instead of Knative's default, so that the
	// test's teardown does not wait for it.
	args := []string{"--kubeconfig", k.Kubeconfig, "--grace-period", "1s"}
	if opts.Resync > 0 {
		args = append(args, "--resync", opts.Resync.String())
	}
	args = append(args, opts.ExtraArgs...)
	// serving's config/core/deployments/webhook.yaml, with free ports for
	// the admission server (Knative refuses 0) and the profiling server,
	// which nothing calls here.
	envVars := []string{
		"SYSTEM_NAMESPACE=" + KnativeNamespace,
		"POD_NAME=webhook-e2e",
		"CONFIG_LOGGING_NAME=config-logging",
		"CONFIG_OBSERVABILITY_NAME=config-observability",
		"WEBHOOK_NAME=webhook",
		fmt.Sprintf("WEBHOOK_PORT=%d", FreePort(t)),
		"PROFILING_PORT=0",
	}
	k.StartedAt = k.proc.startReady(t, "knative-writer", k.Bin, args, envVars, k.Log, 30*time.Second,
		fmt.Sprintf("%q in its log (sharedmain started its controllers)", knativeStartedLine), logHas(knativeStartedLine))
	return k
}

// waitRBAC waits until serving's bindings reach the authorizer for the
// webhook's identity.
func (k *Knative) waitRBAC(t testing.TB) {
	t.Helper()
	kube := k.Kube(t)
	ctx := context.Background()
	Eventually(t, 10*time.Second, k.User.Name+" may list Secrets, webhook configurations and CRDs", func() bool {
		_, err1 := kube.CoreV1().Secrets(KnativeNamespace).List(ctx, metav1.ListOptions{Limit: 1})
		_, err2 := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{Limit: 1})
		_, err3 := kube.Discovery().RESTClient().Get().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions").Param("limit", "1").DoRaw(ctx)
		return err1 == nil && err2 == nil && err3 == nil
	})
}

// Kube is a clientset acting as the webhook's identity with serving's RBAC
// only (no role of the suite's added).
func (k *Knative) Kube(t testing.TB) kubernetes.Interface {
	t.Helper()
	return k.Client(t).Kube
}

// Client is a framework Client acting as the webhook's identity with
// serving's RBAC only, to write as it from outside its process.
func (k *Knative) Client(t testing.TB) *Client {
	t.Helper()
	return k.env.actingAs(t, k.User)
}

// SecretData reads webhook-certs as the admin.
func (k *Knative) SecretData(t testing.TB) map[string][]byte {
	t.Helper()
	s, err := k.env.AdminKube.CoreV1().Secrets(KnativeNamespace).Get(context.Background(), KnativeSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read Secret %s/%s: %v", KnativeNamespace, KnativeSecret, err)
	}
	return s.Data
}

// WaitCA waits until the Secret holds a complete certificate set whose
// ca-cert.pem is none of not, and returns that CA.
func (k *Knative) WaitCA(t testing.TB, timeout time.Duration, not ...[]byte) []byte {
	t.Helper()
	return WaitNewCA(t, timeout, "Knative wrote no new CA into Secret "+KnativeNamespace+"/"+KnativeSecret, k.Log, func() ([]byte, bool) {
		data := k.SecretData(t)
		return data[KnativeCAKey], len(data[KnativeCAKey]) > 0 && len(data[KnativeServerKey]) > 0
	}, not...)
}

// Rotate forces a rotation through Knative's own path: it removes
// server-key.pem from the Secret (as the admin), which fails the
// certificates reconciler's check exactly as a serving certificate expiring
// within a day does (both end in certresources.MakeSecret: a new CA and
// serving certificate). ca-cert.pem stays the old CA until the reconciler
// replaces the whole Secret's data. It returns once the new CA is in the
// Secret (at most 10 s).
func (k *Knative) Rotate(t testing.TB) Rotation {
	t.Helper()
	ctx := context.Background()
	secrets := k.env.AdminKube.CoreV1().Secrets(KnativeNamespace)
	var old []byte
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := secrets.Get(ctx, KnativeSecret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		old = s.Data[KnativeCAKey]
		if len(old) == 0 || len(s.Data[KnativeServerKey]) == 0 {
			return fmt.Errorf("the Secret holds no complete certificate set to rotate (keys: %v)", keys(s.Data))
		}
		delete(s.Data, KnativeServerKey)
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("force a rotation (remove %s from Secret %s/%s): %v", KnativeServerKey, KnativeNamespace, KnativeSecret, err)
	}
	rot := Rotation{Old: old, Triggered: time.Now()}
	rot.New = k.WaitCA(t, 10*time.Second, old)
	rot.Rotated = time.Now()
	return rot
}

// Bundles reads the caBundle of every KnativeTargets object, by
// "Kind/name", one per webhooks[] entry (one for the CRD).
func (k *Knative) Bundles(t testing.TB) map[string][][]byte {
	t.Helper()
	return targetBundles(t, k.env, KnativeTargets)
}

// WaitInjected polls every 10 ms until every caBundle of KnativeTargets is
// ca, byte for byte, and returns how long that took; after timeout it
// returns an error naming the objects that do not hold it.
func (k *Knative) WaitInjected(t testing.TB, ca []byte, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	return waitTargetBundles(t, k.env, KnativeTargets, "Knative", ca, timeout)
}

// KnativeQueues are the work queues (and logger names) of the
// reconcilers that write the CA into an object.
var KnativeQueues = []string{"DefaultingWebhook", "ValidationWebhook", "ConfigMapWebhook", "ConversionWebhook"}

// Reconciles counts the reconciles of queue's object that compared it
// with what the reconciler would write (and wrote it when they differed).
func (k *Knative) Reconciles(queue string) int {
	n := 0
	for _, l := range k.Log.Lines() {
		if !strings.Contains(l, `"logger":"webhook.`+queue+`"`) {
			continue
		}
		for _, msg := range []string{`"message":"Updating webhook"`, `"message":"Webhook is valid"`, `"message":"updating CRD"`, `"message":"CRD is up to date"`} {
			if strings.Contains(l, msg) {
				n++
			}
		}
	}
	return n
}

// RefusedInLog are Knative's log lines about a write kube-apiserver
// refused (by a webhook or a policy; not a conflict).
func (k *Knative) RefusedInLog() []string { return refusedLines(k.Log) }
