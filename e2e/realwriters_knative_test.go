package e2e

// Knative's own webhook reconcilers (knative.dev/pkg as knative.dev/serving
// v0.50.0 requires it, wired as serving's cmd/webhook wires them, run by
// e2e/writers/knative as knative-serving/controller with serving's RBAC)
// through the guard, in both shapes.
//
// Knative is a replacing writer of whole entries: its certificates
// reconciler keeps a self-signed CA in Secret webhook-certs (ca-cert.pem)
// and regenerates the whole set (a new CA, no overlap with the old one)
// when a key is missing or the serving certificate expires within a day;
// on every event of that Secret or of its configuration, and on every
// informer resync, each admission reconciler rewrites its configuration's
// entry (rules, namespaceSelector, service path, caBundle = ca-cert.pem)
// and the configuration's ownerReferences with a full UPDATE from its
// informer's copy, and the conversion reconciler writes ca-cert.pem into
// the CRD's conversion webhook. A rotation therefore writes the Secret
// first and four objects right after, each with a CA the guard may not
// have read yet.
//
// The defaulting and validation reconcilers never find their entry up to
// date: they write rules without a scope, kube-apiserver stores the
// default scope "*", and their comparison with the stored object always
// differs. Every reconcile (every event and resync of the configuration's
// or the Secret's informer) is an UPDATE that stores nothing new (same
// resourceVersion, no watch event, so no loop), and every one is an
// admission call the guard decides.

import (
	"slices"
	"strings"
	"testing"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

const (
	// knativeMapping owns serving's three configurations and the CRD.
	knativeMapping = "knative-serving"
	// knativeRotations is how many rotations each shape forces in a row.
	knativeRotations = 3
	// knativeConvergence bounds a rotation, from the Secret write that
	// forced it until every caBundle holds the new CA.
	knativeConvergence = 5 * time.Second
	// knativeResync is the informers' resync period (10 hours in Knative):
	// each resync every reconciler compares its object with what it would
	// write.
	knativeResync = time.Second
	// knativeResyncs is how many resyncs of each reconciler the tests wait
	// for once the CA is injected.
	knativeResyncs = 3
)

var knativeUser = framework.ServiceAccountUser(framework.KnativeNamespace, framework.KnativeServiceAccount)

// knativeForeignTargets are the objects the foreign writes try: a
// configuration and the CRD.
var knativeForeignTargets = []framework.Target{
	{Kind: framework.Mutating, Name: framework.KnativeDefaulting}, {Kind: framework.CRD, Name: framework.KnativeWidgetCRD},
}

// knativeConfig maps Knative's configurations and the writer's CRD, in
// mode, to serving's webhook service account and ca-cert.pem of its Secret:
// the products page's Knative snippet plus the CRD whose conversion webhook
// the writer keeps (the snippet tells users to add theirs).
func knativeConfig(t testing.TB, mode guardapi.Mode) *guardapi.GuardConfig {
	t.Helper()
	cfg := productConfig(t, "knative", mode, guardapi.Owner{
		Name: knativeMapping,
		Match: guardapi.Match{
			// Sorted, as discover proposes them.
			Validating: []string{framework.KnativeConfigMaps, framework.KnativeValidation},
			Mutating:   []string{framework.KnativeDefaulting},
		},
		Writers: guardapi.Subjects{ServiceAccounts: []string{framework.KnativeNamespace + "/" + framework.KnativeServiceAccount}},
		CA:      guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: framework.KnativeNamespace, Name: framework.KnativeSecret, Key: framework.KnativeCAKey}},
	})
	cfg.Owners[0].Match.CustomResourceDefinitions = []string{framework.KnativeWidgetCRD}
	return cfg
}

// startKnative installs serving's webhook manifests (as the installer,
// break-glass) and starts Knative's reconcilers, then waits for the first
// CA in the Secret and in every caBundle.
func startKnative(t *testing.T, env *framework.Env) (*framework.Knative, []byte) {
	t.Helper()
	framework.InstallKnativeServing(t, env)
	k := framework.StartKnative(t, env, framework.KnativeOptions{Resync: knativeResync})
	ca := k.WaitCA(t, 15*time.Second)
	inSecret := time.Since(k.StartedAt)
	d, err := k.WaitInjected(t, ca, 15*time.Second)
	if err != nil {
		t.Fatalf("initial injection: %v", err)
	}
	t.Logf("initial injection: the first CA was in the Secret %s after the process started, in every caBundle %s later",
		inSecret.Round(time.Millisecond), d.Round(time.Millisecond))
	return k, ca
}

// waitResyncs waits until each of the four reconcilers that write an
// object has reconciled it n more times (an informer resync enqueues it,
// and so does every resync of the Secret's informer), and returns how long
// that took.
func waitResyncs(t *testing.T, k *framework.Knative, n int) time.Duration {
	t.Helper()
	start := time.Now()
	before := map[string]int{}
	for _, q := range framework.KnativeQueues {
		before[q] = k.Reconciles(q)
	}
	framework.Eventually(t, time.Duration(n+3)*knativeResync*2, "Knative's reconcilers resync", func() bool {
		for _, q := range framework.KnativeQueues {
			if k.Reconciles(q)-before[q] < n {
				return false
			}
		}
		return true
	})
	return time.Since(start)
}

// touchDefaulting plays the installer re-applying serving's release (an
// upgrade): the defaulting configuration's entry gets the manifest's rules
// back, which Knative replaces with its own on the update event. It
// returns how long Knative took to write its rules back.
func touchDefaulting(t *testing.T, env *framework.Env) time.Duration {
	t.Helper()
	ctx := t.Context()
	api := env.AdminKube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	var knativeRules []admv1.RuleWithOperations
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		o, err := api.Get(ctx, framework.KnativeDefaulting, metav1.GetOptions{})
		if err != nil {
			return err
		}
		knativeRules = o.Webhooks[0].Rules
		o.Webhooks[0].Rules = []admv1.RuleWithOperations{{
			Operations: []admv1.OperationType{admv1.Create, admv1.Update},
			Rule:       admv1.Rule{APIGroups: []string{"serving.knative.dev"}, APIVersions: []string{"*"}, Resources: []string{"services"}},
		}}
		_, err = api.Update(ctx, o, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("re-apply the defaulting configuration's rules: %v", err)
	}
	start := time.Now()
	framework.Eventually(t, knativeConvergence, "Knative writes its rules back", func() bool {
		o, err := api.Get(ctx, framework.KnativeDefaulting, metav1.GetOptions{})
		return err == nil && len(o.Webhooks[0].Rules) == len(knativeRules) &&
			slices.Equal(o.Webhooks[0].Rules[0].Resources, knativeRules[0].Resources)
	})
	return time.Since(start)
}

// knativeRotation is what one forced rotation cost.
type knativeRotation struct {
	converged time.Duration
	ok        bool
	// writes are Knative's writes from the trigger until it went quiet;
	// denied those answered 403.
	writes, denied []framework.AuditedWrite
}

// rotateKnative forces a rotation through Knative's own path and waits
// until every caBundle holds the new CA (within knativeConvergence, or 15 s
// more to keep the accounting per rotation), then until Knative's writes
// are over.
func rotateKnative(t *testing.T, env *framework.Env, k *framework.Knative) knativeRotation {
	t.Helper()
	before := len(env.AuditedWrites(t, knativeUser.Name))
	rot := k.Rotate(t)
	_, err := k.WaitInjected(t, rot.New, knativeConvergence-time.Since(rot.Triggered))
	res := knativeRotation{converged: time.Since(rot.Triggered), ok: err == nil}
	if err != nil {
		if _, err := k.WaitInjected(t, rot.New, 15*time.Second); err != nil {
			t.Fatalf("rotation: %v", err)
		}
		res.converged = time.Since(rot.Triggered)
	}
	// Knative is never quiet: the defaulting and validation reconcilers
	// UPDATE their configuration on every reconcile (the file's comment),
	// so the writes of a rotation are those until two
	// resyncs after it converged.
	time.Sleep(2 * knativeResync)
	res.writes = env.AuditedWrites(t, knativeUser.Name)[before:]
	for _, w := range res.writes {
		if w.Code == 403 {
			res.denied = append(res.denied, w)
		}
	}
	return res
}

// TestRealWriterKnativeStaticShape: Knative's webhook reconcilers through
// the static shape's guard (enforce), from an empty install: the first CA
// in every caBundle (three configurations and the CRD's conversion
// webhook), several informer resyncs, an installer re-applying the
// defaulting configuration's rules, and knativeRotations rotations, each
// in every caBundle within knativeConvergence. Nothing of Knative's is
// denied or recorded (kube-apiserver's audit log, the guard's metrics and
// records agree), the guard decided every write kube-apiserver accepted,
// and a stranger's CA and a foreign CA written with Knative's identity are
// denied. Then, in audit mode, a rotation records nothing against Knative
// while a stranger's write is recorded.
func TestRealWriterKnativeStaticShape(t *testing.T) {
	t.Parallel()
	start := time.Now()
	env := framework.Start(t, framework.Options{Config: knativeConfig(t, guardapi.ModeEnforce), AuditLog: true})
	k, _ := startKnative(t, env)
	t.Logf("%d resyncs of each reconciler in %s",
		knativeResyncs, waitResyncs(t, k, knativeResyncs).Round(time.Millisecond))
	t.Logf("the installer re-applied the defaulting configuration's rules; Knative wrote its own back in %s",
		touchDefaulting(t, env).Round(time.Millisecond))

	for i := 1; i <= knativeRotations; i++ {
		res := rotateKnative(t, env, k)
		if !res.ok {
			t.Errorf("rotation %d took %s to reach every caBundle; want at most %s", i, res.converged.Round(time.Millisecond), knativeConvergence)
		}
		t.Logf("rotation %d: every caBundle held the new CA %s after the trigger; %d writes by Knative, %d denied",
			i, res.converged.Round(time.Millisecond), len(res.writes), len(res.denied))
	}

	requireWriterUndenied(t, env, "Knative", knativeUser.Name, knativeMapping, k.RefusedInLog())
	checkForeignWritesDenied(t, env, knativeMapping, k.Client, knativeForeignTargets, k.SecretData(t)[framework.KnativeCAKey])
	t.Run("discover proposes Knative's mapping", func(t *testing.T) { checkKnativeDiscover(t, env) })

	t.Run("audit mode records nothing against Knative", func(t *testing.T) {
		env.Guard.RewriteConfig(t, knativeConfig(t, guardapi.ModeAudit))
		// The enforce-mode denials of the foreign CA above are Knative's
		// identity's records too: count from here.
		recordedBefore := len(recordsOf(env.Guard, knativeUser.Name))
		res := rotateKnative(t, env, k)
		if !res.ok || len(res.denied) > 0 {
			t.Errorf("audit-mode rotation: converged in %s (within bound: %v), %d denied", res.converged.Round(time.Millisecond), res.ok, len(res.denied))
		}
		// Knative, a replacing writer, puts its CA back over the stranger's.
		requireAuditRecordsOnlyStranger(t, env, "Knative", knativeUser.Name, recordedBefore,
			framework.Target{Kind: framework.Validating, Name: framework.KnativeConfigMaps}, func() error {
				_, err := k.WaitInjected(t, k.SecretData(t)[framework.KnativeCAKey], knativeConvergence)
				return err
			})
		t.Logf("audit mode: rotation converged in %s with %d writes by Knative, none recorded; the stranger's write recorded",
			res.converged.Round(time.Millisecond), len(res.writes))
	})
	t.Logf("the test took %s", time.Since(start).Round(time.Millisecond))
}

// TestRealWriterKnativePolicyShape: the same reconcilers against the
// policy shape (no static manifest; kube-apiserver decides with the
// guard's ValidatingAdmissionPolicies, which read the CA Secret as their
// param: policyOptions grants what the chart's policy.caParams grants).
// After the initial injection, resyncs and knativeRotations rotations
// each reaching every caBundle within knativeConvergence, no write of
// Knative's may be denied but those the policy shape cannot avoid and the
// rotator's test also allows: a write of a CA the Secret had already
// replaced (Knative's informer behind its own rotation), or of the CA the
// Secret had held for under pollSlack (kube-apiserver's param informer
// behind the Secret). Each is logged with counts and timings. A stranger's
// and a foreign CA are denied by the policy.
func TestRealWriterKnativePolicyShape(t *testing.T) {
	t.Parallel()
	start := time.Now()
	opts := policyOptions()
	opts.Config = knativeConfig(t, guardapi.ModeEnforce)
	opts.AuditLog = true
	opts.AuditRequestsOf = []string{knativeUser.Name}
	env := framework.Start(t, opts)
	ctx := t.Context()
	history := recordSecretCAHistory(t, env, framework.KnativeNamespace, framework.KnativeSecret, framework.KnativeCAKey)

	framework.InstallKnativeServing(t, env)
	env.EnsureNamespace(t, intruderNamespace)
	intruder := env.ServiceAccount(t, intruderNamespace, intruderSA)
	dryRun := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}
	framework.Eventually(t, 20*time.Second, "kube-apiserver enforces the generated policy", func() bool {
		_, err := intruder.Mutate(ctx, framework.Mutating, framework.KnativeDefaulting, dryRun, func(m *metav1.ObjectMeta, _ [][]byte) {
			m.Annotations = map[string]string{"e2e/probe": "x"}
		})
		return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy") && strings.Contains(err.Error(), "not-owner")
	})

	k := framework.StartKnative(t, env, framework.KnativeOptions{Resync: knativeResync})
	ca := k.WaitCA(t, 15*time.Second)
	if _, err := k.WaitInjected(t, ca, 20*time.Second); err != nil {
		t.Fatalf("initial injection: %v", err)
	}
	t.Logf("initial injection: in every caBundle %s after the process started", time.Since(k.StartedAt).Round(time.Millisecond))
	// Not asserted, as for the rotator: the Secret starts empty, and until
	// kube-apiserver's param informer holds the first CA the policy fails
	// caBundle changes closed.
	initial := deniedWrites(t, env, knativeUser.Name)
	t.Logf("initial injection: %d of Knative's writes denied", len(initial))
	if len(initial) > 0 {
		t.Logf("first denial of the initial injection: %s", initial[0].Message)
	}
	t.Logf("%d resyncs of each reconciler in %s", knativeResyncs, waitResyncs(t, k, knativeResyncs).Round(time.Millisecond))
	t.Logf("the installer re-applied the defaulting configuration's rules; Knative wrote its own back in %s",
		touchDefaulting(t, env).Round(time.Millisecond))
	afterInitial := len(deniedWrites(t, env, knativeUser.Name))

	total := 0
	for i := 1; i <= knativeRotations; i++ {
		res := rotateKnative(t, env, k)
		stale, other := staleRequests(res.denied, history)
		lag, other := paramLagRequests(other, history)
		total += len(other)
		t.Logf("rotation %d: every caBundle held the new CA %s after the trigger; %d writes by Knative, %d denied (%d of a replaced CA, %d of a CA under %s in the Secret, %d other)",
			i, res.converged.Round(time.Millisecond), len(res.writes), len(res.denied), len(stale), len(lag), pollSlack, len(other))
		for _, w := range res.denied {
			t.Logf("rotation %d: denied %s %s/%s received at %s, sent CAs %v: %s", i, w.Verb, w.Resource, w.Name,
				w.Received.Format("15:04:05.000"), sentCAs(w), w.Message)
		}
		if !res.ok {
			t.Errorf("rotation %d took %s to reach every caBundle; want at most %s", i, res.converged.Round(time.Millisecond), knativeConvergence)
		}
		if len(lag) > len(framework.KnativeTargets) {
			t.Errorf("rotation %d: %d writes of a just-rotated CA denied; want at most one per object (%d)", i, len(lag), len(framework.KnativeTargets))
		}
	}
	t.Logf("the Secret's CAs: %s", history)
	logWriterWrites(t, env, "Knative", knativeUser.Name, 0)
	if total > 0 {
		t.Errorf("kube-apiserver denied %d of Knative's writes over %d rotations that were neither stale nor param lag; want 0", total, knativeRotations)
	}
	t.Logf("Knative's writes denied after the initial injection: %d; refused writes in Knative's log: %d",
		len(deniedWrites(t, env, knativeUser.Name))-afterInitial, len(k.RefusedInLog()))

	current := k.SecretData(t)[framework.KnativeCAKey]
	requireForeignWritesRefused(t, intruder, k.Client(t), "Knative", knativeForeignTargets)
	if _, err := k.WaitInjected(t, current, 0); err != nil {
		t.Errorf("after the denied writes: %v", err)
	}
	t.Logf("the test took %s", time.Since(start).Round(time.Millisecond))
}

// checkKnativeDiscover runs `webhook-guard discover` on the cluster
// Knative has written, with serving's webhook Deployment and Service
// installed: it must propose the mapping the tests declare by hand (the
// configurations and the CRD, the Deployment's service account, the
// Secret key holding the caBundle's CA), in audit mode.
func checkKnativeDiscover(t *testing.T, env *framework.Env) {
	framework.InstallKnativeWebhookWorkload(t, env)
	cfg := discoverProposal(t, env)
	want := knativeConfig(t, guardapi.ModeAudit).Owners[0]
	for _, o := range cfg.Owners {
		if mustYAML(t, o.Writers) == mustYAML(t, want.Writers) {
			if mustYAML(t, o.Match) != mustYAML(t, want.Match) || mustYAML(t, o.CA) != mustYAML(t, want.CA) {
				t.Errorf("discover proposed for Knative:\n%s\nwant the match and CA of:\n%s", mustYAML(t, o), mustYAML(t, want))
			}
			return
		}
	}
	t.Errorf("discover proposed no mapping with Knative's writer %v", want.Writers.ServiceAccounts)
}
