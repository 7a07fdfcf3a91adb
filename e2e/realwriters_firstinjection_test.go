package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// The policy shape at install: cert-manager's cainjector already runs when
// the product's configurations are created (empty caBundles, annotated for
// injection), so it injects at once, without waiting for the guard's
// policies to know the CA.

// logFirstDenials logs how many of cainjector's writes kube-apiserver
// refused and over how long, with the rules the refusals name.
func logFirstDenials(t *testing.T, r *injectorRun) int {
	t.Helper()
	qs := caInjectorRequests(t, r.f.env)
	denied := deniedRequests(qs)
	rules := map[string]int{}
	for _, q := range denied {
		for _, rule := range []string{"ca-unavailable", "ca-mismatch", "not-owner"} {
			if strings.Contains(q.ResponseStatus.Message, rule) {
				rules[rule]++
			}
		}
	}
	var span time.Duration
	if len(denied) > 0 {
		span = denied[len(denied)-1].RequestReceivedTimestamp.Sub(denied[0].RequestReceivedTimestamp.Time)
	}
	t.Logf("first injection: cainjector sent %d writes, %d refused over %s (rules %v)", len(qs), len(denied), span.Round(time.Millisecond), rules)
	return len(denied)
}

// TestRealWriterCAInjectorPolicyShapeFirstInjection measures the window of
// an injectedByCertManager mapping: its policy learns the CA only after the
// guard has read the new configuration's annotation, the Certificate and
// its Secret, while cainjector reads the Secret at once. It logs the
// refusals; it does not assert them away (docs/policy-shape.md says how
// long the window is and how to avoid it).
func TestRealWriterCAInjectorPolicyShapeFirstInjection(t *testing.T) {
	t.Parallel()
	opts := policyOptions()
	opts.Config = injectedConfig(t, guardapi.ModeEnforce)
	r := startInjectorRun(t, injectorRunOptions{opts: opts, injectorFirst: true})
	logFirstDenials(t, r)
}

// TestRealWriterCAInjectorPolicyShapeFirstInjectionSecretParam: with the
// Certificate's Secret declared as the mapping's CA source and the policies
// reading it as their param (the chart's policy.caParams), kube-apiserver
// decides cainjector's first write on the Secret it reads, the one
// cainjector injects from, and the product's own CA is still denied.
func TestRealWriterCAInjectorPolicyShapeFirstInjectionSecretParam(t *testing.T) {
	t.Parallel()
	opts := policyOptions()
	cfg := injectedConfig(t, guardapi.ModeEnforce)
	for i := range cfg.Owners {
		if cfg.Owners[i].Name == cainjectorMapping {
			cfg.Owners[i].CA = guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: appNamespace, Name: injectedCert, Key: "ca.crt"}}
			cfg.Owners[i].Writers.ServiceAccounts = append(cfg.Owners[i].Writers.ServiceAccounts,
				framework.CAInjectorNamespace+"/"+framework.CAInjectorServiceAccount)
		}
	}
	opts.Config = cfg
	r := startInjectorRun(t, injectorRunOptions{opts: opts, injectorFirst: true})
	// Logged, not asserted: the window closes once kube-apiserver's param
	// informer holds the Secret, which races cainjector's first write
	// (docs/policy-shape.md gives the runs).
	logFirstDenials(t, r)
	own := framework.NewCA(t, "app-self-generated-ca")
	if _, err := r.f.owner.SetCABundle(t.Context(), framework.Validating, injectedVWC, own.PEM); err == nil || !strings.Contains(err.Error(), "ca-mismatch") {
		t.Errorf("the product's own CA: %v; want a ca-mismatch denial (the policy enforces the Secret's CA)", err)
	}
}
