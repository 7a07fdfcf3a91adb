package e2e

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/static"
)

// What kube-apiserver decides alone in the static shape: with the skip
// grant in place, a writer's UPDATE that leaves the trust alone never
// reaches the guard (kube-apiserver's own webhook call count stays put)
// and passes while the guard is down; every write whose answer depends on
// the guard still reaches it, is decided as before, and fails closed
// while the guard is down. A grant for another GuardConfig's fingerprint
// (a manifest older than the config) sends everything to the guard.
func TestStaticSkipAlwaysAllowed(t *testing.T) {
	const selectedName = "selected-webhooks"
	selected := guardapi.Owner{
		Name:    "selected",
		Mode:    guardapi.ModeEnforce,
		Match:   guardapi.Match{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
		Writers: guardapi.Subjects{ServiceAccounts: []string{appNamespace + "/" + ownerSA}},
		CA:      caFromSecret(),
	}
	f := newFixture(t, framework.Options{
		Config:     guardConfig(selected),
		RenderArgs: []string{"--skip-grant-service-account", framework.GuardNamespace + "/" + framework.GuardServiceAccount},
	})
	ctx := t.Context()
	role, binding := applySkipGrant(t, f.env)
	f.create(t, framework.Validating, enforcedName, f.ownerCA.PEM)
	f.admin.MustCreate(t, framework.Spec{Kind: framework.Validating, Name: selectedName, Labels: map[string]string{"team": "a"}, Bundles: [][]byte{f.ownerCA.PEM}})

	calls := func() float64 {
		t.Helper()
		return apiserverMetrics(t, f.env).Sum("apiserver_admission_webhook_admission_duration_seconds_count",
			map[string]string{"name": static.WebhookName, "operation": "UPDATE"})
	}
	// skipped runs write, which must pass without a call to the guard.
	skipped := func(what string, write func() error) {
		t.Helper()
		before := calls()
		if err := write(); err != nil {
			t.Errorf("%s: %v", what, err)
			return
		}
		if after := calls(); after != before {
			t.Errorf("%s reached the guard (kube-apiserver's call count moved from %v to %v); it leaves the trust alone", what, before, after)
		}
	}
	// called runs write, which must reach the guard; check decides its
	// answer.
	called := func(what string, write func() error, check func(error)) {
		t.Helper()
		before := calls()
		check(write())
		if after := calls(); after != before+1 {
			t.Errorf("%s: kube-apiserver called the guard %v times, want once", what, after-before)
		}
	}
	allowed := func(what string) func(error) {
		return func(err error) {
			if err != nil {
				t.Errorf("%s: want allowed as before, got %v", what, err)
			}
		}
	}
	denied := func(want ...string) func(error) { return func(err error) { requireDenied(t, err, want...) } }
	annotate := func(c *framework.Client, name, value string) func() error {
		return func() error {
			_, err := c.Annotate(ctx, framework.Validating, name, "e2e/skip", value)
			return err
		}
	}
	label := func(c *framework.Client, name, key, value string) func() error {
		return func() error {
			_, err := c.Mutate(ctx, framework.Validating, name, metav1.UpdateOptions{}, func(m *metav1.ObjectMeta, _ [][]byte) {
				if m.Labels == nil {
					m.Labels = map[string]string{}
				}
				m.Labels[key] = value
			})
			return err
		}
	}
	retime := func(c *framework.Client, name string, seconds int32) func() error {
		return func() error {
			api := c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
			vwc, err := api.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			vwc.Webhooks[0].TimeoutSeconds = &seconds
			_, err = api.Update(ctx, vwc, metav1.UpdateOptions{})
			return err
		}
	}
	setBundle := func(c *framework.Client, name string, bundle []byte) func() error {
		return func() error {
			_, err := c.SetCABundle(ctx, framework.Validating, name, bundle)
			return err
		}
	}
	foreign := framework.NewCA(t, "foreign-ca").PEM

	skipped("the owner's annotation", annotate(f.owner, enforcedName, "1"))
	skipped("the owner's label (no selector reads it)", label(f.owner, enforcedName, "x", "y"))
	skipped("the owner's timeout change", retime(f.owner, enforcedName, 7))
	skipped("the owner's annotation of a label-selected configuration", annotate(f.owner, selectedName, "1"))

	called("the owner's caBundle change", setBundle(f.owner, enforcedName, append([]byte("# rewritten\n"), f.ownerCA.PEM...)), allowed("the owner's caBundle change"))
	called("the owner's foreign CA", setBundle(f.owner, enforcedName, foreign), denied("ca-mismatch"))
	called("a non-writer's annotation", annotate(f.intruder, enforcedName, "2"), denied("not-owner"))
	called("a relabel out of the label-selected mapping", label(f.owner, selectedName, "team", "b"), allowed("a relabel out"))
	called("a relabel into the label-selected mapping", label(f.owner, enforcedName, "team", "a"), denied("ambiguous-owner"))

	// The guard is down: what it can only allow still passes, what it
	// decides fails closed.
	f.env.Guard.Stop(t)
	skipped("the owner's annotation while the guard is down", annotate(f.owner, enforcedName, "3"))
	skipped("the owner's timeout change while the guard is down", retime(f.owner, enforcedName, 9))
	failsClosed := func(what string, write func() error) {
		err := write()
		var status apierrors.APIStatus
		if err == nil || !errors.As(err, &status) || status.Status().Code != http.StatusInternalServerError || !strings.Contains(status.Status().Message, "failed calling webhook") {
			t.Errorf("%s while the guard is down: want kube-apiserver's 500 \"failed calling webhook\", got %v", what, err)
		}
	}
	failsClosed("the owner's caBundle change", setBundle(f.owner, enforcedName, append([]byte("# down\n"), f.ownerCA.PEM...)))
	failsClosed("a non-writer's annotation", annotate(f.intruder, enforcedName, "4"))
	f.env.Guard.Start(t)

	// A grant for another GuardConfig: this manifest is now older than the
	// config, and sends the owner's annotation to the guard again.
	role.Rules[0].ResourceNames = []string{static.Fingerprint([]byte("another GuardConfig"))}
	if _, err := f.env.AdminKube.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 10*time.Second, "the outdated manifest sends the owner's annotation to the guard", func() bool {
		before := calls()
		return annotate(f.owner, enforcedName, "5")() == nil && calls() == before+1
	})
	if err := f.env.AdminKube.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	called("the owner's annotation without any grant", annotate(f.owner, enforcedName, "6"), allowed("the owner's annotation"))
}

// applySkipGrant creates, as the administrator, the ClusterRole and
// ClusterRoleBinding `render static-manifest` wrote to skip-grant.yaml.
func applySkipGrant(t *testing.T, env *framework.Env) (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	t.Helper()
	data, ok := env.Rendered["skip-grant.yaml"]
	if !ok {
		t.Fatal("render static-manifest wrote no skip-grant.yaml")
	}
	docs := bytes.Split(data, []byte("---\n"))
	if len(docs) != 2 {
		t.Fatalf("skip-grant.yaml holds %d documents, want a ClusterRole and a ClusterRoleBinding:\n%s", len(docs), data)
	}
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	if err := yaml.UnmarshalStrict(docs[0], &role); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(docs[1], &binding); err != nil {
		t.Fatal(err)
	}
	rbac := env.AdminKube.RbacV1()
	r, err := rbac.ClusterRoles().Create(t.Context(), &role, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := rbac.ClusterRoleBindings().Create(t.Context(), &binding, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r, b
}

// apiserverMetrics scrapes kube-apiserver's /metrics as the administrator.
func apiserverMetrics(t *testing.T, env *framework.Env) framework.Metrics {
	t.Helper()
	data, err := env.AdminKube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("scrape kube-apiserver's metrics: %v", err)
	}
	m, err := framework.ParseMetrics(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
