package e2e

// Policy shape's syncer is a controller watching its generated objects: a
// generated policy or binding deleted, or edited by another field manager,
// is restored as soon as the guard's watch delivers the change, not at its
// next resync, and an edit is counted as a server-side apply conflict.

import (
	"context"
	"strings"
	"testing"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	"github.com/webhook-guard/webhook-guard/policy/vap"
	"github.com/webhook-guard/webhook-guard/webhook/policysync"
)

// maxRestore is how long a deleted generated object may stay away.
const maxRestore = time.Second

// waitEvent waits on w for an event that done accepts and returns the
// time it was received.
func waitEvent(t testing.TB, w watch.Interface, what string, done func(watch.Event) bool) time.Time {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch ended before %s", what)
			}
			if done(ev) {
				return time.Now()
			}
		case <-timeout:
			t.Fatalf("no %s within 20s", what)
		}
	}
}

// watchNamed watches the one object of list called name, from its current
// version on.
func watchNamed(t testing.TB, watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), name, rv string) watch.Interface {
	t.Helper()
	w, err := watchFn(t.Context(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// TestPolicySyncRestoresDeleted: break-glass deleting a generated policy
// (and a binding) finds it back within maxRestore, measured from the
// DELETE to kube-apiserver's watch delivering the guard's re-creation.
func TestPolicySyncRestoresDeleted(t *testing.T) {
	f := newFixture(t, policyOptions())
	waitPolicyActive(t, f)
	ctx := t.Context()
	adm := f.env.AdminKube.AdmissionregistrationV1()
	name := vap.PolicyName(enforcedMapping)
	for i := range 3 {
		p, err := adm.ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w := watchNamed(t, adm.ValidatingAdmissionPolicies().Watch, name, p.ResourceVersion)
		start := time.Now()
		if err := adm.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}}); err != nil {
			t.Fatal(err)
		}
		back := waitEvent(t, w, "re-created policy", func(ev watch.Event) bool {
			got, ok := ev.Object.(*admv1.ValidatingAdmissionPolicy)
			return ok && ev.Type == watch.Added && got.UID != p.UID
		})
		elapsed := back.Sub(start)
		t.Logf("deletion %d: ValidatingAdmissionPolicy %s was back after %s", i+1, name, elapsed.Round(100*time.Microsecond))
		if elapsed > maxRestore {
			t.Errorf("the deleted policy took %s to come back; want under %s (the syncer watches its objects)", elapsed, maxRestore)
		}
	}
	b, err := adm.ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := watchNamed(t, adm.ValidatingAdmissionPolicyBindings().Watch, name, b.ResourceVersion)
	start := time.Now()
	if err := adm.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	back := waitEvent(t, w, "re-created binding", func(ev watch.Event) bool {
		got, ok := ev.Object.(*admv1.ValidatingAdmissionPolicyBinding)
		return ok && ev.Type == watch.Added && got.UID != b.UID
	})
	elapsed := back.Sub(start)
	t.Logf("ValidatingAdmissionPolicyBinding %s was back after %s", name, elapsed.Round(100*time.Microsecond))
	if elapsed > maxRestore {
		t.Errorf("the deleted binding took %s to come back; want under %s", elapsed, maxRestore)
	}
	// And kube-apiserver enforces the mapping again.
	waitPolicyActive(t, f)
}

// TestPolicySyncConflictRestored: break-glass editing a generated policy
// under another field manager is a server-side apply conflict at the
// guard's next apply: restored, counted by mapping and object, and an
// Event names the other manager. A selector added to a generated binding
// (no field the guard owns, so no conflict, but it would narrow what the
// mapping decides) is removed and counted the same way.
func TestPolicySyncConflictRestored(t *testing.T) {
	f := newFixture(t, policyOptions())
	waitPolicyActive(t, f)
	ctx := t.Context()
	adm := f.env.AdminKube.AdmissionregistrationV1()
	name := vap.PolicyName(enforcedMapping)

	t.Run("a changed field the guard owns", func(t *testing.T) {
		p, err := adm.ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ignore := admv1.Ignore
		p.Spec.FailurePolicy = &ignore
		w := watchNamed(t, adm.ValidatingAdmissionPolicies().Watch, name, p.ResourceVersion)
		start := time.Now()
		edited, err := adm.ValidatingAdmissionPolicies().Update(ctx, p, metav1.UpdateOptions{FieldManager: "e2e-editor"})
		if err != nil {
			t.Fatal(err)
		}
		back := waitEvent(t, w, "restored failurePolicy", func(ev watch.Event) bool {
			got, ok := ev.Object.(*admv1.ValidatingAdmissionPolicy)
			return ok && got.ResourceVersion != edited.ResourceVersion && got.Spec.FailurePolicy != nil && *got.Spec.FailurePolicy == admv1.Fail
		})
		t.Logf("the edited policy %s was restored after %s", name, back.Sub(start).Round(100*time.Microsecond))
		if back.Sub(start) > maxRestore {
			t.Errorf("the edit took %s to be undone; want under %s", back.Sub(start), maxRestore)
		}
		requireFightCounted(t, f, "ValidatingAdmissionPolicy", name, "e2e-editor")
	})
	t.Run("a selector added to a binding", func(t *testing.T) {
		b, err := adm.ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b.Spec.MatchResources = &admv1.MatchResources{ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e/skip": "guard"}}}
		w := watchNamed(t, adm.ValidatingAdmissionPolicyBindings().Watch, name, b.ResourceVersion)
		start := time.Now()
		edited, err := adm.ValidatingAdmissionPolicyBindings().Update(ctx, b, metav1.UpdateOptions{FieldManager: "e2e-narrower"})
		if err != nil {
			t.Fatal(err)
		}
		back := waitEvent(t, w, "binding without the selector", func(ev watch.Event) bool {
			got, ok := ev.Object.(*admv1.ValidatingAdmissionPolicyBinding)
			return ok && got.ResourceVersion != edited.ResourceVersion && got.Spec.MatchResources == nil
		})
		t.Logf("the narrowed binding %s was restored after %s", name, back.Sub(start).Round(100*time.Microsecond))
		requireFightCounted(t, f, "ValidatingAdmissionPolicyBinding", name, "e2e-narrower")
	})
	waitPolicyActive(t, f)
}

// requireFightCounted waits for the guard's conflict counter of the
// object and for its Event naming manager.
func requireFightCounted(t *testing.T, f *fixture, kind, name, manager string) {
	t.Helper()
	labels := map[string]string{"mapping": enforcedMapping, "kind": kind, "name": name}
	framework.Eventually(t, 10*time.Second, "the guard counts the conflict", func() bool {
		return f.env.Guard.Metric(t, "webhook_guard_policy_apply_conflicts_total", labels) >= 1
	})
	var found string
	framework.Eventually(t, 10*time.Second, "a "+policysync.ReasonPolicyConflict+" Event naming "+manager, func() bool {
		for _, e := range eventsWithReason(t, f, policysync.ReasonPolicyConflict) {
			if strings.HasPrefix(e, kind+"/"+name+": ") && strings.Contains(e, `"`+manager+`"`) {
				found = e
				return true
			}
		}
		return false
	})
	t.Logf("the guard's Event: %s", found)
}
