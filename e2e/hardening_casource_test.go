package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// The second mapping of the per-source staleness test: its own
// configuration and CA Secret, in a namespace where a Role (not the guard's
// ClusterRole) lets the guard read that one Secret.
const (
	revokedMapping   = "revoked"
	revokedName      = "revoked-webhooks"
	revokedNamespace = "revoked-system"
	revokedSecret    = "revoked-webhook-ca"
	revokedSource    = "Secret " + revokedNamespace + "/" + revokedSecret
	revokedRBAC      = "webhook-guard-revoked-ca"
)

// CA staleness is per source. Two enforced mappings read two CA Secrets;
// the guard loses its Role on one of them. Once its watches have ended (the
// guard's connections to kube-apiserver are cut and restored: a live watch
// is authorized only when it starts, and kube-apiserver ends each after 5 to
// 10 minutes) that Secret's watch is Forbidden: past --ca-max-stale its
// mapping's caBundle changes are denied ca-unavailable, naming the Secret,
// while the other mapping's owner keeps writing its CA (no CA source error
// counted for it). Restoring the Role heals the revoked mapping.
func TestHardeningCAStalenessIsPerSource(t *testing.T) {
	const maxStale = 4 * time.Second
	revoked := mapping(revokedMapping, guardapi.ModeEnforce, revokedName,
		guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: revokedNamespace, Name: revokedSecret, Key: "ca.crt"}})
	f := newFixture(t, framework.Options{GuardAPIProxy: true, Config: guardConfig(revoked),
		GuardArgs: []string{"--ca-max-stale=" + maxStale.String()}})
	ctx := t.Context()
	g := f.env.Guard
	admin := f.env.AdminKube

	// RBAC as the chart grants it: each CA Secret by name. The owner's
	// Secret through the guard's ClusterRole, the revoked one through a
	// Role in its namespace.
	narrowSecretsToOwnerCA(t, admin)
	revokedCA := framework.NewCA(t, "revoked-webhook-ca")
	f.env.EnsureNamespace(t, revokedNamespace)
	if _, err := admin.CoreV1().Secrets(revokedNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: revokedSecret}, Data: map[string][]byte{"ca.crt": revokedCA.PEM},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grantRevokedSecret(t, admin)

	f.create(t, framework.Validating, enforcedName, nil)
	f.create(t, framework.Validating, revokedName, nil)
	bundle := func(ca *framework.CA, i int) []byte { return append([]byte(fmt.Sprintf("# write %d\n", i)), ca.PEM...) }
	framework.Eventually(t, 15*time.Second, "both owners write their CAs while the guard may read both Secrets", func() bool {
		_, errOwner := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, bundle(f.ownerCA, 0))
		_, errRevoked := f.owner.SetCABundle(ctx, framework.Validating, revokedName, bundle(revokedCA, 0))
		return errOwner == nil && errRevoked == nil
	})

	revokeRevokedSecret(t, admin)
	guardSecrets := guardKube(t, f.env).CoreV1().Secrets(revokedNamespace)
	framework.Eventually(t, 15*time.Second, "kube-apiserver forbids the guard to list the revoked Secret", func() bool {
		_, err := guardSecrets.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", revokedSecret).String()})
		return apierrors.IsForbidden(err)
	})
	// End the guard's watches: each is authorized again when it restarts.
	f.env.APIProxy.Stop()
	cut := time.Now()
	if err := f.env.APIProxy.Start(); err != nil {
		t.Fatal(err)
	}

	revokedErrorsBefore := g.Metric(t, "webhook_guard_ca_source_errors_total", map[string]string{"mapping": revokedMapping})
	i := 1
	framework.Eventually(t, maxStale+20*time.Second, "the revoked mapping's caBundle changes fail closed", func() bool {
		i++
		_, err := f.owner.SetCABundle(ctx, framework.Validating, revokedName, bundle(revokedCA, i))
		return err != nil
	})
	deniedAfter := time.Since(cut)
	_, err := f.owner.SetCABundle(ctx, framework.Validating, revokedName, bundle(revokedCA, i+1))
	requireDenied(t, err, "ca-unavailable", revokedSource, "has failed for", "forbidden")
	if deniedAfter < maxStale {
		t.Errorf("the revoked mapping was denied %s after its watch ended; its stored CA must serve for --ca-max-stale (%s)", deniedAfter, maxStale)
	}
	if g.Metric(t, "webhook_guard_ca_source_errors_total", map[string]string{"mapping": revokedMapping}) <= revokedErrorsBefore {
		t.Errorf("the revoked source's stale and failed answers were not counted in webhook_guard_ca_source_errors_total{mapping=%q}", revokedMapping)
	}

	// The other owner writes its CA all along, past --ca-max-stale of the
	// failing watch, and its source counts no error.
	framework.Eventually(t, 15*time.Second, "the other owner writes its CA once its watch is back", func() bool {
		i++
		_, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, bundle(f.ownerCA, i))
		return err == nil
	})
	ownerErrors := g.Metric(t, "webhook_guard_ca_source_errors_total", map[string]string{"mapping": enforcedMapping})
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		i++
		if _, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, bundle(f.ownerCA, i)); err != nil {
			t.Fatalf("the owner of %s could not write its CA %s after another mapping's CA watch failed: %v", enforcedMapping, time.Since(cut).Round(time.Millisecond), err)
		}
	}
	if v := g.Metric(t, "webhook_guard_ca_source_errors_total", map[string]string{"mapping": enforcedMapping}); v != ownerErrors {
		t.Errorf("webhook_guard_ca_source_errors_total{mapping=%q} grew from %g to %g while its own watch was healthy", enforcedMapping, ownerErrors, v)
	}

	grantRevokedSecret(t, admin)
	restored := time.Now()
	framework.Eventually(t, 60*time.Second, "the revoked mapping's owner writes its CA again once the Role is back", func() bool {
		i++
		_, err := f.owner.SetCABundle(ctx, framework.Validating, revokedName, bundle(revokedCA, i))
		return err == nil
	})
	t.Logf("revoked source denied %s after its watch ended (--ca-max-stale %s); the other owner wrote its CA throughout; healed %s after the Role came back",
		deniedAfter.Round(time.Millisecond), maxStale, time.Since(restored).Round(time.Millisecond))
}

// narrowSecretsToOwnerCA replaces the guard's cluster-wide read of Secrets
// by a read of the owner's CA Secret by name, as the chart grants it.
func narrowSecretsToOwnerCA(t *testing.T, admin kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	role, err := admin.RbacV1().ClusterRoles().Get(ctx, "webhook-guard", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{caSecret}, Verbs: []string{"get", "list", "watch"}}}
	for _, r := range role.Rules {
		if len(r.APIGroups) == 1 && r.APIGroups[0] == "" && len(r.Resources) == 2 && r.Resources[0] == "secrets" {
			r.Resources = []string{"configmaps"}
		}
		rules = append(rules, r)
	}
	role.Rules = rules
	if _, err := admin.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// grantRevokedSecret creates the Role and RoleBinding that let the guard
// read the revoked mapping's CA Secret (by name).
func grantRevokedSecret(t *testing.T, admin kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.RbacV1().Roles(revokedNamespace).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: revokedRBAC},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{revokedSecret}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings(revokedNamespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: revokedRBAC},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: revokedRBAC},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: framework.ServiceAccountUser(framework.GuardNamespace, framework.GuardServiceAccount).Name}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// revokeRevokedSecret deletes that Role and RoleBinding.
func revokeRevokedSecret(t *testing.T, admin kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	if err := admin.RbacV1().RoleBindings(revokedNamespace).Delete(ctx, revokedRBAC, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.RbacV1().Roles(revokedNamespace).Delete(ctx, revokedRBAC, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// guardKube is a clientset acting as the guard (impersonated by the admin),
// to see what kube-apiserver lets the guard do.
func guardKube(t *testing.T, env *framework.Env) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(env.Admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: framework.ServiceAccountUser(framework.GuardNamespace, framework.GuardServiceAccount).Name}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
