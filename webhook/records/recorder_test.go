package records

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	admv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/flapping"
)

const cfgName = "koord-validating-webhook-configuration"

var t0 = time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := reportsv1alpha1.Install(s); err != nil {
		t.Fatal(err)
	}
	if err := admv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// cfgUID is the uid of the guarded configuration newFakeClient holds.
const cfgUID = "0d6f5a1c-0000-4000-8000-000000000001"

// newFakeClient holds the guarded configuration, so that its report is
// owned by it.
func newFakeClient(t *testing.T) client.WithWatch {
	t.Helper()
	vwc := &admv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: cfgName, UID: cfgUID}}
	return fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(vwc).Build()
}

func auditDecision(subject, found string) *policy.Decision {
	return &policy.Decision{
		Operation: policy.OperationUpdate, Kind: policy.KindValidating, Name: cfgName, Subject: subject,
		Mapping: "koordinator", Mode: guardapi.ModeAudit, Outcome: policy.OutcomeAudit, Rule: policy.RuleCAMismatch, Record: true,
		Violations: []policy.Violation{{
			Rule: policy.RuleCAMismatch, Field: "webhooks[0].clientConfig.caBundle", Webhook: "w0.koordinator.sh",
			Detail: "the caBundle holds a certificate outside the owner's CA", Expected: []string{"aaaaaaaaaaaaaaaa"}, Found: []string{found},
		}},
	}
}

func newRecorder(c client.Client, now func() time.Time, ev EventRecorder) *Recorder {
	return New(Options{Client: c, Events: ev, Metrics: NewMetrics(prometheus.NewRegistry()), Log: logr.Discard(), Now: now, MaxResults: 4})
}

func getReport(t *testing.T, c client.Client) *reportsv1alpha1.ClusterReport {
	t.Helper()
	var rep reportsv1alpha1.ClusterReport
	if err := c.Get(t.Context(), types.NamespacedName{Name: ReportName(policy.KindValidating, cfgName)}, &rep); err != nil {
		t.Fatalf("get the report: %v", err)
	}
	return &rep
}

func counts(rep *reportsv1alpha1.ClusterReport) map[string]string {
	out := map[string]string{}
	for _, r := range rep.Results {
		out[r.Rule+"/"+r.Properties[PropSubject]+"/"+r.Properties[PropFound]] = r.Properties[PropCount]
	}
	return out
}

func Test_Recorder(t *testing.T) {
	t.Run("if one replica records a storm, write one report with the exact counts and one event per reason", func(t *testing.T) {
		c := newFakeClient(t)
		ev := events.NewFakeRecorder(10)
		r := newRecorder(c, func() time.Time { return t0 }, ev)
		for i := range 60 {
			r.RecordDecision(t.Context(), auditDecision("system:serviceaccount:koord:manager", fmt.Sprintf("%016x", i%3)))
		}
		r.RecordFlapping(t.Context(), "koordinator", flapping.Report{Kind: policy.KindValidating, Name: cfgName, DistinctBundles: 3, Window: time.Minute, Writers: []string{"system:serviceaccount:koord:manager"}})
		r.Flush(t.Context())

		rep := getReport(t, c)
		want := map[string]string{
			"ca-mismatch/system:serviceaccount:koord:manager/0000000000000000": "20",
			"ca-mismatch/system:serviceaccount:koord:manager/0000000000000001": "20",
			"ca-mismatch/system:serviceaccount:koord:manager/0000000000000002": "20",
			"flapping//": "1",
		}
		if got := counts(rep); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("counts = %v; want %v", got, want)
		}
		if rep.Source != Source || rep.Scope == nil || rep.Scope.Name != cfgName || rep.Scope.Kind != string(policy.KindValidating) {
			t.Errorf("source/scope = %q %+v", rep.Source, rep.Scope)
		}
		if rep.Summary.Warn != 4 {
			t.Errorf("summary = %+v; want 4 warn", rep.Summary)
		}
		r0 := rep.Results[0]
		if r0.Result != "warn" || r0.Properties[PropMode] != "audit" || r0.Properties[PropExpected] != "aaaaaaaaaaaaaaaa" ||
			r0.Properties[PropFirstSeen] != "2026-11-30T05:00:00Z" || r0.Properties[PropWebhook] != "w0.koordinator.sh" {
			t.Errorf("first result = %+v", r0)
		}
		if got := len(ev.Events); got != 2 {
			t.Errorf("%d events; want 2 (WouldDeny, CABundleFlapping)", got)
		}
		for range len(ev.Events) {
			e := <-ev.Events
			if !strings.Contains(e, "WouldDeny") && !strings.Contains(e, "CABundleFlapping") {
				t.Errorf("unexpected event %q", e)
			}
		}
		r.Flush(t.Context())
		if len(ev.Events) != 0 {
			t.Errorf("an empty flush emitted events")
		}
	})

	t.Run("if two replicas flush concurrently, keep both replicas' increments", func(t *testing.T) {
		base := newFakeClient(t)
		var b *Recorder
		var updates, conflicts int
		var mu sync.Mutex
		// Replica b's whole flush lands between replica a's read and its
		// write, every round: a's first write must conflict and be retried
		// on a fresh read.
		c := interceptor.NewClient(base, interceptor.Funcs{
			Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				mu.Lock()
				updates++
				race := updates%2 == 1
				mu.Unlock()
				if race {
					b.Flush(ctx)
				}
				err := cl.Update(ctx, obj, opts...)
				if apierrors.IsConflict(err) {
					mu.Lock()
					conflicts++
					mu.Unlock()
				}
				return err
			},
		})
		a := newRecorder(c, func() time.Time { return t0 }, nil)
		b = newRecorder(base, func() time.Time { return t0.Add(time.Minute) }, nil)
		for range 3 {
			for range 7 {
				a.RecordDecision(t.Context(), auditDecision("system:serviceaccount:koord:manager", "1111111111111111"))
			}
			for range 5 {
				b.RecordDecision(t.Context(), auditDecision("system:serviceaccount:koord:manager", "1111111111111111"))
			}
			a.Flush(t.Context())
		}
		rep := getReport(t, c)
		if got := counts(rep)["ca-mismatch/system:serviceaccount:koord:manager/1111111111111111"]; got != "36" {
			t.Errorf("count = %s; want 36 (3 x (7+5))", got)
		}
		if conflicts == 0 {
			t.Errorf("no write conflicted: the test did not race the replicas")
		}
		p := rep.Results[0].Properties
		if p[PropFirstSeen] != "2026-11-30T05:00:00Z" || p[PropLastSeen] != "2026-11-30T05:01:00Z" {
			t.Errorf("firstSeen/lastSeen = %s/%s; want the earliest and latest of both replicas", p[PropFirstSeen], p[PropLastSeen])
		}
	})

	t.Run("if the guard restarts, add to the stored counts", func(t *testing.T) {
		c := newFakeClient(t)
		first := newRecorder(c, func() time.Time { return t0 }, nil)
		first.RecordDecision(t.Context(), auditDecision("u", "1111111111111111"))
		first.Flush(t.Context())
		second := newRecorder(c, func() time.Time { return t0.Add(time.Hour) }, nil)
		second.RecordDecision(t.Context(), auditDecision("u", "1111111111111111"))
		second.Flush(t.Context())
		if got := counts(getReport(t, c))["ca-mismatch/u/1111111111111111"]; got != "2" {
			t.Errorf("count = %s; want 2", got)
		}
	})

	t.Run("if results exceed the bound, drop the oldest and count them", func(t *testing.T) {
		c := newFakeClient(t)
		now := t0
		r := newRecorder(c, func() time.Time { return now }, nil)
		for i := range 6 {
			now = t0.Add(time.Duration(i) * time.Minute)
			r.RecordDecision(t.Context(), auditDecision(fmt.Sprintf("user-%d", i), "1111111111111111"))
			r.Flush(t.Context())
		}
		rep := getReport(t, c)
		if len(rep.Results) != 4 || rep.Annotations[AnnotationDroppedResults] != "2" {
			t.Fatalf("%d results, dropped %q; want 4 and 2", len(rep.Results), rep.Annotations[AnnotationDroppedResults])
		}
		if _, ok := counts(rep)["ca-mismatch/user-0/1111111111111111"]; ok {
			t.Errorf("the oldest result was kept: %v", counts(rep))
		}
	})

	t.Run("if the write fails, keep the records for the next flush", func(t *testing.T) {
		base := newFakeClient(t)
		fail := true
		c := interceptor.NewClient(base, interceptor.Funcs{
			Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if fail {
					return fmt.Errorf("connection refused")
				}
				return cl.Create(ctx, obj, opts...)
			},
		})
		r := newRecorder(c, func() time.Time { return t0 }, nil)
		r.RecordDecision(t.Context(), auditDecision("u", "1111111111111111"))
		r.Flush(t.Context())
		fail = false
		r.RecordDecision(t.Context(), auditDecision("u", "1111111111111111"))
		r.Flush(t.Context())
		if got := counts(getReport(t, c))["ca-mismatch/u/1111111111111111"]; got != "2" {
			t.Errorf("count = %s; want 2", got)
		}
	})

	t.Run("if the decision is a dry run, record nothing", func(t *testing.T) {
		c := newFakeClient(t)
		r := newRecorder(c, func() time.Time { return t0 }, nil)
		d := auditDecision("u", "1111111111111111")
		d.DryRun = true
		r.RecordDecision(t.Context(), d)
		r.Flush(t.Context())
		var list reportsv1alpha1.ClusterReportList
		if err := c.List(t.Context(), &list); err != nil || len(list.Items) != 0 {
			t.Errorf("%d reports (%v); want none", len(list.Items), err)
		}
	})
}

// Test_Recorder_policyObjects: a denied write to one of the policy shape's
// generated objects is recorded like any denial, in a report owned by that
// object, under the policy-objects category, with an Event about it.
func Test_Recorder_policyObjects(t *testing.T) {
	const name = "webhook-guard-koordinator"
	binding := &admv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name, UID: cfgUID}}
	c := fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(binding).Build()
	ev := events.NewFakeRecorder(10)
	r := newRecorder(c, func() time.Time { return t0 }, ev)
	cfg, err := policy.Load([]byte("apiVersion: webhook-guard.io/v1alpha1\nkind: GuardConfig\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.DecideAdmissionPolicyObject(&policy.AdmissionPolicyObjectInput{
		Operation: policy.OperationDelete, Kind: policy.KindAdmissionPolicyBinding, Name: name,
		User: policy.User{Username: "intruder"}, Generated: true, Writer: "system:serviceaccount:webhook-guard:webhook-guard",
	})
	r.RecordDecision(t.Context(), &d)
	r.Flush(t.Context())

	var rep reportsv1alpha1.ClusterReport
	if err := c.Get(t.Context(), types.NamespacedName{Name: "webhook-guard.vapb." + name}, &rep); err != nil {
		t.Fatalf("get the binding's report: %v", err)
	}
	if len(rep.OwnerReferences) != 1 || rep.OwnerReferences[0].Kind != string(policy.KindAdmissionPolicyBinding) || rep.OwnerReferences[0].UID != cfgUID {
		t.Errorf("owner references = %+v; want the binding", rep.OwnerReferences)
	}
	if rep.Labels[LabelKind] != "validatingadmissionpolicybinding" {
		t.Errorf("kind label = %q", rep.Labels[LabelKind])
	}
	if len(rep.Results) != 1 {
		t.Fatalf("results = %+v; want one", rep.Results)
	}
	res := rep.Results[0]
	if res.Policy != PolicyGeneratedObjects || res.Rule != string(policy.RuleAdmissionPolicyObject) || res.Result != "fail" ||
		res.Category != "Policy objects" || res.Properties[PropSubject] != "intruder" {
		t.Errorf("result = %+v", res)
	}
	if len(ev.Events) != 1 {
		t.Fatalf("%d events; want 1 (Denied)", len(ev.Events))
	}
	if e := <-ev.Events; !strings.Contains(e, "Denied") || !strings.Contains(e, "policy-object by intruder x1") {
		t.Errorf("event = %q", e)
	}
}

func Test_ReportName(t *testing.T) {
	if got := ReportName(policy.KindAdmissionPolicy, "x"); got != "webhook-guard.vap.x" {
		t.Errorf("ReportName(vap) = %q", got)
	}
	if got := ReportName(policy.KindMutating, "x"); got != "webhook-guard.mwc.x" {
		t.Errorf("got %q", got)
	}
	long := ReportName(policy.KindValidating, strings.Repeat("a", 253))
	if len(long) != 253 {
		t.Errorf("len = %d; want 253", len(long))
	}
}

func Test_resultOf(t *testing.T) {
	tests := map[string]struct {
		key resultKey
		exp string
	}{
		"if enforce denied, fail":                 {key: resultKey{Rule: "not-owner", Decision: "deny"}, exp: "fail"},
		"if audit would deny, warn":               {key: resultKey{Rule: "ca-mismatch", Decision: "audit"}, exp: "warn"},
		"if flapping, warn":                       {key: resultKey{Rule: RuleFlapping, Decision: DecisionFlapping}, exp: "warn"},
		"if break-glass, pass":                    {key: resultKey{Rule: "break-glass", Decision: "break-glass"}, exp: "pass"},
		"if an unmanaged write was audited, skip": {key: resultKey{Rule: "unmanaged", Decision: "audit"}, exp: "skip"},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			if got := string(resultOf(test.key)); got != test.exp {
				t.Errorf("got %q; want %q", got, test.exp)
			}
		})
	}
}
