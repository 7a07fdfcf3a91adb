package e2e

// Helpers the real-writer tests share: what the guard decided about a
// product's mapping, what it recorded of its writer, the writer's writes as
// kube-apiserver answered them, and discover's proposal.

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// mappingDecisions are the guard's allow and deny decisions about mapping.
func mappingDecisions(t testing.TB, g *framework.Guard, mapping string) (allow, deny float64) {
	t.Helper()
	m := g.Metrics(t)
	return m.Sum("webhook_guard_decisions_total", map[string]string{"mapping": mapping, "decision": "allow"}),
		m.Sum("webhook_guard_decisions_total", map[string]string{"mapping": mapping, "decision": "deny"})
}

// recordsOf are the guard's records of user's writes.
func recordsOf(g *framework.Guard, user string) []framework.Record {
	var out []framework.Record
	for _, r := range g.Records() {
		if r.Subject == user {
			out = append(out, r)
		}
	}
	return out
}

// logWriterWrites logs user's writes of the guarded objects (from the
// from-th in kube-apiserver's audit log) by object, verb and status code,
// and returns them; who names the writer.
func logWriterWrites(t *testing.T, env *framework.Env, who, user string, from int) []framework.AuditedWrite {
	t.Helper()
	writes := env.AuditedWrites(t, user)[from:]
	by := map[string]int{}
	for _, w := range writes {
		by[fmt.Sprintf("%s %s/%s %d", w.Verb, w.Resource, w.Name, w.Code)]++
	}
	t.Logf("%s's writes of the guarded objects: %d, by status code %v; by object: %v", who, len(writes), codes(writes), by)
	logFailedWrites(t, writes)
	return writes
}

// discoverProposal runs `webhook-guard discover --format config` on the
// cluster as a system:masters user, logs the proposal and returns it,
// failing the test unless it loads as a GuardConfig.
func discoverProposal(t *testing.T, env *framework.Env) guardapi.GuardConfig {
	t.Helper()
	kubeconfig := env.Kubeconfig(t, envtest.User{Name: "e2e-discoverer", Groups: []string{"system:masters"}})
	proposal, code := cli(t, "discover", "--format", "config", "--kubeconfig", kubeconfig)
	t.Logf("discover --format config:\n%s", proposal)
	if code != 0 {
		t.Fatalf("discover exited %d", code)
	}
	if _, err := policy.Load([]byte(proposal)); err != nil {
		t.Fatalf("the proposal does not load: %v", err)
	}
	var proposed guardapi.GuardConfig
	if err := yaml.Unmarshal([]byte(proposal), &proposed); err != nil {
		t.Fatalf("discover's proposal does not decode: %v", err)
	}
	return proposed
}

// requireWriterUndenied: in the static shape, none of user's writes was
// denied or recorded (kube-apiserver's audit log, the guard's decisions
// about mapping and its records agree), the guard decided every write
// kube-apiserver accepted from it, and its log (refused: its lines about a
// refused write) names no refusal; who names the writer.
func requireWriterUndenied(t *testing.T, env *framework.Env, who, user, mapping string, refused []string) {
	t.Helper()
	writes := logWriterWrites(t, env, who, user, 0)
	denied := deniedWrites(t, env, user)
	allow, deny := mappingDecisions(t, env.Guard, mapping)
	records := recordsOf(env.Guard, user)
	t.Logf("guard decisions of mapping %q: %g allow, %g deny; records of %s: %d", mapping, allow, deny, who, len(records))
	if len(denied) > 0 || deny > 0 || len(records) > 0 {
		first := ""
		if len(denied) > 0 {
			first = denied[0].Message
		}
		t.Errorf("the guard denied %s: %d 403s in the audit log (first: %s), %g deny decisions, %d records", who, len(denied), first, deny, len(records))
	}
	if accepted := codes(writes)[200]; allow < float64(accepted) {
		t.Errorf("the guard allowed %g writes of mapping %q but kube-apiserver accepted %d from %s: it did not decide them all", allow, mapping, accepted, who)
	}
	if len(refused) > 0 {
		t.Errorf("%s logged %d refused writes; first: %s", who, len(refused), refused[0])
	}
}

// checkForeignWritesDenied: in the static shape, a stranger writing its
// own CA, and the writer's identity (writer, with its product's RBAC)
// writing a foreign CA, into each of targets are denied, and nothing is
// stored: every caBundle keeps current.
func checkForeignWritesDenied(t *testing.T, env *framework.Env, mapping string, writer func(testing.TB) *framework.Client, targets []framework.Target, current []byte) {
	ctx := t.Context()
	admin := env.AdminClient(t)
	try := func(t *testing.T, c *framework.Client, ca, reason string) {
		for _, o := range targets {
			before := admin.MustGet(t, o.Kind, o.Name)
			_, err := c.SetCABundle(ctx, o.Kind, o.Name, framework.NewCA(t, ca).PEM)
			requireDenied(t, err, `(mapping "`+mapping+`", enforce)`, reason, c.User.Name)
			requireUnchanged(t, admin, o.Kind, o.Name, before.ResourceVersion, current)
		}
	}
	t.Run("another service account writing its CA is denied", func(t *testing.T) {
		env.EnsureNamespace(t, intruderNamespace)
		try(t, env.ServiceAccount(t, intruderNamespace, intruderSA), "intruder", "not-owner")
	})
	t.Run("the writer's service account writing a foreign CA is denied", func(t *testing.T) {
		try(t, writer(t), "foreign", "ca-mismatch")
	})
}

// requireForeignWritesRefused: in the policy shape, a stranger's CA
// written by intruder and a foreign CA written with the writer's identity
// (writer) into each of targets are refused (not-owner, ca-mismatch); who
// names the writer.
func requireForeignWritesRefused(t *testing.T, intruder, writer *framework.Client, who string, targets []framework.Target) {
	t.Helper()
	ctx := t.Context()
	for _, o := range targets {
		if _, err := intruder.SetCABundle(ctx, o.Kind, o.Name, framework.NewCA(t, "intruder").PEM); err == nil || !strings.Contains(err.Error(), "not-owner") {
			t.Errorf("%s %s: a stranger's CA: %v; want a not-owner denial", o.Kind, o.Name, err)
		}
		if _, err := writer.SetCABundle(ctx, o.Kind, o.Name, framework.NewCA(t, "foreign").PEM); err == nil || !strings.Contains(err.Error(), "ca-mismatch") {
			t.Errorf("%s %s: a foreign CA with %s's identity: %v; want a ca-mismatch denial", o.Kind, o.Name, who, err)
		}
	}
}

// requireAuditRecordsOnlyStranger: in audit mode, a stranger's CA written
// into target is recorded and replaced by the writer (writtenBack waits for
// its CA in every caBundle), and none of user's writes was recorded since
// its recordedBefore-th record; who names the writer.
func requireAuditRecordsOnlyStranger(t *testing.T, env *framework.Env, who, user string, recordedBefore int, target framework.Target, writtenBack func() error) {
	t.Helper()
	stranger := env.ServiceAccount(t, intruderNamespace, intruderSA)
	if _, err := stranger.SetCABundle(t.Context(), target.Kind, target.Name, framework.NewCA(t, "audited").PEM); err != nil {
		t.Fatalf("a stranger's write in audit mode: %v", err)
	}
	waitForRecord(t, env.Guard, "the stranger's audited write", func(r framework.Record) bool { return r.Subject == intruderUser.Name })
	if err := writtenBack(); err != nil {
		t.Error(err)
	}
	if r := recordsOf(env.Guard, user)[recordedBefore:]; len(r) > 0 {
		t.Errorf("audit mode recorded %d of %s's writes; first: %s", len(r), who, r[0].Raw)
	}
}
