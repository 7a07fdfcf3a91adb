package e2e

// Real writers: cert-manager's cainjector. framework.StartCAInjector runs
// the code of the cert-manager release in go.mod (e2e/writers/cainjector:
// cainjector.RegisterAllInjectors, as cert-manager's cmd/cainjector sets it
// up) as system:serviceaccount:cert-manager:cert-manager-cainjector with
// the chart's ClusterRole; the tests play cert-manager's issuing controller
// (framework.CreateCertificate, framework.RotateCertificateSecret) and
// assert what cainjector got stored through the guard.
//
// cainjector writes with server-side apply (PATCH, field manager
// cert-manager-cainjector) only the caBundle of each webhooks[] entry. With
// CAInjectorMerging (GA, on by default) it writes the stored bundle's
// unexpired certificates followed by the Secret's ca.crt, each re-encoded
// as PEM; with merging off it writes ca.crt's bytes as they are.

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap"
)

const (
	cainjectorMapping = "cainjected"
	injectedVWC       = "cainjected-validating"
	injectedMWC       = "cainjected-mutating"
	injectedCert      = "app-webhook-serving"

	// injectTimeout bounds one rotation: from the rotated Secret stored to
	// every entry holding the new CA.
	injectTimeout = 5 * time.Second
	// rotations is how many CA rotations in a row each test drives.
	rotations = 10
)

// injectedTargets are the configurations cainjector injects into: a
// Validating one with two webhooks[] entries and a Mutating one with one.
var injectedTargets = []injectedTarget{{framework.Validating, injectedVWC, 2}, {framework.Mutating, injectedMWC, 1}}

// injectedTarget is one object cainjector injects into, with its number of
// caBundles.
type injectedTarget struct {
	kind    framework.Kind
	name    string
	entries int
}

// injectedConfig is guardConfig plus the mapping that owns both targets,
// with the CA the configurations' own cert-manager annotation names and
// cainjector (the chart's service account) as a writer for it: the
// products page's cainjector snippet
// (config/samples/products/cert-manager-cainjector.yaml).
func injectedConfig(t testing.TB, mode guardapi.Mode) *guardapi.GuardConfig {
	t.Helper()
	cfg := guardConfig()
	owner := framework.ProductMapping(t, "cert-manager-cainjector", mode, cfg)
	want := guardapi.Owner{
		Name:    cainjectorMapping,
		Mode:    mode,
		Match:   guardapi.Match{Validating: []string{injectedVWC}, Mutating: []string{injectedMWC}},
		Writers: guardapi.Subjects{ServiceAccounts: []string{appNamespace + "/" + ownerSA}},
		CA:      guardapi.CASource{InjectedByCertManager: &guardapi.InjectedByCertManager{}},
	}
	if !reflect.DeepEqual(owner, want) {
		t.Fatalf("the cainjector snippet's mapping %+v is not the one these tests create objects for: %+v", owner, want)
	}
	if cfg.CertManager.CAInjectorServiceAccount != framework.CAInjectorNamespace+"/"+framework.CAInjectorServiceAccount {
		t.Fatalf("the cainjector snippet names cainjector %q; the suite runs it as %s/%s",
			cfg.CertManager.CAInjectorServiceAccount, framework.CAInjectorNamespace, framework.CAInjectorServiceAccount)
	}
	cfg.Owners = append(cfg.Owners, owner)
	return cfg
}

// injectorRun is one environment with a Certificate, the two annotated
// configurations and a model of what cainjector should have stored.
type injectorRun struct {
	f        *fixture
	cert     *framework.IssuedCertificate
	injector *framework.CAInjector
	merging  bool
	// targets are the objects injected into (default injectedTargets).
	targets []injectedTarget
	// stored is the model: the CAs every entry's caBundle should hold, in
	// order (all entries are written alike).
	stored []*framework.CA
	// others are CAs that are not the Certificate's, for names in messages.
	others []*framework.CA
	times  []time.Duration
}

type injectorRunOptions struct {
	opts       framework.Options
	fromSecret bool // inject-ca-from-secret instead of inject-ca-from
	mergingOff bool // --feature-gates=CAInjectorMerging=false
	// targets replace injectedTargets; objects of the trust kinds (CRD,
	// APIService) start cainjector's controllers for them too.
	targets []injectedTarget
	// beforeInjector runs after the configurations exist and before
	// cainjector starts (the policy shape waits for its policies there).
	beforeInjector func(t *testing.T, r *injectorRun)
	// injectorFirst starts cainjector before the configurations are
	// created, once the guard's policies are enforced, as in a cluster
	// where cert-manager and the guard run before the product is
	// installed (beforeInjector is not called).
	injectorFirst bool
	// certificateWithConfigurations (with injectorFirst) creates the
	// Certificate and its Secret just before the configurations, as one
	// install applies them, instead of before cainjector starts.
	certificateWithConfigurations bool
}

// startInjectorRun starts the environment (with cert-manager's CRDs and
// kube-apiserver's audit log), creates the Certificate and its Secret, the
// configurations with empty caBundles annotated for injection (as the
// product's chart ships them, created here by break-glass) and cainjector.
func startInjectorRun(t *testing.T, o injectorRunOptions) *injectorRun {
	t.Helper()
	o.opts.CertManagerCRDs = true
	o.opts.AuditLog = true
	f := newFixture(t, o.opts)
	r := &injectorRun{f: f, merging: !o.mergingOff, targets: injectedTargets}
	if o.targets != nil {
		r.targets = o.targets
	}
	createCertificate := func() map[string]string {
		r.cert = framework.CreateCertificate(t, f.env, framework.CertificateOptions{
			Namespace: appNamespace, Name: injectedCert, AllowDirectInjection: o.fromSecret,
		})
		if o.fromSecret {
			return map[string]string{"cert-manager.io/inject-ca-from-secret": r.cert.InjectCAFromSecret()}
		}
		return map[string]string{"cert-manager.io/inject-ca-from": r.cert.InjectCAFrom()}
	}
	var ann map[string]string
	if !o.certificateWithConfigurations {
		ann = createCertificate()
	}
	if o.injectorFirst {
		framework.BuildBinary(t, "./e2e/writers/cainjector")
		r.injector = framework.StartCAInjector(t, f.env, framework.CAInjectorOptions{TrustObjects: o.targets != nil})
		if o.opts.NoStaticManifest {
			waitPolicyActive(t, f)
		}
		start := time.Now()
		if o.certificateWithConfigurations {
			ann = createCertificate()
		}
		for _, tg := range r.targets {
			f.admin.MustCreate(t, framework.Spec{Kind: tg.kind, Name: tg.name, Annotations: ann, Bundles: make([][]byte, tg.entries)})
		}
		r.inject()
		d := r.waitConverged(t, "the initial injection", start, 10*time.Second)
		r.waitIdle(t)
		t.Logf("initial injection of %s: every entry held the CA %s after the configurations were created", r.cert.CA, d.Round(time.Millisecond))
		return r
	}
	for _, tg := range r.targets {
		f.admin.MustCreate(t, framework.Spec{Kind: tg.kind, Name: tg.name, Annotations: ann, Bundles: make([][]byte, tg.entries)})
	}
	if o.beforeInjector != nil {
		o.beforeInjector(t, r)
	}
	// Built before the clock starts (once per test process).
	framework.BuildBinary(t, "./e2e/writers/cainjector")
	start := time.Now()
	copts := framework.CAInjectorOptions{TrustObjects: o.targets != nil}
	if o.mergingOff {
		copts.FeatureGates = "CAInjectorMerging=false"
	}
	r.injector = framework.StartCAInjector(t, f.env, copts)
	started := time.Since(start)
	r.inject()
	d := r.waitConverged(t, "the initial injection", start, 10*time.Second)
	r.waitIdle(t)
	t.Logf("initial injection of %s: cainjector's controllers ran %s after StartCAInjector began (RBAC, identity, process), every entry held the CA %s after",
		r.cert.CA, started.Round(time.Millisecond), d.Round(time.Millisecond))
	return r
}

// inject updates the model for cainjector injecting the current CA.
func (r *injectorRun) inject() {
	if !r.merging {
		r.stored = []*framework.CA{r.cert.CA}
		return
	}
	if !slices.Contains(r.stored, r.cert.CA) {
		r.stored = append(r.stored, r.cert.CA)
	}
}

// want is the caBundle every entry should hold: the model's CAs' PEM,
// concatenated (cainjector's merge re-encodes each certificate with
// encoding/pem, which is how framework.NewCA encodes them too).
func (r *injectorRun) want() []byte {
	var b []byte
	for _, ca := range r.stored {
		b = append(b, ca.PEM...)
	}
	return b
}

func (r *injectorRun) allCAs() []*framework.CA {
	return append(slices.Clone(r.cert.CAs), r.others...)
}

// stateOf describes every stored entry by the CAs it holds.
func (r *injectorRun) stateOf(t testing.TB) string {
	var b strings.Builder
	for _, tg := range r.targets {
		wc := r.f.admin.MustGet(t, tg.kind, tg.name)
		for i, bundle := range wc.Bundles {
			fmt.Fprintf(&b, "\n  %s %s webhooks[%d]: %s", tg.kind, tg.name, i, framework.DescribeBundle(bundle, r.allCAs()...))
		}
	}
	return b.String()
}

// converged reports whether every entry of every target holds want.
func (r *injectorRun) converged(t testing.TB) bool {
	want := r.want()
	for _, tg := range r.targets {
		wc, err := r.f.admin.Get(t.Context(), tg.kind, tg.name)
		if err != nil {
			t.Fatalf("get %s %s: %v", tg.kind, tg.name, err)
		}
		if len(wc.Bundles) != tg.entries {
			t.Fatalf("%s %s has %d webhooks[] entries; want %d", tg.kind, tg.name, len(wc.Bundles), tg.entries)
		}
		for _, b := range wc.Bundles {
			if !bytes.Equal(b, want) {
				return false
			}
		}
	}
	return true
}

// waitConverged polls every 10 ms until every entry holds the model's
// bundle and returns the time since start; past timeout it fails the test
// with the stored state and every sign of cainjector being refused.
func (r *injectorRun) waitConverged(t testing.TB, what string, start time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	for !r.converged(t) {
		if time.Since(start) > timeout {
			t.Fatalf("%s did not converge within %s: want every entry to hold %s; stored:%s\n%s",
				what, timeout, framework.DescribeBundle(r.want(), r.allCAs()...), r.stateOf(t), r.refusals(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// rotate has cert-manager re-issue the CA (the Certificate's Secret gets a
// new ca.crt and leaf) and waits until cainjector stored it in every entry.
func (r *injectorRun) rotate(t testing.TB, i int) time.Duration {
	t.Helper()
	framework.RotateCertificateSecret(t, r.f.env, r.cert, nil)
	start := time.Now()
	r.inject()
	d := r.waitConverged(t, fmt.Sprintf("rotation %d to %s", i, r.cert.CA), start, injectTimeout)
	r.times = append(r.times, d)
	r.waitIdle(t)
	t.Logf("rotation %2d: every entry held %s %s after the Secret was stored (%s)",
		i, r.cert.CA.Cert.Subject.CommonName, d.Round(time.Millisecond), framework.DescribeBundle(r.want(), r.allCAs()...))
	return d
}

// waitIdle waits until cainjector has made no write for 200 ms. cainjector
// merges into the caBundle of the object in its informer cache and applies
// without a resourceVersion, so a rotation that reaches it before its cache
// has seen its own previous write merges into the older bundle and drops
// the CA it had just added (seen in development: 7 rotations in 3 s lost
// one CA in one of two configurations, through a client-side rate limit).
// A cluster rotates a CA every few weeks; the tests let cainjector settle
// as it would, and fail if it never does (a write loop).
func (r *injectorRun) waitIdle(t testing.TB) {
	t.Helper()
	count := func() int { return len(r.injector.Updates()) + len(r.injector.ApplyErrors()) }
	last, since, deadline := count(), time.Now(), time.Now().Add(injectTimeout)
	for time.Since(since) < 200*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("cainjector kept writing for %s after the caBundles converged (%d writes logged)\n%s", injectTimeout, count(), r.refusals(t))
		}
		time.Sleep(20 * time.Millisecond)
		if n := count(); n != last {
			last, since = n, time.Now()
		}
	}
}

// rotationSummary is min, median and max of the rotation times.
func (r *injectorRun) rotationSummary() string {
	if len(r.times) == 0 {
		return "no rotation converged"
	}
	s := slices.Clone(r.times)
	slices.Sort(s)
	return fmt.Sprintf("%d rotations: min %s, median %s, max %s", len(s),
		s[0].Round(time.Millisecond), s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}

// refusals lists what refused cainjector: the guard's records about it,
// the 403s in kube-apiserver's audit log and cainjector's own error lines.
func (r *injectorRun) refusals(t testing.TB) string {
	var b strings.Builder
	recs := caInjectorRecords(r.f.env.Guard)
	fmt.Fprintf(&b, "the guard's records about cainjector: %d", len(recs))
	for _, rec := range recs[max(0, len(recs)-3):] {
		fmt.Fprintf(&b, "\n  %s", rec.Raw)
	}
	denied := deniedRequests(caInjectorRequests(t, r.f.env))
	fmt.Fprintf(&b, "\nkube-apiserver refused %d of cainjector's PATCHes", len(denied))
	for _, q := range denied[max(0, len(denied)-2):] {
		fmt.Fprintf(&b, "\n  %d %s", q.ResponseStatus.Code, q.ResponseStatus.Message)
	}
	errs := r.injector.ApplyErrors()
	fmt.Fprintf(&b, "\ncainjector logged %d failed applies", len(errs))
	for _, l := range errs[max(0, len(errs)-2):] {
		fmt.Fprintf(&b, "\n  %s", l)
	}
	return b.String()
}

// caInjectorRecords are the guard's "decision recorded" lines about
// cainjector: its admission requests (subject: the service account) and,
// from the observer, changes whose caBundle fields cainjector's field
// manager owns (subject: fieldManager:...cert-manager-cainjector...).
func caInjectorRecords(g *framework.Guard) []framework.Record {
	var out []framework.Record
	for _, rec := range g.Records() {
		if rec.Subject == framework.CAInjectorUser.Name || strings.Contains(rec.Subject, framework.CAInjectorFieldManager) {
			out = append(out, rec)
		}
	}
	return out
}

// caInjectorRequests are cainjector's completed writes (PATCH: server-side
// apply) of webhook configurations, from kube-apiserver's audit log
// (Options.AuditLog; written synchronously, before each response).
func caInjectorRequests(t testing.TB, env *framework.Env) []framework.AuditEvent {
	t.Helper()
	var out []framework.AuditEvent
	for _, ev := range env.AuditEvents(t) {
		if ev.IsCompletedWrite(framework.CAInjectorUser.Name) {
			out = append(out, ev)
		}
	}
	return out
}

func deniedRequests(qs []framework.AuditEvent) []framework.AuditEvent {
	var out []framework.AuditEvent
	for _, q := range qs {
		if q.ResponseStatus.Code >= 400 {
			out = append(out, q)
		}
	}
	return out
}

// requireNoCAInjectorDenials asserts that nothing refused cainjector: no
// record of the guard names it, kube-apiserver answered none of its writes
// with an error, and cainjector logged no failed apply.
func (r *injectorRun) requireNoCAInjectorDenials(t testing.TB) {
	t.Helper()
	recs := caInjectorRecords(r.f.env.Guard)
	qs := caInjectorRequests(t, r.f.env)
	denied := deniedRequests(qs)
	errs := r.injector.ApplyErrors()
	t.Logf("cainjector: %d PATCHes (%d refused), %d \"Updated object\" log lines, %d failed applies logged, %d guard records about it",
		len(qs), len(denied), len(r.injector.Updates()), len(errs), len(recs))
	if len(recs)+len(denied)+len(errs) > 0 {
		t.Errorf("cainjector was refused or recorded:\n%s", r.refusals(t))
	}
}

// logFlapping logs the guard's flapping reports (not asserted: ten
// rotations in seconds are more distinct bundles than the default window
// allows; a cluster rotates every few weeks).
func (r *injectorRun) logFlapping(t testing.TB) {
	t.Helper()
	if flaps := r.f.env.Guard.Log.TailMatching(4, func(l string) bool { return strings.Contains(l, `"caBundle flapping detected"`) }); flaps != "" {
		t.Logf("the guard reported flapping:\n%s", flaps)
	}
}

// logCAInjectorIdentity logs how cainjector appears to kube-apiserver (user
// agent) and in the stored object (field manager of the caBundles), and
// asserts the field manager is cert-manager's.
func (r *injectorRun) logCAInjectorIdentity(t testing.TB) {
	t.Helper()
	agents := map[string]int{}
	for _, q := range caInjectorRequests(t, r.f.env) {
		agents[q.UserAgent]++
	}
	t.Logf("cainjector's user agent(s) as kube-apiserver saw them: %v", agents)
	vwc, err := r.f.env.AdminKube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(t.Context(), injectedVWC, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var managers []string
	found := false
	for _, mf := range vwc.ManagedFields {
		managers = append(managers, fmt.Sprintf("%s (%s)", mf.Manager, mf.Operation))
		if mf.Manager == framework.CAInjectorFieldManager && mf.Operation == metav1.ManagedFieldsOperationApply &&
			mf.FieldsV1 != nil && bytes.Contains(mf.FieldsV1.GetRawBytes(), []byte(`"f:caBundle"`)) {
			found = true
		}
	}
	t.Logf("managedFields of %s: %s", injectedVWC, strings.Join(managers, ", "))
	if !found {
		t.Errorf("no managedFields entry of %q (Apply) owns the caBundles of %s: %s", framework.CAInjectorFieldManager, injectedVWC, strings.Join(managers, ", "))
	}
}

// TestRealWriterCAInjectorStaticShape: cert-manager's cainjector (merging
// on, inject-ca-from) injects and then rotates the Certificate's CA 10 times
// through the static webhook in enforce mode, with a guard restart
// half-way; every rotation reaches every entry within 5 s and nothing
// refuses cainjector. A service account that is no writer is denied, and
// the product's own controller (a writer) writing its self-generated CA is
// denied as ca-mismatch while cainjector keeps injecting.
func TestRealWriterCAInjectorStaticShape(t *testing.T) {
	t.Parallel()
	r := startInjectorRun(t, injectorRunOptions{opts: framework.Options{Config: injectedConfig(t, guardapi.ModeEnforce)}})
	ctx := t.Context()
	r.logCAInjectorIdentity(t)

	const half = rotations / 2
	t.Run(fmt.Sprintf("%d rotations", half), func(t *testing.T) {
		for i := 1; i <= half; i++ {
			r.rotate(t, i)
		}
		r.requireNoCAInjectorDenials(t)
	})
	// Restarted by the test itself, not a subtest: Start stops the guard
	// in the Cleanup of the test it is given.
	r.f.env.Guard.Stop(t)
	r.f.env.Guard.Start(t)
	t.Run(fmt.Sprintf("%d more rotations after a guard restart", rotations-half), func(t *testing.T) {
		for i := half + 1; i <= rotations; i++ {
			r.rotate(t, i)
		}
		t.Log(r.rotationSummary())
		r.requireNoCAInjectorDenials(t)
		r.logFlapping(t)
	})

	t.Run("a service account that is no writer is denied", func(t *testing.T) {
		before := r.f.admin.MustGet(t, framework.Validating, injectedVWC)
		_, err := r.f.intruder.SetCABundle(ctx, framework.Validating, injectedVWC, r.cert.CA.PEM)
		requireDenied(t, err, `(mapping "cainjected", enforce)`, "not-owner", intruderUser.Name)
		_, err = r.f.intruder.Annotate(ctx, framework.Mutating, injectedMWC, "e2e/touched-by", intruderSA)
		requireDenied(t, err, "not-owner")
		if got := r.f.admin.MustGet(t, framework.Validating, injectedVWC); got.ResourceVersion != before.ResourceVersion {
			t.Errorf("%s changed after denied writes (resourceVersion %s -> %s)", injectedVWC, before.ResourceVersion, got.ResourceVersion)
		}
	})

	t.Run("the product's controller writing its own CA is denied while cainjector keeps injecting", func(t *testing.T) {
		own := framework.NewCA(t, "app-self-generated-ca")
		r.others = append(r.others, own)
		for _, tg := range injectedTargets {
			_, err := r.f.owner.SetCABundle(ctx, tg.kind, tg.name, own.PEM)
			requireDenied(t, err, `(mapping "cainjected", enforce)`, "ca-mismatch",
				"expected CA "+r.cert.CA.Fingerprint()[:16], "found "+own.Fingerprint()[:16])
			// Its CA appended to what cainjector stored is no better.
			_, err = r.f.owner.SetCABundle(ctx, tg.kind, tg.name, append(r.want(), own.PEM...))
			requireDenied(t, err, "ca-mismatch", "found "+own.Fingerprint()[:16])
		}
		if !r.converged(t) {
			t.Fatalf("the stored caBundles changed although the product's writes were denied:%s", r.stateOf(t))
		}
		r.rotate(t, rotations+1)
		r.requireNoCAInjectorDenials(t)
		ownerRecords := 0
		for _, rec := range r.f.env.Guard.Records() {
			if rec.Subject == ownerUser.Name && rec.Outcome == "deny" && rec.Rule == "ca-mismatch" {
				ownerRecords++
			}
		}
		if want := 2 * len(injectedTargets); ownerRecords != want {
			t.Errorf("the guard recorded %d ca-mismatch denials of %s; want %d", ownerRecords, ownerUser.Name, want)
		}
	})
}

// TestRealWriterCAInjectorMergingOff: with --feature-gates=CAInjectorMerging=false
// cainjector replaces each caBundle with ca.crt's bytes; 10 rotations
// converge within 5 s each and nothing refuses it.
func TestRealWriterCAInjectorMergingOff(t *testing.T) {
	t.Parallel()
	r := startInjectorRun(t, injectorRunOptions{opts: framework.Options{Config: injectedConfig(t, guardapi.ModeEnforce)}, mergingOff: true})
	for i := 1; i <= rotations; i++ {
		r.rotate(t, i)
	}
	t.Log(r.rotationSummary())
	r.requireNoCAInjectorDenials(t)
}

// TestRealWriterCAInjectorFromSecret: cert-manager.io/inject-ca-from-secret
// names the Secret directly (cert-manager copied allow-direct-injection onto
// it from the Certificate's secretTemplate); 10 rotations converge within
// 5 s each with nothing refusing cainjector, and the product's own CA is
// still denied.
func TestRealWriterCAInjectorFromSecret(t *testing.T) {
	t.Parallel()
	r := startInjectorRun(t, injectorRunOptions{opts: framework.Options{Config: injectedConfig(t, guardapi.ModeEnforce)}, fromSecret: true})
	for i := 1; i <= rotations; i++ {
		r.rotate(t, i)
	}
	t.Log(r.rotationSummary())
	r.requireNoCAInjectorDenials(t)
	own := framework.NewCA(t, "app-self-generated-ca")
	_, err := r.f.owner.SetCABundle(t.Context(), framework.Mutating, injectedMWC, own.PEM)
	requireDenied(t, err, "ca-mismatch", "found "+own.Fingerprint()[:16])
}

// TestRealWriterCAInjectorAuditFight is the seed's fight in audit mode: the
// product's controller keeps writing its self-generated CA into the
// configurations cainjector injects, and cainjector (merging) answers every
// write by appending the Certificate's CA to the product's one, across a
// rotation too. The guard allows everything, records each of the
// controller's writes as ca-mismatch and records nothing about cainjector.
func TestRealWriterCAInjectorAuditFight(t *testing.T) {
	t.Parallel()
	r := startInjectorRun(t, injectorRunOptions{opts: framework.Options{Config: injectedConfig(t, guardapi.ModeAudit)}})
	ctx := t.Context()
	own := framework.NewCA(t, "app-self-generated-ca")
	r.others = append(r.others, own)

	const writes = 4
	for w := 1; w <= writes; w++ {
		if w == writes/2+1 {
			r.rotate(t, 1)
		}
		r.f.owner.Warnings.Take()
		for _, tg := range injectedTargets {
			if _, err := r.f.owner.SetCABundle(ctx, tg.kind, tg.name, own.PEM); err != nil {
				t.Fatalf("write %d: audit mode refused the product's CA in %s %s: %v", w, tg.kind, tg.name, err)
			}
		}
		requireWarning(t, r.f.owner.Warnings.Take(), "would deny", "ca-mismatch")
		start := time.Now()
		// cainjector merges: the product's CA stays, the Certificate's is appended.
		r.stored = []*framework.CA{own}
		r.inject()
		d := r.waitConverged(t, fmt.Sprintf("cainjector's answer to the product's write %d", w), start, injectTimeout)
		r.waitIdle(t)
		t.Logf("write %d: cainjector stored %s %s after the product's write",
			w, framework.DescribeBundle(r.want(), r.allCAs()...), d.Round(time.Millisecond))
	}

	var ownerRecords []framework.Record
	for _, rec := range r.f.env.Guard.Records() {
		if rec.Subject == ownerUser.Name {
			ownerRecords = append(ownerRecords, rec)
		}
	}
	if want := writes * len(injectedTargets); len(ownerRecords) != want {
		t.Errorf("the guard recorded %d decisions about the product's controller; want %d (one per write)", len(ownerRecords), want)
	}
	for _, rec := range ownerRecords {
		if rec.Rule != "ca-mismatch" || rec.Outcome != "audit" || rec.Mapping != cainjectorMapping {
			t.Errorf("record about the product's controller: mapping %q rule %q outcome %q; want %q ca-mismatch audit: %s",
				rec.Mapping, rec.Rule, rec.Outcome, cainjectorMapping, rec.Raw)
		}
	}
	r.requireNoCAInjectorDenials(t)
	r.logFlapping(t)
}

// TestRealWriterCAInjectorPolicyShape: the policy shape (no static webhook;
// the guard's generated ValidatingAdmissionPolicy decides in kube-apiserver)
// with the real cainjector: the initial injection, then 10 rotations each
// stored within 5 s with none of cainjector's writes refused, and the
// product's own CA denied.
//
// Refusals are counted from kube-apiserver's audit log: it is the API
// server's own record of every write and its response code, written before
// the response (blocking mode), whatever denied it and whatever cainjector
// chose to log; cainjector's "unable to apply" lines are only a cross-check
// (they miss a refused managed-fields upgrade patch, for one).
func TestRealWriterCAInjectorPolicyShape(t *testing.T) {
	t.Parallel()
	opts := policyOptions()
	opts.Config = injectedConfig(t, guardapi.ModeEnforce)
	policyName := vap.PolicyName(cainjectorMapping)
	r := startInjectorRun(t, injectorRunOptions{opts: opts, beforeInjector: func(t *testing.T, r *injectorRun) {
		// The generated policy knows the Certificate's CA once the owner's
		// dry-run write of it is allowed and of a foreign CA is denied.
		foreign := framework.NewCA(t, "probe").PEM
		dryRun := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}
		set := func(pem []byte) func(*metav1.ObjectMeta, [][]byte) {
			return func(_ *metav1.ObjectMeta, bundles [][]byte) {
				for i := range bundles {
					bundles[i] = pem
				}
			}
		}
		var last error
		framework.Eventually(t, 30*time.Second, "kube-apiserver checks caBundles of "+injectedVWC+" against the Certificate's CA", func() bool {
			_, err := r.f.owner.Mutate(t.Context(), framework.Validating, injectedVWC, dryRun, set(foreign))
			if err == nil || !strings.Contains(err.Error(), "ca-mismatch") {
				return false
			}
			_, last = r.f.owner.Mutate(t.Context(), framework.Validating, injectedVWC, dryRun, set(r.cert.CA.PEM))
			return last == nil
		})
	}})
	ctx := t.Context()
	r.logCAInjectorIdentity(t)

	t.Run("10 rotations", func(t *testing.T) {
		for i := 1; i <= rotations; i++ {
			r.rotate(t, i)
		}
		t.Log(r.rotationSummary())
		r.requireNoCAInjectorDenials(t)
	})

	t.Run("the product's controller writing its own CA is denied", func(t *testing.T) {
		own := framework.NewCA(t, "app-self-generated-ca")
		r.others = append(r.others, own)
		for _, tg := range injectedTargets {
			_, err := r.f.owner.SetCABundle(ctx, tg.kind, tg.name, own.PEM)
			requirePolicyDenied(t, err, policyName, "ca-mismatch")
		}
		_, err := r.f.intruder.Annotate(ctx, framework.Validating, injectedVWC, "e2e/touched-by", intruderSA)
		requirePolicyDenied(t, err, policyName, "not-owner")
	})
}
