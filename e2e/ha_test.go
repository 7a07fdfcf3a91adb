package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/app"
	"github.com/webhook-guard/webhook-guard/e2e/framework"
)

// TestHAThreeReplicasLeaderElection runs three replicas with --leader-elect
// behind a balancer on the static webhook's URL. Every replica serves
// reviews. The API writes are the leader election Lease (leader only) and
// the records (ClusterReports and aggregated Events), which every replica
// writes safely: report writes merge increments with resourceVersion
// conflict retries, and Events are aggregated to one per (configuration,
// reason) per flush interval per replica, never one per request. SIGTERM to
// the leader releases the Lease and another replica takes over within
// seconds, while admission goes on.
func TestHAThreeReplicasLeaderElection(t *testing.T) {
	f := newFixture(t, framework.Options{})
	ctx := t.Context()
	f.create(t, framework.Validating, enforcedName, f.ownerCA.PEM)
	f.create(t, framework.Validating, auditedName, f.ownerCA.PEM)
	grantLeases(t, f.env)

	url := f.env.Guard.Addr()
	f.env.Guard.Stop(t)
	var replicas []*framework.Guard
	var addrs []string
	for range 3 {
		g := f.env.NewReplica(t, "--leader-elect", "--leader-election-namespace", framework.GuardNamespace)
		g.Start(t) // ready: every replica serves, leader or not
		replicas = append(replicas, g)
		addrs = append(addrs, g.Addr())
	}
	framework.NewTCPProxy(t, url, addrs...)

	leaders := func() []*framework.Guard {
		var out []*framework.Guard
		for _, g := range replicas {
			if g.Running() && strings.Contains(g.Log.String(), "uccessfully acquired lease") {
				out = append(out, g)
			}
		}
		return out
	}
	framework.Eventually(t, 30*time.Second, "one replica acquires the Lease", func() bool { return len(leaders()) == 1 })
	leader := leaders()[0]
	lease := getLease(t, f.env)
	t.Logf("leader %s holds Lease %s/%s as %q", leader.Addr(), framework.GuardNamespace, app.LeaderElectionID, *lease.Spec.HolderIdentity)

	// Decisions from whichever replica the balancer picks: audits, denials
	// and allows, none of which writes to the API.
	for i := range 10 {
		_, _ = f.intruder.Annotate(ctx, framework.Validating, enforcedName, "e2e/intruder", fmt.Sprint(i))
		_, _ = f.intruder.Annotate(ctx, framework.Validating, auditedName, "e2e/intruder", fmt.Sprint(i))
		if _, err := f.owner.Annotate(ctx, framework.Validating, enforcedName, "e2e/owner", fmt.Sprint(i)); err != nil {
			t.Errorf("the owner's write failed: %v", err)
		}
	}
	requireBoundedGuardWrites(t, f.env, len(replicas))

	// Hand-over: the leader gets SIGTERM and releases the Lease.
	before := *lease.Spec.HolderIdentity
	stopped := time.Now()
	leader.Signal(t, syscall.SIGTERM)
	if _, exited := leader.WaitExit(30 * time.Second); !exited {
		t.Fatal("the leader did not exit after SIGTERM")
	}
	var holder string
	framework.Eventually(t, 30*time.Second, "another replica takes the Lease", func() bool {
		l := getLease(t, f.env)
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || *l.Spec.HolderIdentity == before {
			return false
		}
		holder = *l.Spec.HolderIdentity
		return len(leaders()) == 1 && leaders()[0] != leader
	})
	t.Logf("leadership moved from %q to %q %s after SIGTERM", before, holder, time.Since(stopped).Round(time.Millisecond))
	for i := range 5 {
		if _, err := f.owner.Annotate(ctx, framework.Validating, enforcedName, "e2e/after-handover", fmt.Sprint(i)); err != nil {
			t.Errorf("the owner's write failed after the hand-over: %v", err)
		}
	}
	requireBoundedGuardWrites(t, f.env, len(replicas))
}

// grantLeases gives the guard's identity what leader election needs, as the
// chart's Role does.
func grantLeases(t testing.TB, env *framework.Env) {
	t.Helper()
	ctx := t.Context()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook-guard-leader-election", Namespace: framework.GuardNamespace},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
		},
	}
	if _, err := env.AdminKube.RbacV1().Roles(framework.GuardNamespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook-guard-leader-election", Namespace: framework.GuardNamespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: framework.GuardNamespace, Name: framework.GuardServiceAccount}},
	}
	if _, err := env.AdminKube.RbacV1().RoleBindings(framework.GuardNamespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func getLease(t testing.TB, env *framework.Env) *coordinationv1.Lease {
	t.Helper()
	l, err := env.AdminKube.CoordinationV1().Leases(framework.GuardNamespace).Get(t.Context(), app.LeaderElectionID, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the leader election Lease: %v", err)
	}
	return l
}

// recordEventReasons are the reasons of the records' aggregated Events.
var recordEventReasons = map[string]bool{"WouldDeny": true, "Denied": true, "BreakGlass": true, "UnmanagedWrite": true, "CABundleFlapping": true}

// requireBoundedGuardWrites: the guard never writes a webhook configuration
// (managedFields name the writer), the Lease carries its writes, and every
// Event it wrote is leader election or a records Event, aggregated: at most
// two per (configuration, reason) per replica (one flush interval plus the
// final flush at shutdown), however many requests there were.
func requireBoundedGuardWrites(t testing.TB, env *framework.Env, replicas int) {
	t.Helper()
	ctx := t.Context()
	events, err := env.AdminKube.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	perKey := map[string]int{}
	for _, e := range events.Items {
		byGuard := strings.Contains(e.Source.Component, "webhook-guard") || strings.Contains(e.ReportingController, "webhook-guard")
		if e.Reason == "LeaderElection" || !byGuard {
			continue
		}
		if !recordEventReasons[e.Reason] {
			t.Errorf("the guard wrote an unexpected Event: %s %s: %s", e.Reason, e.InvolvedObject.Name, e.Message)
			continue
		}
		n := 1
		if e.Series != nil {
			n = int(e.Series.Count)
		}
		perKey[e.InvolvedObject.Name+"/"+e.Reason] += max(n, int(e.Count))
	}
	for key, n := range perKey {
		if n > 2*replicas {
			t.Errorf("%d Events for %s from %d replicas: records Events must be aggregated per flush interval", n, key, replicas)
		}
	}
	// The guard's writes appear in managedFields with its user agent as
	// manager; only the Lease may carry them.
	vwcs, err := env.AdminKube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range vwcs.Items {
		for _, mf := range o.ManagedFields {
			if strings.Contains(mf.Manager, "webhook-guard") {
				t.Errorf("the guard wrote ValidatingWebhookConfiguration %s (manager %s)", o.Name, mf.Manager)
			}
		}
	}
	lease := getLease(t, env)
	guardWrote := false
	for _, mf := range lease.ManagedFields {
		guardWrote = guardWrote || strings.Contains(mf.Manager, "webhook-guard")
	}
	// The check sees the guard's writes: the Lease carries them.
	if !guardWrote {
		t.Errorf("the Lease's managedFields do not name webhook-guard, so the check above proves nothing: %v", lease.ManagedFields)
	}
}
