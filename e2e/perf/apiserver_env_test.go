package perf

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/static"
	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// The identities and objects of the kube-apiserver benchmark. Each policy
// selects its configurations by a label, so a write evaluates the CEL of
// one policy (or of one mapping's two) and only label selectors of the
// others: what kube-apiserver pays per write is that policy's.
const (
	apiNamespace = "bench"
	apiOwnerSA   = "owner"
	apiOwnerUser = "system:serviceaccount:" + apiNamespace + ":" + apiOwnerSA
	// apiAdmin is break-glass: it sets up the states the owner writes from.
	apiAdmin    = "bench-admin"
	apiCaseKey  = "bench.webhook-guard.io/case"
	apiCASecret = "bench-ca"
	// The policies' cases: the least policy, the generated policy with the
	// CA as a literal, and with the CA Secret as its param.
	caseLeast = "least"
	// caseFloor is the least policy that also keeps what an ordinary write
	// must keep (floorPolicy).
	caseFloor = "floor"
	caseLit   = "literal"
	caseParam = "param"
)

// apiGuardConfig maps one label each to the literal and the param mapping.
const apiGuardConfig = `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
defaultMode: enforce
breakGlass:
  users: [` + apiAdmin + `]
owners:
  - name: ` + caseLit + `
    match: {labelSelector: {matchLabels: {` + apiCaseKey + `: ` + caseLit + `}}}
    writers: {serviceAccounts: [` + apiNamespace + `/` + apiOwnerSA + `]}
    ca: {secret: {namespace: ` + apiNamespace + `, name: ` + apiCASecret + `, key: ca.crt}}
  - name: ` + caseParam + `
    match: {labelSelector: {matchLabels: {` + apiCaseKey + `: ` + caseParam + `}}}
    writers: {serviceAccounts: [` + apiNamespace + `/` + apiOwnerSA + `]}
    ca: {secret: {namespace: ` + apiNamespace + `, name: ` + apiCASecret + `, key: ca.crt}}
`

// apiServer is one etcd and kube-apiserver, with the policies installed.
type apiServer struct {
	admin, owner kubernetes.Interface
	// Old is the CA before the rotation, Cur the owner's current CA.
	Old, Cur CA
	// stop stops the control plane before b.Cleanup would, so that the
	// next server measured in the same benchmark runs alone.
	stop func()
}

// startAPIServer starts the control plane from bin/ and installs the least
// policy and the generated ones; b.Cleanup stops it.
func startAPIServer(b *testing.B) *apiServer {
	b.Helper()
	s := newAPIServer(b)
	s.start(b, "")
	s.install(b)
	return s
}

// newAPIServer generates the owner's CAs, before anything is started.
func newAPIServer(b *testing.B) *apiServer {
	b.Helper()
	s := &apiServer{}
	var err error
	if s.Old, err = NewCA("bench-ca-old"); err != nil {
		b.Fatal(err)
	}
	if s.Cur, err = NewCA("bench-ca-current"); err != nil {
		b.Fatal(err)
	}
	return s
}

// start starts etcd and kube-apiserver from bin/, with the
// AdmissionConfiguration file admissionConfig when it is set, and makes
// the admin's and the owner's clients; b.Cleanup stops them.
func (s *apiServer) start(b *testing.B, admissionConfig string) {
	b.Helper()
	bin := framework.RequireControlPlane(b)
	env := &envtest.Environment{BinaryAssetsDirectory: bin, ControlPlaneStartTimeout: 90 * time.Second, ControlPlaneStopTimeout: 30 * time.Second}
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(bin, "etcd")}
	api := env.ControlPlane.GetAPIServer()
	api.Path = filepath.Join(bin, "kube-apiserver")
	if admissionConfig != "" {
		api.Configure().Set("admission-control-config-file", admissionConfig)
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		b.Fatalf("start kube-apiserver and etcd: %v", err)
	}
	var once sync.Once
	s.stop = func() { once.Do(func() { _ = env.Stop() }) }
	b.Cleanup(s.stop)
	// Both are system:masters so that RBAC never decides; only the owner
	// is a writer of the mappings, only the admin is break-glass.
	for name, c := range map[string]*kubernetes.Interface{apiAdmin: &s.admin, apiOwnerUser: &s.owner} {
		u, err := env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, cfg)
		if err != nil {
			b.Fatal(err)
		}
		rc := u.Config()
		// The static guard warns about every break-glass write (the
		// admin's set-ups); they are expected, not news.
		rc.WarningHandler = rest.NoWarnings{}
		*c = kubernetes.NewForConfigOrDie(rc)
	}
}

// install creates the CA Secret, the policies and their bindings.
func (s *apiServer) install(b *testing.B) {
	b.Helper()
	ctx := b.Context()
	if _, err := s.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: apiNamespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: apiNamespace, Name: apiCASecret}, Data: map[string][]byte{"ca.crt": s.Cur.PEM}}
	if _, err := s.admin.CoreV1().Secrets(apiNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	objs, err := s.generated()
	if err != nil {
		b.Fatal(err)
	}
	least, leastBinding := leastPolicy(objs.Policies[0], s.Cur)
	floor, floorBinding := floorPolicy(objs.Policies[0], s.Cur)
	objs.Policies, objs.Bindings = append(objs.Policies, least, floor), append(objs.Bindings, leastBinding, floorBinding)
	api := s.admin.AdmissionregistrationV1()
	for _, p := range objs.Policies {
		if _, err := api.ValidatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil {
			b.Fatalf("create policy %s: %v", p.Name, err)
		}
	}
	for _, bd := range objs.Bindings {
		if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, bd, metav1.CreateOptions{}); err != nil {
			b.Fatalf("create binding %s: %v", bd.Name, err)
		}
	}
}

// generated are the guard's policies for apiGuardConfig: the literal
// mapping's one, the param mapping's two.
func (s *apiServer) generated() (*vap.Objects, error) {
	cfg, err := policy.Load([]byte(apiGuardConfig))
	if err != nil {
		return nil, err
	}
	param := &guardapi.KeyRef{Namespace: apiNamespace, Name: apiCASecret, Key: "ca.crt"}
	return vap.Generate(vap.Input{Config: cfg, CAs: map[string]vap.CA{
		caseLit:   {PEM: s.Cur.PEM},
		caseParam: {PEM: s.Cur.PEM, Param: param},
	}})
}

// leastPolicy is the least a policy of caBundles can check, matched as the
// generated policy gen is (its selector aside) and bound the same way:
// every entry's caBundle is the owner's CA.
func leastPolicy(gen *admv1.ValidatingAdmissionPolicy, ca CA) (*admv1.ValidatingAdmissionPolicy, *admv1.ValidatingAdmissionPolicyBinding) {
	match := gen.Spec.MatchConstraints.DeepCopy()
	match.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{apiCaseKey: caseLeast}}
	name := "bench-least"
	p := &admv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: match,
			FailurePolicy:    ptr.To(admv1.Fail),
			Validations: []admv1.Validation{{Expression: `object.webhooks.all(w, string(w.clientConfig.caBundle) == ` +
				vap.CELString(base64.StdEncoding.EncodeToString(ca.PEM)) + `)`}},
		},
	}
	bd := &admv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admv1.ValidationAction{admv1.Deny}},
	}
	return p, bd
}

// floorPolicy is the least policy that keeps, for an owner's write that
// changes an entry, what the generated policy must keep without reading
// the generation: every entry keeps its name and position, and every
// caBundle is the CA or, entry by entry, the stored one. It skips the
// break-glass admin as the generated policy does (one matchCondition), so
// that the benchmark can set its bundles. A write of an entry costs any
// policy that keeps these rules at least this much: the stored entries
// must be read, which the least policy never does.
func floorPolicy(gen *admv1.ValidatingAdmissionPolicy, ca CA) (*admv1.ValidatingAdmissionPolicy, *admv1.ValidatingAdmissionPolicyBinding) {
	p, bd := leastPolicy(gen, ca)
	name := "bench-floor"
	p.Name, bd.Name, bd.Spec.PolicyName = name, name, name
	p.Spec.MatchConstraints.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{apiCaseKey: caseFloor}}
	p.Spec.MatchConditions = []admv1.MatchCondition{{Name: "not-break-glass", Expression: `request.userInfo.username != "` + apiAdmin + `"`}}
	bundles := func(o string) string { return o + `.webhooks.map(w, string(w.clientConfig.caBundle))` }
	p.Spec.Validations = []admv1.Validation{{Expression: `request.operation != "UPDATE" || ` +
		`object.webhooks.map(w, w.name) == oldObject.webhooks.map(w, w.name) && (` + p.Spec.Validations[0].Expression +
		` || ` + bundles("object") + ` == ` + bundles("oldObject") + `)`}}
	return p, bd
}

// apiConfig is a ValidatingWebhookConfiguration of n entries of the case,
// every caBundle bundle.
func apiConfig(name, kase string, n int, bundle []byte) *admv1.ValidatingWebhookConfiguration {
	c := configuration(n, bundle)
	c.ObjectMeta = metav1.ObjectMeta{Name: name, Labels: map[string]string{apiCaseKey: kase}}
	return c
}

// create makes the configuration (as break-glass) and waits until its
// policy denies the owner a caBundle it must refuse: kube-apiserver loads
// policies and bindings asynchronously.
func (s *apiServer) create(b *testing.B, c *admv1.ValidatingWebhookConfiguration) *admv1.ValidatingWebhookConfiguration {
	b.Helper()
	ctx := b.Context()
	api := s.admin.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	got, err := api.Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		b.Fatalf("create %s: %v", c.Name, err)
	}
	probe := got.DeepCopy()
	for i := range probe.Webhooks {
		probe.Webhooks[i].ClientConfig.CABundle = []byte("not the owner's CA")
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := s.owner.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, probe, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "denied") {
			return got
		}
		if time.Now().After(deadline) {
			b.Fatalf("the policy of %s does not deny the owner a foreign caBundle after 60s (last answer: %v)", c.Name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// setBundles rewrites every caBundle of c as break-glass (the policies skip
// it) and returns the stored object.
func (s *apiServer) setBundles(ctx context.Context, c *admv1.ValidatingWebhookConfiguration, bundle []byte) (*admv1.ValidatingWebhookConfiguration, error) {
	c = c.DeepCopy()
	for i := range c.Webhooks {
		c.Webhooks[i].ClientConfig.CABundle = bundle
	}
	return s.admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, c, metav1.UpdateOptions{})
}

// The admission plugins whose time the benchmarks read: the policies',
// and the webhooks' (the static guard's skip condition is evaluated there).
const (
	pluginVAP     = "ValidatingAdmissionPolicy"
	pluginWebhook = "ValidatingAdmissionWebhook"
)

// admissionScrape is what one scrape of kube-apiserver's metrics says of
// UPDATEs: an admission plugin's histogram (sum, count) and how many times
// kube-apiserver called the static guard's enforcing entry.
type admissionScrape struct {
	sum, count, guardCalls float64
}

// scrape reads kube-apiserver's admission histogram of plugin for UPDATEs
// and its webhook histogram's count for the static guard's enforcing entry
// (0 when there is none).
func (s *apiServer) scrape(ctx context.Context, plugin string) (admissionScrape, error) {
	data, err := s.admin.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return admissionScrape{}, fmt.Errorf("scrape kube-apiserver metrics: %w", err)
	}
	m, err := framework.ParseMetrics(bytes.NewReader(data))
	if err != nil {
		return admissionScrape{}, fmt.Errorf("parse kube-apiserver metrics: %w", err)
	}
	labels := map[string]string{"name": plugin, "operation": "UPDATE"}
	const h = "apiserver_admission_controller_admission_duration_seconds"
	return admissionScrape{
		sum:   m.Sum(h+"_sum", labels),
		count: m.Sum(h+"_count", labels),
		guardCalls: m.Sum("apiserver_admission_webhook_admission_duration_seconds_count",
			map[string]string{"name": static.WebhookName, "operation": "UPDATE"}),
	}, nil
}

// measure runs setup (unmeasured), then write, and returns what the
// ValidatingAdmissionPolicy plugin spent on it (measurePlugin).
func (s *apiServer) measure(ctx context.Context, setup, write func() error) (time.Duration, error) {
	m, err := s.measurePlugin(ctx, pluginVAP, setup, write)
	return m.took, err
}

// measured is what kube-apiserver's metrics say of one write.
type measured struct {
	// took is the admission plugin's time.
	took time.Duration
	// guardCalls is how many times the static guard's enforcing entry was
	// called in the window.
	guardCalls int
}

// measurePlugin runs setup (unmeasured), then write, and returns what the
// admission plugin spent on it: the histogram's sum delta across a window
// in which its count moved by exactly one. kube-apiserver's own UPDATEs
// (leases) pass the plugin too; a window they share is thrown away and the
// write repeated.
func (s *apiServer) measurePlugin(ctx context.Context, plugin string, setup, write func() error) (measured, error) {
	for range 10 {
		if setup != nil {
			if err := setup(); err != nil {
				return measured{}, fmt.Errorf("set up the write: %w", err)
			}
		}
		before, err := s.scrape(ctx, plugin)
		if err != nil {
			return measured{}, err
		}
		if err := write(); err != nil {
			return measured{}, err
		}
		after, err := s.scrape(ctx, plugin)
		if err != nil {
			return measured{}, err
		}
		if after.count-before.count == 1 {
			return measured{
				took:       time.Duration((after.sum - before.sum) * float64(time.Second)),
				guardCalls: int(after.guardCalls - before.guardCalls),
			}, nil
		}
	}
	return measured{}, fmt.Errorf("kube-apiserver's other UPDATEs shared every window of 10 tries")
}
