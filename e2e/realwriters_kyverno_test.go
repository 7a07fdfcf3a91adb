package e2e

// Kyverno's admission controller code (github.com/kyverno/kyverno's
// certificate renewer and webhook controllers, run by e2e/writers/kyverno
// as kyverno/kyverno-admission-controller with the RBAC of Kyverno's chart)
// writing its webhook configurations through the guard, in both shapes.
//
// Kyverno is a replacing writer of whole configurations: its webhook
// controller rebuilds each configuration from its policies and its CA
// Secret's tls.crt (byte for byte: every CA certificate still valid) and
// creates it, or UPDATEs its labels, annotations, owner references and
// webhooks[]. Its resource configurations gain and lose entries as
// ClusterPolicies come and go. A CA rotation is its renewer's: the CA
// Secret is rewritten first, the configurations on the Secret's event.

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

const (
	// kyvernoMapping owns Kyverno's eight configurations.
	kyvernoMapping = "kyverno"
	// kyvernoRotations is how many CA rotations each shape runs.
	kyvernoRotations = 2
	// kyvernoConvergence bounds a step: from the write that caused it
	// (a ClusterPolicy, the renewer's trigger) until every entry of every
	// configuration is what Kyverno wants, with the current CA.
	kyvernoConvergence = 10 * time.Second
	// kyvernoCALead is how long after the renewer generated a CA it is due
	// (framework.KyvernoOptions.CALead).
	kyvernoCALead = 4 * time.Second
	// The entry names of Kyverno's resource configurations
	// (config.ValidatingWebhookName and config.MutatingWebhookName, with
	// the failure policy), and the configurations.
	kyvernoValidateFail   = "validate.kyverno.svc-fail"
	kyvernoValidateIgnore = "validate.kyverno.svc-ignore"
	kyvernoMutateFail     = "mutate.kyverno.svc-fail"
	kyvernoResourceVWC    = "ValidatingWebhookConfiguration/kyverno-resource-validating-webhook-cfg"
	kyvernoResourceMWC    = "MutatingWebhookConfiguration/kyverno-resource-mutating-webhook-cfg"
)

// kyvernoConfig maps Kyverno's configurations, in mode, to its admission
// controller's service account and the tls.crt of its CA Secret: the
// products page's Kyverno snippet.
func kyvernoConfig(t testing.TB, mode guardapi.Mode) *guardapi.GuardConfig {
	t.Helper()
	return productConfig(t, "kyverno", mode, guardapi.Owner{
		Name:    kyvernoMapping,
		Match:   guardapi.Match{Validating: framework.KyvernoValidating, Mutating: framework.KyvernoMutating},
		Writers: guardapi.Subjects{ServiceAccounts: []string{framework.KyvernoNamespace + "/" + framework.KyvernoServiceAccount}},
		CA:      guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: framework.KyvernoNamespace, Name: framework.KyvernoCASecret, Key: "tls.crt"}},
	})
}

// kyvernoPolicy is a ClusterPolicy on ConfigMaps of one namespace: a
// validate rule (enforced) or a mutate rule, with failurePolicy.
func kyvernoPolicy(name, failurePolicy string, mutate bool) map[string]any {
	rule := map[string]any{
		"name":  "r",
		"match": map[string]any{"any": []any{map[string]any{"resources": map[string]any{"kinds": []any{"ConfigMap"}, "namespaces": []any{"e2e-kyverno"}}}}},
	}
	if mutate {
		rule["mutate"] = map[string]any{"patchStrategicMerge": map[string]any{"metadata": map[string]any{"labels": map[string]any{"e2e": "kyverno"}}}}
	} else {
		rule["validate"] = map[string]any{
			"failureAction": "Enforce",
			"message":       "a team label is required",
			"pattern":       map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": "?*"}}},
		}
	}
	return map[string]any{
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"background": false, "failurePolicy": failurePolicy, "rules": []any{rule}},
	}
}

// kyvernoStep is one change the scenario makes and what it cost.
type kyvernoStep struct {
	what      string
	converged time.Duration
	ok        bool
	// denied are Kyverno's 403s from the change until it went quiet.
	denied []framework.AuditedWrite
}

// kyvernoDenials are Kyverno's webhook configuration writes kube-apiserver
// answered 403 (by the guard's webhook or a policy), from its audit log.
func kyvernoDenials(t testing.TB, env *framework.Env) []framework.AuditedWrite {
	t.Helper()
	var out []framework.AuditedWrite
	for _, w := range env.AuditedWrites(t, framework.KyvernoUser.Name) {
		if w.Code == 403 {
			out = append(out, w)
		}
	}
	return out
}

// hasEntries reports whether the configuration key has exactly the entry
// names want (in any order).
func hasEntries(names map[string][]string, key string, want ...string) bool {
	got := slices.Clone(names[key])
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	return slices.Equal(got, want)
}

// runKyvernoScenario installs Kyverno from empty, creates, changes and
// deletes ClusterPolicies, rotates its CA kyvernoRotations times, and
// returns each step with its convergence and denials. A step that does not
// converge within kyvernoConvergence is waited for (up to 30 s more) so
// that the next step's accounting is its own.
func runKyvernoScenario(t *testing.T, env *framework.Env) (*framework.Kyverno, []kyvernoStep) {
	t.Helper()
	var steps []kyvernoStep
	k := framework.StartKyverno(t, env, framework.KyvernoOptions{CALead: kyvernoCALead})
	run := func(what string, start time.Time, ca func() []byte, entries func(map[string][]string) bool) {
		t.Helper()
		deniedBefore := len(kyvernoDenials(t, env))
		s := kyvernoStep{what: what}
		done := func() bool {
			if k.Stopped() {
				t.Fatalf("%s: kyverno-writer exited\n--- log (last 40 lines) ---\n%s", what, k.Log.Tail(40))
			}
			names, _ := k.Entries(t)
			_, err := k.WaitInjected(t, ca(), 0)
			return err == nil && entries(names)
		}
		// One reading decides: Kyverno may rewrite its configurations
		// right after they converged, and a second reading would see that
		// rewrite in flight (its follow-up writes are waited for below).
		converged := done()
		for !converged && time.Since(start) < kyvernoConvergence+30*time.Second {
			time.Sleep(20 * time.Millisecond)
			converged = done()
		}
		s.converged = time.Since(start)
		s.ok = s.converged <= kyvernoConvergence && converged
		if !converged {
			names, _ := k.Entries(t)
			_, err := k.WaitInjected(t, ca(), 0)
			t.Fatalf("%s: not converged after %s: entries %v; %v", what, s.converged.Round(time.Millisecond), names, err)
		}
		time.Sleep(500 * time.Millisecond) // its follow-up writes
		s.denied = kyvernoDenials(t, env)[deniedBefore:]
		first := ""
		if len(s.denied) > 0 {
			first = "; first: " + s.denied[0].Message
		}
		t.Logf("%-48s converged in %6s; %d of Kyverno's writes denied%s", what+":", s.converged.Round(time.Millisecond), len(s.denied), first)
		steps = append(steps, s)
	}
	current := func() []byte { return k.CA(t) }
	noPolicies := func(names map[string][]string) bool {
		return hasEntries(names, kyvernoResourceVWC) && hasEntries(names, kyvernoResourceMWC)
	}

	run("install from empty", k.StartedAt, current, noPolicies)
	start := time.Now()
	framework.ApplyClusterPolicy(t, env, kyvernoPolicy("e2e-validate", "Fail", false))
	run("validate ClusterPolicy (Fail) created", start, current, func(n map[string][]string) bool {
		return hasEntries(n, kyvernoResourceVWC, kyvernoValidateFail)
	})
	start = time.Now()
	framework.ApplyClusterPolicy(t, env, kyvernoPolicy("e2e-mutate", "Fail", true))
	run("mutate ClusterPolicy (Fail) created", start, current, func(n map[string][]string) bool {
		return hasEntries(n, kyvernoResourceMWC, kyvernoMutateFail)
	})
	start = time.Now()
	framework.ApplyClusterPolicy(t, env, kyvernoPolicy("e2e-validate", "Ignore", false))
	run("validate ClusterPolicy changed to Ignore", start, current, func(n map[string][]string) bool {
		return hasEntries(n, kyvernoResourceVWC, kyvernoValidateIgnore)
	})
	start = time.Now()
	framework.DeleteClusterPolicy(t, env, "e2e-validate")
	framework.DeleteClusterPolicy(t, env, "e2e-mutate")
	run("both ClusterPolicies deleted", start, current, noPolicies)

	// Rotations with both resource configurations holding an entry, so that
	// every one of the eight carries the CA (and discover sees all eight).
	framework.ApplyClusterPolicy(t, env, kyvernoPolicy("e2e-validate", "Fail", false))
	framework.ApplyClusterPolicy(t, env, kyvernoPolicy("e2e-mutate", "Fail", true))
	for i := 1; i <= kyvernoRotations; i++ {
		rot := k.Rotate(t)
		run(fmt.Sprintf("CA rotation %d (new CA in the Secret after %s)", i, rot.Rotated.Sub(rot.Triggered).Round(time.Millisecond)),
			rot.Triggered, func() []byte { return rot.New }, func(n map[string][]string) bool {
				return hasEntries(n, kyvernoResourceVWC, kyvernoValidateFail) && hasEntries(n, kyvernoResourceMWC, kyvernoMutateFail)
			})
	}
	writes := env.AuditedWrites(t, framework.KyvernoUser.Name)
	t.Logf("Kyverno's writes of its configurations: %d, by status code %v", len(writes), codes(writes))
	logFailedWrites(t, writes)
	return k, steps
}

// requireKyvernoConverged fails for each step that took longer than
// kyvernoConvergence.
func requireKyvernoConverged(t *testing.T, steps []kyvernoStep) {
	t.Helper()
	for _, s := range steps {
		if !s.ok {
			t.Errorf("%s: converged in %s; want at most %s", s.what, s.converged.Round(time.Millisecond), kyvernoConvergence)
		}
	}
}

// deniedTotal sums the steps' denials and says which steps had them.
func deniedTotal(steps []kyvernoStep) (int, string) {
	n := 0
	var parts []string
	for _, s := range steps {
		n += len(s.denied)
		if len(s.denied) > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d (first: %s)", s.what, len(s.denied), s.denied[0].Message))
		}
	}
	return n, strings.Join(parts, "; ")
}

// TestRealWriterKyvernoStaticShape: Kyverno's renewer and webhook
// controllers through the static shape's guard (enforce): from empty
// (Kyverno creates its Secrets and eight configurations), ClusterPolicies
// created, changed and deleted (entries added, replaced and dropped), and
// two CA rotations through its renewer; each step converges within 10 s,
// and the guard denies none of Kyverno's writes (kube-apiserver's audit
// log, the guard's metrics and records agree). Another service account
// writing its own CA into Kyverno's configurations is denied.
func TestRealWriterKyvernoStaticShape(t *testing.T) {
	t.Parallel()
	env := framework.Start(t, framework.Options{Config: kyvernoConfig(t, guardapi.ModeEnforce), AuditLog: true})
	_, steps := runKyvernoScenario(t, env)
	requireKyvernoConverged(t, steps)

	deny := env.Guard.Metric(t, "webhook_guard_decisions_total", map[string]string{"mapping": kyvernoMapping, "decision": "deny"})
	allow := env.Guard.Metric(t, "webhook_guard_decisions_total", map[string]string{"mapping": kyvernoMapping, "decision": "allow"})
	var records []framework.Record
	for _, r := range env.Guard.Records() {
		if r.Subject == framework.KyvernoUser.Name {
			records = append(records, r)
		}
	}
	n, which := deniedTotal(steps)
	t.Logf("guard decisions of mapping %q: %g allow, %g deny; records of Kyverno: %d", kyvernoMapping, allow, deny, len(records))
	if n > 0 || deny > 0 || len(records) > 0 {
		t.Errorf("the guard denied Kyverno: %d 403s in the audit log (%s), %g deny decisions, %d records", n, which, deny, len(records))
	}

	t.Run("another service account writing its CA is denied", func(t *testing.T) {
		intruder := env.ServiceAccount(t, intruderNamespace, intruderSA)
		for _, name := range []string{"kyverno-policy-validating-webhook-cfg", "kyverno-resource-validating-webhook-cfg"} {
			_, err := intruder.SetCABundle(t.Context(), framework.Validating, name, framework.NewCA(t, "intruder").PEM)
			requireDenied(t, err, `(mapping "kyverno", enforce)`, "not-owner", intruderUser.Name)
		}
	})

	t.Run("discover proposes the mapping", func(t *testing.T) {
		// The chart's Deployment, ServiceAccount and Service selector, and
		// Kyverno's Secrets and configurations as Kyverno left them.
		proposed := discoverProposal(t, env)
		// The products page's mapping, but for its name: discover names a
		// mapping after the workload.
		if len(proposed.Owners) != 1 {
			t.Fatalf("discover proposed %d mappings, want Kyverno's one", len(proposed.Owners))
		}
		got, want := proposed.Owners[0], kyvernoConfig(t, "").Owners[0]
		got.Name, want.Name, got.Mode = "", "", ""
		slices.Sort(got.Match.Validating)
		slices.Sort(got.Match.Mutating)
		slices.Sort(want.Match.Validating)
		slices.Sort(want.Match.Mutating)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("discover proposed\n%+v\nthe products page's Kyverno mapping is\n%+v", got, want)
		}
	})
}

// TestRealWriterKyvernoPolicyShape: the same scenario against the policy
// shape (kube-apiserver decides in the generated policies, which read
// Kyverno's CA Secret as their param: the chart's policy.caParams). Every
// step converges within 10 s; Kyverno's refused writes are counted from
// kube-apiserver's audit log per step and must be none after the install.
//
// The install has a window: until the CA Secret exists kube-apiserver
// skips the binding of the policy that reads it as its param (it never
// evaluates a policy whose param is missing), so the mapping's main policy
// holds the caBundle check itself, with no CA, until the guard's next pass
// after the Secret appears. Kyverno's first writes in that window are
// refused ca-unavailable and retried; nothing else may be refused then.
func TestRealWriterKyvernoPolicyShape(t *testing.T) {
	t.Parallel()
	opts := policyOptions()
	opts.Config = kyvernoConfig(t, guardapi.ModeEnforce)
	opts.AuditLog = true
	env := framework.Start(t, opts)
	_, steps := runKyvernoScenario(t, env)
	requireKyvernoConverged(t, steps)
	install := steps[0]
	for _, d := range install.denied {
		if !strings.Contains(d.Message, "ca-unavailable") {
			t.Errorf("%s: a write refused for another reason than the CA Secret not read yet: %s", install.what, d.Message)
		}
	}
	t.Logf("%s: %d of Kyverno's writes refused ca-unavailable before the guard's pass after the CA Secret appeared", install.what, len(install.denied))
	if n, which := deniedTotal(steps[1:]); n > 0 {
		t.Errorf("kube-apiserver refused %d of Kyverno's writes after the install: %s", n, which)
	}

	t.Run("another service account writing its CA is denied", func(t *testing.T) {
		intruder := env.ServiceAccount(t, intruderNamespace, intruderSA)
		_, err := intruder.SetCABundle(t.Context(), framework.Validating, "kyverno-policy-validating-webhook-cfg", framework.NewCA(t, "intruder").PEM)
		if err == nil || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") || !strings.Contains(err.Error(), "not-owner") {
			t.Errorf("a stranger's CA in Kyverno's configuration: %v; want a not-owner denial by the generated policy", err)
		}
	})
}

// TestRealWriterKyvernoAuditStatic: in audit mode the static shape records
// nothing against Kyverno over the same scenario.
func TestRealWriterKyvernoAuditStatic(t *testing.T) {
	t.Parallel()
	env := framework.Start(t, framework.Options{Config: kyvernoConfig(t, guardapi.ModeAudit), AuditLog: true})
	_, steps := runKyvernoScenario(t, env)
	requireKyvernoConverged(t, steps)
	var records []framework.Record
	for _, r := range env.Guard.Records() {
		if r.Subject == framework.KyvernoUser.Name {
			records = append(records, r)
		}
	}
	if len(records) > 0 {
		t.Errorf("the guard recorded %d of Kyverno's writes in audit mode; first: %+v", len(records), records[0])
	}
	if n, which := deniedTotal(steps); n > 0 {
		t.Errorf("kube-apiserver refused %d of Kyverno's writes in audit mode: %s", n, which)
	}
}
