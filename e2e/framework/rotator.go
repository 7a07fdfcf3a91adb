package framework

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Gatekeeper's names for what its certificate rotator manages
// (charts/gatekeeper of open-policy-agent/gatekeeper).
const (
	GatekeeperNamespace      = "gatekeeper-system"
	GatekeeperServiceAccount = "gatekeeper-admin"
	GatekeeperSecret         = "gatekeeper-webhook-server-cert"
	GatekeeperValidating     = "gatekeeper-validating-webhook-configuration"
	GatekeeperMutating       = "gatekeeper-mutating-webhook-configuration"
)

// RotatorOptions configure one run of the real cert-controller rotator
// (e2e/writers/rotator). Zero values are Gatekeeper's.
type RotatorOptions struct {
	// Namespace and ServiceAccount are the rotator's identity; the Secret
	// lives in Namespace.
	Namespace, ServiceAccount string
	// Secret holds ca.crt, ca.key, tls.crt and tls.key. StartRotator creates
	// it empty when it does not exist, as Gatekeeper's chart does.
	Secret string
	// Validating and Mutating name the configurations the CA is written
	// into (default: Gatekeeper's two).
	Validating, Mutating []string
	// CACertDuration, ServerCertDuration, Lookahead and
	// RotationCheckFrequency are the rotator's fields of the same names;
	// zero keeps the package defaults (10 years, 1 year, 90 days, 12 hours).
	// A CA is regenerated once it is not valid at now+Lookahead, so
	// CACertDuration = Lookahead + d rotates the CA every d or so.
	CACertDuration, ServerCertDuration, Lookahead, RotationCheckFrequency time.Duration
	// FieldOwner is the rotator's FieldOwner; empty, as Gatekeeper leaves it.
	FieldOwner string
	// UserAgent replaces the binary's default, which has Gatekeeper's form
	// (gatekeeper/<version> (<os>/<arch>) ...), so that kube-apiserver
	// names the field manager "gatekeeper" as for Gatekeeper itself.
	UserAgent string
	// ExtraArgs are appended to the binary's arguments.
	ExtraArgs []string
}

// Rotator is a running e2e/writers/rotator process: cert-controller's
// CertRotator in a controller-runtime manager, acting as its own service
// account with the RBAC Gatekeeper's chart grants.
type Rotator struct {
	Opts RotatorOptions
	// User is the identity it acts as.
	User envtest.User
	// Bin is the built binary; Kubeconfig its identity; CertDir where it
	// projects the Secret.
	Bin, Kubeconfig, CertDir string
	// Log holds its stderr (controller-runtime's JSON lines), across restarts.
	Log *Buffer
	// StartedAt is when the process was last started.
	StartedAt time.Time

	env *Env

	proc process
}

// rotatorStartedLine is what the rotator logs once its cache synced and
// its first certificate check ran (CertRotator.Start).
const rotatorStartedLine = "starting cert rotator controller"

// StartRotator creates the rotator's namespace, RBAC and (empty) Secret as
// Gatekeeper's chart does, starts the rotator as
// system:serviceaccount:<Namespace>:<ServiceAccount>, and returns once it
// ran its first certificate check. It is stopped by t.Cleanup and its log is
// printed when the test failed.
func StartRotator(t testing.TB, env *Env, opts RotatorOptions) *Rotator {
	t.Helper()
	if opts.Namespace == "" {
		opts.Namespace = GatekeeperNamespace
	}
	if opts.ServiceAccount == "" {
		opts.ServiceAccount = GatekeeperServiceAccount
	}
	if opts.Secret == "" {
		opts.Secret = GatekeeperSecret
	}
	if len(opts.Validating) == 0 && len(opts.Mutating) == 0 {
		opts.Validating, opts.Mutating = []string{GatekeeperValidating}, []string{GatekeeperMutating}
	}
	r := &Rotator{
		Opts:    opts,
		User:    ServiceAccountUser(opts.Namespace, opts.ServiceAccount),
		Bin:     BuildBinary(t, "./e2e/writers/rotator"),
		CertDir: filepath.Join(t.TempDir(), "certs"),
		Log:     &Buffer{},
		env:     env,
	}
	env.EnsureNamespace(t, opts.Namespace)
	r.grantChartRBAC(t)
	r.ensureSecret(t)
	r.Kubeconfig = env.Kubeconfig(t, r.User)
	r.waitRBAC(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- rotator log (last 40 lines) ---\n%s", r.Log.Tail(40))
		}
		r.Stop(t)
	})
	r.Start(t)
	return r
}

// grantChartRBAC grants what Gatekeeper's chart grants its controller
// manager for the Secret and the webhook configurations: cluster-wide read
// (the chart's get/list/watch on */*, narrowed here to the two kinds the
// rotator reads: its cache lists and watches all of them), writes to the
// named configurations only (resourceNames), and in its namespace every verb
// on Secrets and create/patch on Events (Role gatekeeper-manager-role).
func (r *Rotator) grantChartRBAC(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	name := "e2e-rotator:" + r.Opts.Namespace + ":" + r.Opts.ServiceAccount
	rules := []rbacv1.PolicyRule{{
		APIGroups: []string{"admissionregistration.k8s.io"},
		Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"},
		Verbs:     []string{"get", "list", "watch"},
	}}
	// An empty resourceNames would grant every name: add a rule only for
	// names there are.
	if len(r.Opts.Validating) > 0 {
		rules = append(rules, rbacv1.PolicyRule{
			APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations"},
			ResourceNames: r.Opts.Validating, Verbs: []string{"create", "delete", "get", "list", "patch", "update", "watch"},
		})
	}
	if len(r.Opts.Mutating) > 0 {
		rules = append(rules, rbacv1.PolicyRule{
			APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"},
			ResourceNames: r.Opts.Mutating, Verbs: []string{"get", "list", "patch", "update", "watch"},
		})
	}
	subject := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: r.User.Name}}
	if _, err := r.env.AdminKube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules,
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create the rotator's ClusterRole: %v", err)
	}
	if _, err := r.env.AdminKube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   subject,
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("bind the rotator's ClusterRole: %v", err)
	}
	if _, err := r.env.AdminKube.RbacV1().Roles(r.Opts.Namespace).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "delete", "get", "list", "patch", "update", "watch"}},
		},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create the rotator's Role: %v", err)
	}
	if _, err := r.env.AdminKube.RbacV1().RoleBindings(r.Opts.Namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   subject,
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("bind the rotator's Role: %v", err)
	}
}

// ensureSecret creates the Secret empty, as Gatekeeper's chart does (the
// rotator updates it and never creates it).
func (r *Rotator) ensureSecret(t testing.TB) {
	t.Helper()
	_, err := r.env.AdminKube.CoreV1().Secrets(r.Opts.Namespace).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: r.Opts.Secret, Labels: map[string]string{"gatekeeper.sh/system": "yes"}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create the rotator's Secret: %v", err)
	}
}

// waitRBAC waits until the rotator's identity may list what its caches
// list (RBAC reaches the authorizer through an informer).
func (r *Rotator) waitRBAC(t testing.TB) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", r.Kubeconfig)
	if err != nil {
		t.Fatalf("load the rotator's kubeconfig: %v", err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	Eventually(t, 10*time.Second, r.User.Name+" may list Secrets and webhook configurations", func() bool {
		_, err1 := kube.CoreV1().Secrets(r.Opts.Namespace).List(ctx, metav1.ListOptions{Limit: 1})
		_, err2 := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{Limit: 1})
		_, err3 := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{Limit: 1})
		return err1 == nil && err2 == nil && err3 == nil
	})
}

// Args are the binary's arguments.
func (r *Rotator) Args() []string {
	args := []string{
		"--kubeconfig", r.Kubeconfig,
		"--namespace", r.Opts.Namespace,
		"--secret", r.Opts.Secret,
		"--cert-dir", r.CertDir,
	}
	for _, n := range r.Opts.Validating {
		args = append(args, "--validating", n)
	}
	for _, n := range r.Opts.Mutating {
		args = append(args, "--mutating", n)
	}
	for _, d := range []struct {
		flag string
		d    time.Duration
	}{
		{"--ca-cert-duration", r.Opts.CACertDuration},
		{"--server-cert-duration", r.Opts.ServerCertDuration},
		{"--lookahead", r.Opts.Lookahead},
		{"--rotation-check-frequency", r.Opts.RotationCheckFrequency},
	} {
		if d.d != 0 {
			args = append(args, d.flag, d.d.String())
		}
	}
	if r.Opts.FieldOwner != "" {
		args = append(args, "--field-owner", r.Opts.FieldOwner)
	}
	if r.Opts.UserAgent != "" {
		args = append(args, "--user-agent", r.Opts.UserAgent)
	}
	return append(args, r.Opts.ExtraArgs...)
}

// Start runs the rotator and waits (at most 30 s) until it ran its first
// certificate check. StartRotator calls it; call it again after Stop to
// restart the process.
func (r *Rotator) Start(t testing.TB) {
	t.Helper()
	r.StartedAt = r.proc.startReady(t, "the rotator", r.Bin, r.Args(), nil, r.Log, 30*time.Second,
		fmt.Sprintf("%q in its log (its first certificate check)", rotatorStartedLine), logHas(rotatorStartedLine))
}

// Stop terminates the rotator (SIGTERM, then SIGKILL after 10 s). It is
// safe to call more than once.
func (r *Rotator) Stop(t testing.TB) {
	t.Helper()
	r.proc.stop(t, "the rotator")
}

// Running reports whether the process is alive.
func (r *Rotator) Running() bool { return r.proc.running() }

// SecretData reads the rotator's Secret as the admin.
func (r *Rotator) SecretData(t testing.TB) map[string][]byte {
	t.Helper()
	s, err := r.env.AdminKube.CoreV1().Secrets(r.Opts.Namespace).Get(context.Background(), r.Opts.Secret, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read the rotator's Secret: %v", err)
	}
	return s.Data
}

// CA is the Secret's ca.crt (empty before the rotator wrote one).
func (r *Rotator) CA(t testing.TB) []byte {
	t.Helper()
	return r.SecretData(t)["ca.crt"]
}

// WaitCA waits until the Secret's ca.crt is neither empty nor any of not,
// polling every 10 ms, and returns it.
func (r *Rotator) WaitCA(t testing.TB, timeout time.Duration, not ...[]byte) []byte {
	t.Helper()
	return WaitNewCA(t, timeout, "the rotator wrote no new CA into Secret "+r.Opts.Namespace+"/"+r.Opts.Secret, r.Log, func() ([]byte, bool) {
		data := r.SecretData(t)
		return data["ca.crt"], len(data["ca.crt"]) > 0 && len(data["ca.key"]) > 0
	}, not...)
}

// Rotation is one CA rotation Rotate forced.
type Rotation struct {
	Old, New []byte
	// Triggered is when the Secret write that forced it returned; Rotated
	// when the new CA was first seen in the Secret.
	Triggered, Rotated time.Time
}

// Rotate forces a CA rotation the way the rotator's own check decides one:
// it removes ca.key from the Secret (as the admin), so that the CA no
// longer passes CertRotator's validity check (the same check that fails
// when the CA expires within the lookahead), and the Secret's update event
// makes the rotator check at once instead of at its next tick. ca.crt stays
// the old CA until the rotator writes the new one, as in an expiry-driven
// rotation. Rotate returns once the new CA is in the Secret (at most 10 s).
func (r *Rotator) Rotate(t testing.TB) Rotation {
	t.Helper()
	ctx := context.Background()
	secrets := r.env.AdminKube.CoreV1().Secrets(r.Opts.Namespace)
	var old []byte
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := secrets.Get(ctx, r.Opts.Secret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		old = s.Data["ca.crt"]
		if len(old) == 0 || len(s.Data["ca.key"]) == 0 {
			return fmt.Errorf("the Secret holds no complete CA to rotate (keys: %v)", keys(s.Data))
		}
		delete(s.Data, "ca.key")
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("force a rotation (remove ca.key from Secret %s/%s): %v", r.Opts.Namespace, r.Opts.Secret, err)
	}
	rot := Rotation{Old: old, Triggered: time.Now()}
	rot.New = r.WaitCA(t, 10*time.Second, old)
	rot.Rotated = time.Now()
	return rot
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Bundles reads every webhooks[] caBundle of the rotator's configurations,
// by "Kind/name".
func (r *Rotator) Bundles(t testing.TB) map[string][][]byte {
	t.Helper()
	ctx := context.Background()
	out := map[string][][]byte{}
	api := r.env.AdminKube.AdmissionregistrationV1()
	for _, n := range r.Opts.Validating {
		o, err := api.ValidatingWebhookConfigurations().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get ValidatingWebhookConfiguration %s: %v", n, err)
		}
		for _, w := range o.Webhooks {
			out[string(Validating)+"/"+n] = append(out[string(Validating)+"/"+n], w.ClientConfig.CABundle)
		}
	}
	for _, n := range r.Opts.Mutating {
		o, err := api.MutatingWebhookConfigurations().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get MutatingWebhookConfiguration %s: %v", n, err)
		}
		for _, w := range o.Webhooks {
			out[string(Mutating)+"/"+n] = append(out[string(Mutating)+"/"+n], w.ClientConfig.CABundle)
		}
	}
	return out
}

// injected says whether every entry holds exactly ca, and if not which
// entries do not.
func (r *Rotator) injected(t testing.TB, ca []byte) (bool, string) {
	t.Helper()
	var off []string
	for name, bundles := range r.Bundles(t) {
		if len(bundles) == 0 {
			off = append(off, name+" has no webhooks[]")
		}
		for i, b := range bundles {
			if !bytes.Equal(b, ca) {
				off = append(off, fmt.Sprintf("%s webhooks[%d] holds %d bytes", name, i, len(b)))
			}
		}
	}
	return len(off) == 0, strings.Join(off, "; ")
}

// WaitInjectedCurrent polls every 10 ms until every webhooks[] entry of
// the rotator's configurations holds the CA the Secret holds at that
// moment, and returns that CA. A rotator whose CA lives seconds may
// rotate again before its first CA reaches every entry; waiting for one
// particular CA would then wait for a CA no writer will inject again.
func (r *Rotator) WaitInjectedCurrent(t testing.TB, timeout time.Duration) ([]byte, error) {
	t.Helper()
	start := time.Now()
	for {
		ca := r.CA(t)
		ok, off := r.injected(t, ca)
		if ok && len(ca) > 0 {
			return ca, nil
		}
		if time.Since(start) > timeout {
			return nil, fmt.Errorf("after %s not every entry holds the Secret's current CA (%d bytes): %s", timeout, len(ca), off)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitInjected polls every 10 ms until every webhooks[] entry of the
// rotator's configurations holds exactly ca (byte for byte) and returns how
// long that took; after timeout it returns an error naming the entries
// that do not.
func (r *Rotator) WaitInjected(t testing.TB, ca []byte, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	for {
		ok, off := r.injected(t, ca)
		if ok {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return time.Since(start), fmt.Errorf("after %s not every entry holds the rotator's CA (%d bytes): %s", timeout, len(ca), off)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
