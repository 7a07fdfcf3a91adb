package perf

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/static"
	"github.com/webhook-guard/webhook-guard/webhook"
)

// The static shape's configurations: one mapping claims its configurations
// by name, one by a label. Neither claims the least policy's
// configuration, so the least policy's writes reach the guard (which
// allows what no mapping covers) and its policy, not the guard, is what
// create waits for.
const (
	caseNamed    = "static-named"
	caseSelected = "static-selected"
	// staticGuardSA is the guard's service account, whose grant switches
	// the skip condition on.
	staticGuardSA = "webhook-guard/webhook-guard"
)

// staticGuardConfig is the GuardConfig the static manifest's skip
// condition and the in-process guard are built from: the owner writes the
// named and the label-selected configurations of every entry count, with
// both CAs of the rotation in its CA Secret.
func staticGuardConfig() string {
	var named []string
	for _, n := range entryCounts {
		named = append(named, staticConfigName(caseNamed, n))
	}
	owner := `
    writers: {serviceAccounts: [` + apiNamespace + `/` + apiOwnerSA + `]}
    ca: {secret: {namespace: ` + apiNamespace + `, name: ` + apiCASecret + `, key: ca.crt}}`
	return `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
defaultMode: enforce
breakGlass:
  users: [` + apiAdmin + `]
owners:
  - name: named
    match: {validating: [` + strings.Join(named, ", ") + `]}` + owner + `
  - name: selected
    match: {labelSelector: {matchLabels: {` + apiCaseKey + `: ` + caseSelected + `}}}` + owner + `
`
}

func staticConfigName(kase string, n int) string { return fmt.Sprintf("bench-%s-%d", kase, n) }

// staticWrite is one kind of owner write of a configuration the static
// guard covers.
type staticWrite struct {
	name string
	// retime changes the first entry's timeout (a new generation);
	// rotate moves every entry's caBundle to the other CA of the owner's
	// CA Secret; otherwise the write changes an annotation.
	retime, rotate bool
}

// staticWrites: two writes the skip condition decides in kube-apiserver,
// and the write the guard exists for.
var staticWrites = []staticWrite{
	{name: "annotation"},
	{name: "timeout", retime: true},
	{name: "cabundle", rotate: true},
}

// BenchmarkAPIServerStatic measures what a real kube-apiserver spends in
// its ValidatingAdmissionWebhook plugin on one owner write of a
// configuration the static webhook guards (docs/performance.md), against
// the least policy's ordinary write (its ValidatingAdmissionPolicy plugin)
// in the same run, both from kube-apiserver's own admission histogram.
// The manifest carries the skip condition and its grant is in place, so
// the annotation and timeout writes are decided in kube-apiserver and the
// caBundle change calls the guard, served in-process over TLS; every
// write is checked against kube-apiserver's count of calls to the guard's
// entry, so a skip that does not happen fails the benchmark. ns/write and
// least-ns/write are medians over the op's writes, x-least their ratio,
// guard-calls/write the calls per write (0 or 1). The timeout write is
// also paired with the floor policy's (floor-ns/write, x-floor): a write
// that changes an entry makes any correct skip read the stored entries,
// which the least policy never does.
func BenchmarkAPIServerStatic(b *testing.B) {
	s := startStaticAPIServer(b, nil)
	for _, n := range entryCounts {
		objs := map[string]*admv1.ValidatingWebhookConfiguration{
			caseLeast: s.create(b, apiConfig(staticConfigName(caseLeast, n), caseLeast, n, s.Cur.PEM)),
			caseFloor: s.create(b, apiConfig(staticConfigName(caseFloor, n), caseFloor, n, s.Cur.PEM)),
		}
		for _, kase := range []string{caseNamed, caseSelected} {
			objs[kase] = s.create(b, apiConfig(staticConfigName(kase, n), kase, n, s.Cur.PEM))
			for _, w := range staticWrites {
				b.Run(fmt.Sprintf("entries=%d/mapping=%s/write=%s", n, strings.TrimPrefix(kase, "static-"), w.name),
					func(b *testing.B) { s.runStatic(b, objs, kase, w) })
			}
		}
	}
	// The same writes under the least skip any correct condition could
	// be (leastSkip), in a control plane of their own: what bounds the
	// rows above from below. For a write that changes an entry it is not
	// the least policy, which reads one object's caBundles.
	s.stop()
	floor := startStaticAPIServer(b, leastSkip)
	for _, n := range entryCounts {
		objs := map[string]*admv1.ValidatingWebhookConfiguration{
			caseLeast: floor.create(b, apiConfig(staticConfigName(caseLeast, n), caseLeast, n, floor.Cur.PEM)),
			caseFloor: floor.create(b, apiConfig(staticConfigName(caseFloor, n), caseFloor, n, floor.Cur.PEM)),
			caseNamed: floor.create(b, apiConfig(staticConfigName(caseNamed, n), caseNamed, n, floor.Cur.PEM)),
		}
		for _, w := range staticWrites {
			if !w.rotate {
				b.Run(fmt.Sprintf("entries=%d/least-skip/write=%s", n, w.name), func(b *testing.B) { floor.runStatic(b, objs, caseNamed, w) })
			}
		}
	}
}

// leastSkip is a skip condition that does only what every correct one
// must for a writer's write that leaves the trust alone: know the
// caBundles unchanged (from the generation, or else, not knowing the
// owner's CA, by comparing every caBundle with the stored one: a rotation
// must reach the guard, which counts it), and hold only while the grant
// does. It leaves out the subject, the owner, the endpoints and the CA
// pointer, so it skips writes the guard must see: a yardstick, never a
// manifest.
func leastSkip(s *static.Skip) string {
	return `!(request.operation == "UPDATE" && (has(object.metadata.generation) && has(oldObject.metadata.generation) && ` +
		`object.metadata.generation == oldObject.metadata.generation || has(object.webhooks) && has(oldObject.webhooks) && ` +
		`size(object.webhooks) == size(oldObject.webhooks) && ` +
		`object.webhooks.all(i, e, e.clientConfig.?caBundle == oldObject.webhooks[i].clientConfig.?caBundle)) && ` + s.Grant() + `)`
}

// runStatic measures write w of configuration kase against the least
// policy's write of the same kind (an annotation for the caBundle change),
// pair by pair.
func (s *apiServer) runStatic(b *testing.B, objs map[string]*admv1.ValidatingWebhookConfiguration, kase string, w staticWrite) {
	ctx := b.Context()
	var took, least, floor []time.Duration
	calls := 0
	b.ResetTimer()
	for range b.N * apiPairsPerOp {
		least = append(least, s.leastWrite(b, objs, w.retime))
		if w.retime {
			d, err := s.measureOrdinary(ctx, objs, caseFloor, true)
			if err != nil {
				b.Fatalf("floor policy, %s write: %v", w.name, err)
			}
			floor = append(floor, d)
		}
		m, err := s.measurePlugin(ctx, pluginWebhook, nil, func() (err error) { objs[kase], err = s.staticWrite(ctx, objs[kase], w); return err })
		if err != nil {
			b.Fatalf("static guard, %s write: %v", w.name, err)
		}
		want := 0
		if w.rotate {
			want = 1
		}
		if m.guardCalls != want {
			b.Fatalf("static guard, the owner's %s write of %s: kube-apiserver called the guard's entry %s %d times, want %d",
				w.name, objs[kase].Name, static.WebhookName, m.guardCalls, want)
		}
		took, calls = append(took, m.took), calls+m.guardCalls
	}
	b.StopTimer()
	t := reportAgainstLeast(b, took, least)
	if w.retime {
		f := median(floor)
		b.ReportMetric(float64(f.Nanoseconds()), "floor-ns/write")
		b.ReportMetric(float64(t)/float64(f), "x-floor")
	}
	b.ReportMetric(float64(calls)/float64(len(took)), "guard-calls/write")
}

// staticWrite is the owner's write w of c.
func (s *apiServer) staticWrite(ctx context.Context, c *admv1.ValidatingWebhookConfiguration, w staticWrite) (*admv1.ValidatingWebhookConfiguration, error) {
	if !w.rotate {
		return s.ordinary(ctx, c, w.retime)
	}
	next := s.Old.PEM
	if bytes.Equal(c.Webhooks[0].ClientConfig.CABundle, next) {
		next = s.Cur.PEM
	}
	c = c.DeepCopy()
	for i := range c.Webhooks {
		c.Webhooks[i].ClientConfig.CABundle = next
	}
	return s.owner.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, c, metav1.UpdateOptions{})
}

// startStaticAPIServer serves the guard in-process over TLS, starts the
// control plane with the static manifest (skip condition included) that
// points at it, and installs the least policy and the skip grant. With
// skip set, the enforcing entry's skip condition is skip's instead of the
// rendered one.
func startStaticAPIServer(b *testing.B, skip func(*static.Skip) string) *apiServer {
	b.Helper()
	s := newAPIServer(b)
	config := staticGuardConfig()
	cfg, err := policy.Load([]byte(config))
	if err != nil {
		b.Fatal(err)
	}
	guardURL, guardCA := s.serveGuard(b, config)
	dir := b.TempDir()
	in := static.Input{
		URL:            guardURL,
		CABundle:       guardCA,
		BreakGlass:     cfg.Spec.BreakGlass,
		FailurePolicy:  admv1.Fail,
		TimeoutSeconds: 5,
		Skip:           &static.Skip{Config: &cfg.Spec, Fingerprint: static.Fingerprint([]byte(config)), GrantServiceAccount: staticGuardSA},
	}
	vwc, err := static.ValidatingWebhookConfiguration(in)
	if err != nil {
		b.Fatal(err)
	}
	if skip != nil {
		conditions := vwc.Webhooks[0].MatchConditions
		if last := &conditions[len(conditions)-1]; last.Name == static.SkipConditionName {
			last.Expression = skip(in.Skip)
		} else {
			b.Fatalf("the enforcing entry's last matchCondition is %q, not the skip condition", last.Name)
		}
	}
	manifest, err := yaml.Marshal(vwc)
	if err != nil {
		b.Fatal(err)
	}
	admission, err := static.AdmissionConfiguration(filepath.Join(dir, "static"))
	if err != nil {
		b.Fatal(err)
	}
	for name, data := range map[string][]byte{filepath.Join("static", static.ConfigName+".yaml"): manifest, "admission-configuration.yaml": admission} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	s.start(b, filepath.Join(dir, "admission-configuration.yaml"))
	s.installStatic(b, static.Fingerprint([]byte(config)))
	return s
}

// serveGuard serves the guard's Handler for config as `serve` does (the
// controller-runtime webhook server's mux) over TLS on 127.0.0.1, with the
// owner's CA Secret holding both CAs of the rotation; it returns the
// webhook's URL and the CA of its serving certificate.
func (s *apiServer) serveGuard(b *testing.B, config string) (url string, caPEM []byte) {
	b.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: apiNamespace, Name: apiCASecret},
		Data:       map[string][]byte{"ca.crt": slices.Concat(s.Old.PEM, s.Cur.PEM)},
	}
	h, err := Guard(nil, config, secret)
	if err != nil {
		b.Fatal(err)
	}
	// The guard's request logs are not measured; without a logger
	// controller-runtime prints a stack trace into the benchmark's output.
	ctrllog.SetLogger(logr.Discard())
	srv := ctrlwebhook.NewServer(ctrlwebhook.Options{})
	srv.Register(webhook.Path, h)
	ca := framework.NewCA(b, "bench-guard-ca")
	leaf := ca.Issue(b, "webhook-guard")
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv.WebhookMux())
	ts.EnableHTTP2 = true
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	ts.StartTLS()
	b.Cleanup(ts.Close)
	return ts.URL + webhook.Path, ca.PEM
}

// installStatic creates the least policy and its binding, and the skip
// grant for fingerprint, and waits until the grant is in force: the
// owner's annotation of a configuration the guard covers no longer reaches
// the guard.
func (s *apiServer) installStatic(b *testing.B, fingerprint string) {
	b.Helper()
	ctx := b.Context()
	objs, err := s.generated()
	if err != nil {
		b.Fatal(err)
	}
	least, leastBinding := leastPolicy(objs.Policies[0], s.Cur)
	floor, floorBinding := floorPolicy(objs.Policies[0], s.Cur)
	api := s.admin.AdmissionregistrationV1()
	for i, p := range []*admv1.ValidatingAdmissionPolicy{least, floor} {
		if _, err := api.ValidatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil {
			b.Fatalf("create policy %s: %v", p.Name, err)
		}
		bd := []*admv1.ValidatingAdmissionPolicyBinding{leastBinding, floorBinding}[i]
		if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, bd, metav1.CreateOptions{}); err != nil {
			b.Fatalf("create binding %s: %v", bd.Name, err)
		}
	}
	role, binding := static.SkipGrant(staticGuardSA, fingerprint)
	if _, err := s.admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		b.Fatalf("create the skip grant's ClusterRole: %v", err)
	}
	if _, err := s.admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		b.Fatalf("create the skip grant's ClusterRoleBinding: %v", err)
	}
	c := s.create(b, apiConfig("bench-static-grant", caseSelected, 1, s.Cur.PEM))
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, err := s.measurePlugin(ctx, pluginWebhook, nil, func() (err error) { c, err = s.annotate(ctx, c); return err })
		if err != nil {
			b.Fatalf("the owner's annotation of %s: %v", c.Name, err)
		}
		if m.guardCalls == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the owner's annotation of %s still reaches the guard 60s after the skip grant was created", c.Name)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := api.ValidatingWebhookConfigurations().Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil {
		b.Fatal(err)
	}
}
