package e2e

// istiod's own webhook writers (istio.io/istio's pkg/webhooks
// WebhookCertPatcher and validation controller, with its plugged-in CA and
// validation webhook, wired as pilot/pkg/bootstrap wires them, run by
// e2e/writers/istio as istio-system/istiod with the RBAC of Istio's chart)
// through the guard, in both shapes.
//
// istiod is a replacing writer of the caBundle only: both writers take
// root-cert.pem of the plugged-in CA (Secret cacerts, mounted at
// /etc/cacerts) and, on every change of it and every event of one of their
// configurations, UPDATE the configuration from their informer's copy with
// that caBundle in every entry (the patcher: every entry of the injector's
// configuration whose name ends in sidecar-injector.istio.io; the
// validation controller: every entry of both validators, and their
// failurePolicy from Ignore to Fail once istiod's own validation webhook
// has denied a dry run). A root rotation is Istio's plugged-in one
// (ISTIO_MULTIROOT_MESH): root-cert.pem with the old and the new root,
// then a new intermediate under the new root, then the new root only;
// istiod accepts a new root-cert.pem only when one bundle contains the
// other.
//
// The operator writes Secret cacerts and the kubelet projects it into
// istiod's directory up to a minute later; the tests wait
// istioKubeletDelay, so the guard has read the new roots before istiod
// writes them. That order matters more for Istio than for any other
// writer the suite runs: the patcher does not retry a refused update, logs
// nothing about it and counts it only in its own metric (pkg/webhooks:
// the error of Update is assigned to a variable that shadows the one it
// returns), so a refused write of the injector's configuration stays
// refused until the next event on it. The static test shows it.

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

const (
	// istioMapping owns istiod's three configurations.
	istioMapping = "istiod"
	// istioKubeletDelay is how long after the operator's write of Secret
	// cacerts the kubelet projects it into istiod's directory (a minute
	// or more in a cluster; far less here, and still after the guard).
	istioKubeletDelay = time.Second
	// istioConvergence bounds a step of a rotation, from the swap of
	// istiod's directory until every caBundle holds the new roots.
	istioConvergence = 5 * time.Second
	// istioFailClosed bounds the validation controller's switch to Fail
	// from istiod's start (its retries back off from 100 ms).
	istioFailClosed = 30 * time.Second
	// istioHandled is what istiod logs once it took a change of its
	// directory (handleEvent).
	istioHandled = "Istiod has detected the newly added intermediate CA and updated its key and certs accordingly"
)

var istioUser = framework.ServiceAccountUser(framework.IstioNamespace, framework.IstioServiceAccount)

// istioConfig maps istiod's three configurations, in mode, to its service
// account and root-cert.pem of Secret cacerts: the products page's Istio
// snippet.
func istioConfig(t testing.TB, mode guardapi.Mode) *guardapi.GuardConfig {
	t.Helper()
	return productConfig(t, "istio", mode, istioOwner(framework.IstioRootKey))
}

// istioOwner is the Istio mapping with its CA in key of Secret cacerts.
func istioOwner(key string) guardapi.Owner {
	return guardapi.Owner{
		Name: istioMapping,
		Match: guardapi.Match{
			Validating: []string{framework.IstioValidator, framework.IstioDefaultValidator},
			Mutating:   []string{framework.IstioInjector},
		},
		Writers: guardapi.Subjects{ServiceAccounts: []string{framework.IstioNamespace + "/" + framework.IstioServiceAccount}},
		CA:      guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: framework.IstioNamespace, Name: framework.IstioCASecret, Key: key}},
	}
}

// istioPKI is the plugged-in CA before and after a root rotation.
type istioPKI struct {
	root1, root2 *framework.CA
	int1, int2   *framework.IstioIntermediate
}

func newIstioPKI(t testing.TB) istioPKI {
	p := istioPKI{root1: framework.NewCA(t, "istio-root-1"), root2: framework.NewCA(t, "istio-root-2")}
	p.int1 = framework.NewIstioIntermediate(t, p.root1, "istio-intermediate-1")
	p.int2 = framework.NewIstioIntermediate(t, p.root2, "istio-intermediate-2")
	return p
}

// istioStep is one write of Secret cacerts.
type istioStep struct {
	name  string
	data  map[string][]byte
	roots []byte
}

// rotation is Istio's plugged-in root rotation: both roots, a new
// intermediate under the new root, the new root only.
func (p istioPKI) rotation() []istioStep {
	both := framework.IstioRoots(p.root1, p.root2)
	return []istioStep{
		{"old and new roots", p.int1.CACerts(p.root1, p.root2), both},
		{"new intermediate", p.int2.CACerts(p.root1, p.root2), both},
		{"new root only", p.int2.CACerts(p.root2), p.root2.PEM},
	}
}

// startIstio installs Istio's charts and its CA, starts istiod's writers
// and waits until every caBundle holds the first root and the validators
// fail closed. ready, when set, runs between the CA and istiod's start.
func startIstio(t *testing.T, env *framework.Env, p istioPKI, ready func(*framework.Istio)) *framework.Istio {
	t.Helper()
	is := framework.InstallIstio(t, env)
	is.PlugCA(t, p.int1.CACerts(p.root1), 0)
	if ready != nil {
		ready(is)
	}
	is.Start(t)
	if _, err := is.WaitInjected(t, p.root1.PEM, 20*time.Second); err != nil {
		t.Fatalf("install: %v", err)
	}
	injected := time.Since(is.StartedAt)
	for len(is.FailOpen(t)) > 0 {
		if time.Since(is.StartedAt) > istioFailClosed {
			t.Fatalf("install: the validation controller did not fail %v closed within %s of istiod's start", is.FailOpen(t), istioFailClosed)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("install: every caBundle held the first root %s after istiod started, the validators failed closed after %s",
		injected.Round(time.Millisecond), time.Since(is.StartedAt).Round(time.Millisecond))
	requireIstioServes(t, is)
	return is
}

// requireIstioServes: kube-apiserver calls istiod's validation webhook over
// TLS with the caBundle istiod wrote and gets its denial of the invalid
// Gateway (the validators fail closed, so a TLS failure would be an error
// of its own).
func requireIstioServes(t testing.TB, is *framework.Istio) {
	t.Helper()
	err := is.DryRunInvalidGateway(t.Context())
	if err == nil || !strings.Contains(err.Error(), `validation.istio.io" denied the request`) {
		t.Errorf("a dry run of an invalid Gateway: %v; want istiod's validation webhook to deny it", err)
	}
}

// istioRotation is what one step cost.
type istioRotation struct {
	// took is from the swap of istiod's directory until istiod logged
	// that it took the change; converged until every caBundle held the
	// step's roots.
	took, converged time.Duration
	ok              bool
	// writes are istiod's writes of its configurations during the step;
	// denied those answered 403.
	writes, denied []framework.AuditedWrite
}

// rotateIstio writes one step into Secret cacerts and, istioKubeletDelay
// later, into istiod's directory; waits until istiod took it and every
// caBundle holds its roots (within istioConvergence, else 15 s more to
// keep the accounting per step), and checks that kube-apiserver still
// trusts what istiod serves.
func rotateIstio(t *testing.T, env *framework.Env, is *framework.Istio, step istioStep) istioRotation {
	t.Helper()
	before := len(env.AuditedWrites(t, istioUser.Name))
	handled := len(is.Log.Containing(istioHandled))
	swapped := is.PlugCA(t, step.data, istioKubeletDelay)
	_, err := is.WaitInjected(t, step.roots, istioConvergence)
	res := istioRotation{converged: time.Since(swapped), ok: err == nil}
	if err != nil {
		if _, err := is.WaitInjected(t, step.roots, 15*time.Second); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		res.converged = time.Since(swapped)
	}
	res.took = waitIstioLogged(t, is, istioHandled, handled, swapped)
	// The validation controller's and the patcher's writes of one change
	// are over within milliseconds; a second covers a retry.
	time.Sleep(time.Second)
	res.writes = env.AuditedWrites(t, istioUser.Name)[before:]
	for _, w := range res.writes {
		if w.Code == 403 {
			res.denied = append(res.denied, w)
		}
	}
	requireIstioServes(t, is)
	return res
}

// waitIstioLogged polls every 10 ms until istiod logged line more than
// before times, and returns how long after since that was (at most 10 s).
func waitIstioLogged(t testing.TB, is *framework.Istio, line string, before int, since time.Time) time.Duration {
	t.Helper()
	for len(is.Log.Containing(line)) <= before {
		if time.Since(since) > 10*time.Second {
			t.Fatalf("istiod did not log %q within 10s", line)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(since)
}

// rotateIstioRoots runs the whole rotation, failing the test for a step
// over istioConvergence or one of istiod's writes denied.
func rotateIstioRoots(t *testing.T, env *framework.Env, is *framework.Istio, p istioPKI) {
	t.Helper()
	for _, step := range p.rotation() {
		res := rotateIstio(t, env, is, step)
		t.Logf("rotation, %s: istiod took it %s after its directory changed, every caBundle held the roots %s after (%s after Secret cacerts); %d writes by istiod, %d denied",
			step.name, res.took.Round(time.Millisecond), res.converged.Round(time.Millisecond), (res.converged + istioKubeletDelay).Round(time.Millisecond), len(res.writes), len(res.denied))
		if !res.ok {
			t.Errorf("rotation, %s: took %s to reach every caBundle; want at most %s", step.name, res.converged.Round(time.Millisecond), istioConvergence)
		}
		for _, w := range res.denied {
			t.Errorf("rotation, %s: denied %s %s/%s: %s", step.name, w.Verb, w.Resource, w.Name, w.Message)
		}
	}
}

// istioForeignTargets are the configurations the foreign writes try: one
// of each writer.
var istioForeignTargets = []framework.Target{
	{Kind: framework.Mutating, Name: framework.IstioInjector}, {Kind: framework.Validating, Name: framework.IstioValidator},
}

// TestRealWriterIstioStaticShape: istiod's webhook writers through the
// static shape's guard (enforce), from Istio's charts: the first root in
// every caBundle and the validators failed closed, then Istio's plugged-in
// root rotation, each step in every caBundle within istioConvergence, and
// kube-apiserver calling istiod's validation webhook with the caBundle
// istiod wrote after every step. Nothing of istiod's is denied or
// recorded (kube-apiserver's audit log, the guard's metrics and records
// agree), the guard decided every write kube-apiserver accepted, a
// stranger's CA and a foreign CA written with istiod's identity are
// denied, and discover proposes the mapping for the injector. Then a
// refused write shows what istiod does with one, and in audit mode nothing
// is recorded against istiod while a stranger's write is.
func TestRealWriterIstioStaticShape(t *testing.T) {
	t.Parallel()
	start := time.Now()
	env := framework.Start(t, framework.Options{Config: istioConfig(t, guardapi.ModeEnforce), AuditLog: true})
	p := newIstioPKI(t)
	is := startIstio(t, env, p, nil)
	rotateIstioRoots(t, env, is, p)

	requireWriterUndenied(t, env, "istiod", istioUser.Name, istioMapping, is.RefusedInLog())
	checkForeignWritesDenied(t, env, istioMapping, is.Client, istioForeignTargets, is.SecretRoots(t))
	t.Run("discover proposes istiod's mapping", func(t *testing.T) { checkIstioDiscover(t, env, is) })
	t.Run("a refused write of the injector shows only in istiod's metric", func(t *testing.T) {
		checkIstioRefusedPatch(t, env, is, p)
	})
	t.Run("audit mode records nothing against istiod", func(t *testing.T) {
		env.Guard.RewriteConfig(t, istioConfig(t, guardapi.ModeAudit))
		recordedBefore := len(recordsOf(env.Guard, istioUser.Name))
		// The rotation's last step again: the root added by the refused
		// write's test removed.
		res := rotateIstio(t, env, is, istioStep{"the added root removed", p.int2.CACerts(p.root2), p.root2.PEM})
		if !res.ok || len(res.denied) > 0 {
			t.Errorf("audit-mode rotation: converged in %s (within bound: %v), %d denied", res.converged.Round(time.Millisecond), res.ok, len(res.denied))
		}
		// The validation controller puts its roots back over the stranger's.
		requireAuditRecordsOnlyStranger(t, env, "istiod", istioUser.Name, recordedBefore,
			framework.Target{Kind: framework.Validating, Name: framework.IstioValidator}, func() error {
				_, err := is.WaitInjected(t, p.root2.PEM, istioConvergence)
				return err
			})
		t.Logf("audit mode: the step converged in %s with %d writes by istiod, none recorded; the stranger's write recorded and replaced",
			res.converged.Round(time.Millisecond), len(res.writes))
	})
	t.Logf("the test took %s", time.Since(start).Round(time.Millisecond))
}

// checkIstioRefusedPatch shows what istiod does when the guard refuses its
// writes (here because the mapping names the wrong key of Secret cacerts,
// ca-cert.pem, the intermediate, a mistake the key's name invites): a new
// root is added; the validation controller logs each refusal and retries
// with backoff; the injector's patcher logs nothing, does not retry and
// counts the refusal only in webhook_patch_failures_total. Once the
// mapping is fixed the validators converge on their own, while the
// injector's configuration keeps the old roots until an event on it (here
// an annotation, as an installer's re-apply would make) makes the patcher
// look again.
func checkIstioRefusedPatch(t *testing.T, env *framework.Env, is *framework.Istio, p istioPKI) {
	wrong := istioConfig(t, guardapi.ModeEnforce)
	wrong.Owners[0].CA.Secret.Key = "ca-cert.pem"
	env.Guard.RewriteConfig(t, wrong)
	root3 := framework.NewCA(t, "istio-root-3")
	added := framework.IstioRoots(p.root2, root3)
	failuresBefore := istioPatchFailures(t, is)
	patcherLogged := len(is.Log.Containing("patching webhook"))
	deniedBefore := len(deniedWrites(t, env, istioUser.Name))
	handled := len(is.Log.Containing(istioHandled))
	swapped := is.PlugCA(t, p.int2.CACerts(p.root2, root3), istioKubeletDelay)
	waitIstioLogged(t, is, istioHandled, handled, swapped)
	framework.Eventually(t, 10*time.Second, "the guard refuses istiod's writes of the injector and the validators", func() bool {
		names := map[string]bool{}
		for _, w := range deniedWrites(t, env, istioUser.Name)[deniedBefore:] {
			names[w.Name] = true
		}
		return names[framework.IstioInjector] && names[framework.IstioValidator] && names[framework.IstioDefaultValidator]
	})
	framework.Eventually(t, 5*time.Second, "the patcher counts its refused update", func() bool {
		return istioPatchFailures(t, is) > failuresBefore
	})
	t.Logf("refused: the patcher's webhook_patch_failures_total{reason=\"webhook_update_failure\"} went from %g to %g; its log lines about it: %d; the validation controller's: %d",
		failuresBefore, istioPatchFailures(t, is), len(is.Log.Containing("patching webhook"))-patcherLogged, len(is.RefusedInLog()))
	if n := len(is.Log.Containing("patching webhook")) - patcherLogged; n > 0 {
		t.Errorf("the patcher logged %d lines about its refused update; istiod's source says it logs none", n)
	}
	if len(is.RefusedInLog()) == 0 {
		t.Error("the validation controller logged no refused write")
	}

	env.Guard.RewriteConfig(t, istioConfig(t, guardapi.ModeEnforce))
	fixed := time.Now()
	var validators time.Duration
	framework.Eventually(t, 90*time.Second, "the validation controller's retry writes the added root once the mapping is fixed", func() bool {
		b := is.Bundles(t)
		for _, name := range []string{"ValidatingWebhookConfiguration/" + framework.IstioValidator, "ValidatingWebhookConfiguration/" + framework.IstioDefaultValidator} {
			for _, x := range b[name] {
				if string(x) != string(added) {
					return false
				}
			}
		}
		validators = time.Since(fixed)
		return true
	})
	injector := is.Bundles(t)["MutatingWebhookConfiguration/"+framework.IstioInjector]
	stale := len(injector) > 0 && string(injector[0]) == string(p.root2.PEM)
	t.Logf("mapping fixed: the validators held the added root %s later (%s after the directory changed); the injector still holds the old roots: %v",
		validators.Round(time.Millisecond), time.Since(swapped).Round(time.Millisecond), stale)
	if !stale {
		t.Errorf("the injector's configuration holds %d bytes after the patcher's refused write; istiod's source says it waits for the next event", len(injector[0]))
	}
	if _, err := env.AdminClient(t).Annotate(t.Context(), framework.Mutating, framework.IstioInjector, "e2e.webhook-guard.io/reapplied", "1"); err != nil {
		t.Fatalf("annotate the injector's configuration: %v", err)
	}
	d, err := is.WaitInjected(t, added, istioConvergence)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("an event on the injector's configuration: the patcher wrote the added root %s later", d.Round(time.Millisecond))
}

// istioPatchFailures is the patcher's count of refused updates.
func istioPatchFailures(t testing.TB, is *framework.Istio) float64 {
	t.Helper()
	return is.Metrics(t).Sum("webhook_patch_failures_total", map[string]string{"reason": "webhook_update_failure"})
}

// checkIstioDiscover runs `webhook-guard discover` on the cluster istiod
// has written, with the chart's istiod Deployment and Service installed.
// The injector calls the Service, which selects the Deployment that runs as
// istiod and mounts Secret cacerts: discover must propose the snippet's
// writer and CA for it. The validators call a URL (istiod outside the
// cluster): discover cannot name their writer and leaves them undecided.
func checkIstioDiscover(t *testing.T, env *framework.Env, is *framework.Istio) {
	is.InstallIstiodWorkload(t)
	proposed := discoverProposal(t, env)
	want := istioConfig(t, "").Owners[0]
	for _, o := range proposed.Owners {
		if !slices.Equal(o.Writers.ServiceAccounts, want.Writers.ServiceAccounts) {
			continue
		}
		// Of the keys of cacerts holding the caBundle's root, discover
		// takes root-cert.pem, which holds nothing else, over
		// cert-chain.pem (the intermediate and the root).
		got := o.CA
		if !reflect.DeepEqual(got, want.CA) || !slices.Equal(o.Match.Mutating, want.Match.Mutating) {
			t.Errorf("discover proposed for istiod:\n%s\nwant the injector and the CA of:\n%s", mustYAML(t, o), mustYAML(t, want))
		}
		if len(o.Match.Validating) > 0 {
			t.Errorf("discover mapped validators %v, which call a URL", o.Match.Validating)
		}
		return
	}
	t.Errorf("discover proposed no mapping with istiod's writer %v", want.Writers.ServiceAccounts)
}

// TestRealWriterIstioPolicyShape: the same writers against the policy
// shape (kube-apiserver decides with the guard's
// ValidatingAdmissionPolicies, which read Secret cacerts as their param:
// policyOptions grants what the chart's policy.caParams grants). Secret
// cacerts exists before istiod starts, as Istio's plugged-in CA requires,
// and the test starts istiod once kube-apiserver's policies accept its
// first root (the time that takes is logged). The install and every step
// of the rotation converge, and no write of istiod's may be denied: with
// the kubelet's delay the param informer holds the new roots before istiod
// writes them (and the patcher would not retry a refused write). A
// stranger's and a foreign CA are denied by the policy.
func TestRealWriterIstioPolicyShape(t *testing.T) {
	t.Parallel()
	start := time.Now()
	opts := policyOptions()
	opts.Config = istioConfig(t, guardapi.ModeEnforce)
	opts.AuditLog = true
	opts.AuditRequestsOf = []string{istioUser.Name}
	env := framework.Start(t, opts)
	ctx := t.Context()
	env.EnsureNamespace(t, intruderNamespace)
	intruder := env.ServiceAccount(t, intruderNamespace, intruderSA)
	p := newIstioPKI(t)
	dryRun := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}
	// The dry runs are istiod's identity's too, in the audit log.
	probes := 0
	is := startIstio(t, env, p, func(is *framework.Istio) {
		// Until the guard's next pass after Secret cacerts appeared,
		// kube-apiserver refuses istiod's first caBundle as
		// ca-unavailable, and the patcher would never write the
		// injector's again (the file's comment): wait until a dry run of
		// istiod's first write passes, as an operator must before
		// installing istiod.
		created := time.Now()
		framework.Eventually(t, 20*time.Second, "kube-apiserver's policies accept istiod's first root", func() bool {
			_, err := is.Client(t).Mutate(ctx, framework.Mutating, framework.IstioInjector, dryRun, func(_ *metav1.ObjectMeta, bundles [][]byte) {
				for i := range bundles {
					bundles[i] = p.root1.PEM
				}
			})
			return err == nil
		})
		t.Logf("install: kube-apiserver's policies accepted the first root %s after Secret cacerts was created", time.Since(created).Round(time.Millisecond))
		probes = len(env.AuditedWrites(t, istioUser.Name))
	})
	var initial []framework.AuditedWrite
	for _, w := range env.AuditedWrites(t, istioUser.Name)[probes:] {
		if w.Code == 403 {
			initial = append(initial, w)
		}
	}
	t.Logf("install: %d of istiod's writes denied", len(initial))
	for _, w := range initial {
		t.Errorf("install: denied %s %s/%s: %s", w.Verb, w.Resource, w.Name, w.Message)
	}
	rotateIstioRoots(t, env, is, p)
	writes := logWriterWrites(t, env, "istiod", istioUser.Name, probes)
	t.Logf("istiod's writes denied: %d; refused writes in istiod's log: %d; the patcher's refused updates: %g",
		codes(writes)[403], len(is.RefusedInLog()), istioPatchFailures(t, is))

	current := is.SecretRoots(t)
	requireForeignWritesRefused(t, intruder, is.Client(t), "istiod", istioForeignTargets)
	if _, err := is.WaitInjected(t, current, 0); err != nil {
		t.Errorf("after the denied writes: %v", err)
	}
	t.Logf("the test took %s", time.Since(start).Round(time.Millisecond))
}
