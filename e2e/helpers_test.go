package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// The cast. The owner is the application's controller; the intruder is
// another controller that must not write the owner's configurations.
const (
	appNamespace      = "app-system"
	ownerSA           = "app-controller"
	intruderNamespace = "other-system"
	intruderSA        = "intruder"

	// caSecret holds the owner's CA (key ca.crt), as an application that
	// manages its own webhook certificates keeps it.
	caSecret = "app-webhook-ca"

	// Two mappings with the same owner, one per mode, so one environment
	// shows both modes.
	enforcedMapping = "enforced"
	auditedMapping  = "audited"
	enforcedName    = "enforced-webhooks"
	auditedName     = "audited-webhooks"
)

var (
	ownerUser    = framework.ServiceAccountUser(appNamespace, ownerSA)
	intruderUser = framework.ServiceAccountUser(intruderNamespace, intruderSA)
)

// caFromSecret is the owner's CA source.
func caFromSecret() guardapi.CASource {
	return guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: appNamespace, Name: caSecret, Key: "ca.crt"}}
}

// mapping owns the configurations called name, of both kinds.
func mapping(owner string, mode guardapi.Mode, name string, ca guardapi.CASource) guardapi.Owner {
	return guardapi.Owner{
		Name:    owner,
		Mode:    mode,
		Match:   guardapi.Match{Validating: []string{name}, Mutating: []string{name}},
		Writers: guardapi.Subjects{ServiceAccounts: []string{appNamespace + "/" + ownerSA}},
		CA:      ca,
	}
}

// guardConfig has system:masters as break-glass and the enforced and
// audited mappings, plus any extra ones.
func guardConfig(extra ...guardapi.Owner) *guardapi.GuardConfig {
	return &guardapi.GuardConfig{
		DefaultMode: guardapi.ModeAudit,
		BreakGlass:  guardapi.Subjects{Groups: []string{"system:masters"}},
		Unmanaged:   guardapi.UnmanagedAllow,
		Owners: append([]guardapi.Owner{
			mapping(enforcedMapping, guardapi.ModeEnforce, enforcedName, caFromSecret()),
			mapping(auditedMapping, guardapi.ModeAudit, auditedName, caFromSecret()),
		}, extra...),
	}
}

// productConfig is a GuardConfig (audit by default, system:masters as
// break-glass) holding, in mode, the one mapping of the products page's
// snippet for product (config/samples/products/<product>.yaml). want is
// that mapping as the test runs the product, whatever its mode: the test
// fails when the snippet says otherwise, so that the page cannot drift from
// what the suite runs.
func productConfig(t testing.TB, product string, mode guardapi.Mode, want guardapi.Owner) *guardapi.GuardConfig {
	t.Helper()
	cfg := &guardapi.GuardConfig{
		DefaultMode: guardapi.ModeAudit,
		BreakGlass:  guardapi.Subjects{Groups: []string{"system:masters"}},
		Unmanaged:   guardapi.UnmanagedAllow,
	}
	owner := framework.ProductMapping(t, product, mode, cfg)
	want.Mode = mode
	if !reflect.DeepEqual(owner, want) {
		t.Fatalf("the %s snippet's mapping\n%+v\nis not the one this test runs the product under:\n%+v", product, owner, want)
	}
	cfg.Owners = []guardapi.Owner{owner}
	return cfg
}

// fixture is one environment with the cast and the owner's CA in place.
type fixture struct {
	env      *framework.Env
	admin    *framework.Client
	owner    *framework.Client
	intruder *framework.Client
	ownerCA  *framework.CA
}

func newFixture(t *testing.T, opts framework.Options) *fixture {
	t.Helper()
	if opts.Config == nil {
		opts.Config = guardConfig()
	}
	env := framework.Start(t, opts)
	f := &fixture{env: env, ownerCA: framework.NewCA(t, "app-webhook-ca")}
	env.EnsureNamespace(t, appNamespace)
	env.EnsureNamespace(t, intruderNamespace)
	f.setOwnerCA(t, f.ownerCA.PEM)
	f.admin = env.AdminClient(t)
	f.owner = env.Client(t, ownerUser)
	f.intruder = env.Client(t, intruderUser)
	return f
}

// setOwnerCA creates or replaces the owner's CA Secret.
func (f *fixture) setOwnerCA(t testing.TB, pem []byte) {
	t.Helper()
	ctx := context.Background()
	secrets := f.env.AdminKube.CoreV1().Secrets(appNamespace)
	s, err := secrets.Get(ctx, caSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: caSecret},
			Data:       map[string][]byte{"ca.crt": pem},
		}, metav1.CreateOptions{})
	} else if err == nil {
		s.Data = map[string][]byte{"ca.crt": pem}
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("write the owner's CA Secret: %v", err)
	}
}

// create makes a configuration as the break-glass admin (setup, not under test).
func (f *fixture) create(t testing.TB, kind framework.Kind, name string, bundles ...[]byte) *framework.WebhookConfig {
	t.Helper()
	return f.admin.MustCreate(t, framework.Spec{Kind: kind, Name: name, Bundles: bundles})
}

// decisions reads webhook_guard_decisions_total for a mapping and decision.
func (f *fixture) decisions(t testing.TB, mapping, decision string) float64 {
	t.Helper()
	return f.env.Guard.Metric(t, "webhook_guard_decisions_total", map[string]string{"mapping": mapping, "decision": decision})
}

// records reads webhook_guard_records_total for a mapping and decision.
func (f *fixture) records(t testing.TB, mapping, decision string) float64 {
	t.Helper()
	return f.env.Guard.Metric(t, "webhook_guard_records_total", map[string]string{"mapping": mapping, "decision": decision})
}

// requireDenied asserts a 403 from the guard (through kube-apiserver's
// webhook admission) whose message holds every want.
func requireDenied(t testing.TB, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the request was allowed; want a 403 from webhook-guard containing %q", want)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		t.Fatalf("want an API status error (403 from webhook-guard), got %T: %v", err, err)
	}
	code := status.Status().Code
	msg := status.Status().Message
	if code != http.StatusForbidden {
		t.Fatalf("want HTTP 403, got %d: %s", code, msg)
	}
	// kube-apiserver wraps a webhook denial as `admission webhook "<name>" denied the request: <message>`.
	if !strings.Contains(msg, "admission webhook \"") || !strings.Contains(msg, "denied the request: webhook-guard denied") {
		t.Fatalf("the 403 is not webhook-guard's denial relayed by kube-apiserver: %s", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("the denial message lacks %q:\n%s", w, msg)
		}
	}
}

// requireUnchanged asserts the stored configuration still has resourceVersion rv and bundle in every entry.
func requireUnchanged(t testing.TB, c *framework.Client, kind framework.Kind, name, rv string, bundle []byte) {
	t.Helper()
	got := c.MustGet(t, kind, name)
	if got.ResourceVersion != rv {
		t.Errorf("%s %s: resourceVersion moved from %s to %s although every write was denied", kind, name, rv, got.ResourceVersion)
	}
	requireBundles(t, got, bundle)
}

// requireBundles asserts every webhooks[] entry holds bundle.
func requireBundles(t testing.TB, wc *framework.WebhookConfig, bundle []byte) {
	t.Helper()
	for i, b := range wc.Bundles {
		if !bytes.Equal(b, bundle) {
			t.Errorf("%s %s webhooks[%d].clientConfig.caBundle = %s; want %s", wc.Kind, wc.Name, i, describePEM(b), describePEM(bundle))
		}
	}
}

func describePEM(b []byte) string {
	if len(b) == 0 {
		return "(empty)"
	}
	return fmt.Sprintf("%d bytes %q...", len(b), string(b[:min(len(b), 40)]))
}

// requireWarning asserts one of warnings contains every want.
func requireWarning(t testing.TB, warnings []string, want ...string) {
	t.Helper()
next:
	for _, w := range warnings {
		for _, s := range want {
			if !strings.Contains(w, s) {
				continue next
			}
		}
		return
	}
	t.Errorf("no warning contains all of %q; the client received %d warning(s): %q", want, len(warnings), warnings)
}

// waitForRecord waits until the guard logged a record matching match.
func waitForRecord(t testing.TB, g *framework.Guard, what string, match func(framework.Record) bool) framework.Record {
	t.Helper()
	var found framework.Record
	framework.Eventually(t, 5*time.Second, "the guard records "+what, func() bool {
		for _, r := range g.Records() {
			if match(r) {
				found = r
				return true
			}
		}
		return false
	})
	return found
}
