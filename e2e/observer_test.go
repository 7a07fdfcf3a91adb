package e2e

// The observer on the real kube-apiserver, in the policy shape (no static
// manifest, audit mode): kube-apiserver never calls the guard, so every
// record of the storm below comes from the guard's watch of webhook
// configurations, and the users behind it from kube-apiserver's audit log.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
)

const (
	stormMapping = "storm"
	stormName    = "storm-webhooks"
	stormWriters = 8
)

// stormWriter is the service account of writer i; each writer is a writer
// of the storm mapping (so only its CA is wrong) with its own identity, CA
// and field manager.
func stormWriter(i int) string { return fmt.Sprintf("replica-%d", i) }

func stormOwner() guardapi.Owner {
	o := mapping(stormMapping, guardapi.ModeAudit, stormName, caFromSecret())
	for i := range stormWriters {
		o.Writers.ServiceAccounts = append(o.Writers.ServiceAccounts, appNamespace+"/"+stormWriter(i))
	}
	return o
}

// reviewJSON runs the real `webhook-guard review -o json` with args and
// returns its result and exit code.
func reviewJSON(t testing.TB, args ...string) (reviewResult, int) {
	t.Helper()
	cmd := exec.Command(framework.GuardBinary(t), append([]string{"review", "-o", "json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("webhook-guard review: %v", err)
	}
	var res reviewResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("webhook-guard review %s (exit %d) printed no JSON result: %v\n%s\n%s", strings.Join(args, " "), code, err, out, stderr.String())
	}
	return res, code
}

// reviewFinding is the part of a review finding the tests read.
type reviewFinding struct {
	Mapping       string `json:"mapping"`
	Subject       string `json:"subject"`
	Rule          string `json:"rule"`
	Decision      string `json:"decision"`
	Writers       string `json:"writers"`
	FoundCA       string `json:"foundCA"`
	Origin        string `json:"origin"`
	FieldManagers string `json:"fieldManagers"`
	Count         int    `json:"count"`
}

// reviewResult is the part of review's JSON the tests read.
type reviewResult struct {
	Findings  []reviewFinding `json:"findings"`
	WouldDeny int             `json:"wouldDeny"`
	AuditLog  *struct {
		Events    int `json:"events"`
		Decisions int `json:"decisions"`
		Malformed int `json:"malformed"`
	} `json:"auditLog"`
}

// TestObserverStormShowsInReview: 8 writers, each with its own CA, fight
// over one audited configuration in the policy shape. `webhook-guard
// review` shows the observed ca-mismatch of every writer's field manager
// and the flapping, and exits 1; `review --audit-log` names the writers'
// service accounts from kube-apiserver's audit log.
func TestObserverStormShowsInReview(t *testing.T) {
	t.Parallel()
	opts := policyOptions("--records-flush-interval", "1s")
	opts.Config = guardConfig(stormOwner())
	opts.AuditLog, opts.ReportCRDs = true, true
	f := newFixture(t, opts)
	waitPolicyActive(t, f)
	ctx := t.Context()
	f.create(t, framework.Validating, stormName, f.ownerCA.PEM)

	writers := make([]*framework.Client, stormWriters)
	cas := make([]*framework.CA, stormWriters)
	for i := range stormWriters {
		writers[i] = f.env.ServiceAccount(t, appNamespace, stormWriter(i))
		cas[i] = framework.NewCA(t, stormWriter(i)+"-ca")
	}
	// The storm's policy is in force once a writer's foreign CA is warned about.
	framework.Eventually(t, 20*time.Second, "kube-apiserver audits the storm mapping's policy", func() bool {
		writers[0].Warnings.Take()
		_, err := writers[0].Mutate(ctx, framework.Validating, stormName, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}, setAll(cas[0].PEM))
		return err == nil && len(framework.Containing(writers[0].Warnings.Take(), "would deny")) > 0
	})

	leader := f.env.Guard
	cpuBefore := leader.Metric(t, "process_cpu_seconds_total", nil)
	eventsBefore := leader.Metric(t, "webhook_guard_observer_events_total", nil)
	const storm = 10 * time.Second
	stormCtx, cancel := context.WithTimeout(ctx, storm)
	defer cancel()
	var ok, conflicts atomic.Int64
	var other sync.Map
	var wg sync.WaitGroup
	for i := range stormWriters {
		wg.Go(func() {
			for stormCtx.Err() == nil {
				_, err := writers[i].Mutate(stormCtx, framework.Validating, stormName, metav1.UpdateOptions{FieldManager: stormWriter(i)}, setAll(cas[i].PEM))
				switch {
				case err == nil:
					ok.Add(1)
				case apierrors.IsConflict(err):
					conflicts.Add(1)
				case stormCtx.Err() != nil, strings.Contains(err.Error(), "would exceed context deadline"):
					return
				default:
					other.LoadOrStore(i, err.Error())
				}
			}
		})
	}
	wg.Wait()
	other.Range(func(k, v any) bool {
		t.Errorf("writer %v failed with something other than a conflict: %v", k, v)
		return true
	})
	if ok.Load() < stormWriters {
		t.Fatalf("only %d writes went through in audit mode; want the storm to go through", ok.Load())
	}

	// A write that changes something is one watch event (a writer
	// re-writing its own CA changes nothing: no new resourceVersion, no
	// event). The storm's cost to the guard is the leader's CPU over the
	// events it handled, once it has caught up.
	framework.Eventually(t, 20*time.Second, "the observer catches up with the storm", func() bool {
		n := leader.Metric(t, "webhook_guard_observer_events_total", nil)
		time.Sleep(time.Second)
		return n > eventsBefore && leader.Metric(t, "webhook_guard_observer_events_total", nil) == n
	})
	events := leader.Metric(t, "webhook_guard_observer_events_total", nil) - eventsBefore
	cpu := leader.Metric(t, "process_cpu_seconds_total", nil) - cpuBefore
	m := leader.Metrics(t)
	t.Logf("storm: %d writes in %s (%.0f/s), %d conflicts; observer: %g watch events, leader CPU %.3f s (%.0f µs per observed change), resident memory %.1f MiB, Go heap in use %.1f MiB",
		ok.Load(), storm, float64(ok.Load())/storm.Seconds(), conflicts.Load(), events, cpu, cpu/events*1e6,
		m.Sum("process_resident_memory_bytes", nil)/(1<<20), m.Sum("go_memstats_heap_inuse_bytes", nil)/(1<<20))
	if flaps := m.Sum("webhook_guard_observed_flapping_total", map[string]string{"mapping": stormMapping}); flaps < 1 {
		t.Errorf("webhook_guard_observed_flapping_total{mapping=storm} = %g; want >= 1\n%s", flaps, m.Series("webhook_guard_observed_flapping_total"))
	}

	kubeconfig := f.env.Kubeconfig(t, envtest.User{Name: "e2e-reviewer", Groups: []string{"system:masters"}})
	managerNames := make([]string, stormWriters)
	users := make([]string, stormWriters)
	for i := range stormWriters {
		managerNames[i] = stormWriter(i)
		users[i] = guardapi.ServiceAccountUsername(appNamespace + "/" + stormWriter(i))
	}
	// subjectsOf lists the distinct subjects of the findings that match.
	subjectsOf := func(res reviewResult, match func(reviewFinding) bool) []string {
		var out []string
		for _, fd := range res.Findings {
			if match(fd) && !slices.Contains(out, fd.Subject) {
				out = append(out, fd.Subject)
			}
		}
		slices.Sort(out)
		return out
	}

	t.Run("review shows the observed ca-mismatch of every writer's field manager and the flapping, and exits 1", func(t *testing.T) {
		var res reviewResult
		var code int
		want := make([]string, stormWriters)
		for i, n := range managerNames {
			want[i] = policy.ObservedSubjectPrefix + n
		}
		slices.Sort(want)
		var got []string
		var flapping []reviewFinding
		framework.Eventually(t, 15*time.Second, "the observed findings reach the ClusterReport", func() bool {
			res, code = reviewJSON(t, "--kubeconfig", kubeconfig, "--mapping", stormMapping)
			got = subjectsOf(res, func(fd reviewFinding) bool {
				return fd.Origin == "observed" && fd.Rule == "ca-mismatch" && fd.Decision == "audit" && fd.FoundCA != ""
			})
			flapping = slices.DeleteFunc(slices.Clone(res.Findings), func(fd reviewFinding) bool { return fd.Rule != "flapping" || fd.Origin != "observed" })
			return slices.Equal(got, want) && len(flapping) > 0
		})
		if !slices.Equal(got, want) {
			t.Errorf("observed ca-mismatch findings name the field managers %q; want every writer's %q", got, want)
		}
		if len(flapping) == 0 {
			t.Errorf("review shows no observed flapping finding: %+v", res.Findings)
		} else if ws := strings.Split(flapping[0].Writers, ","); len(ws) < 2 {
			t.Errorf("the flapping finding names writers %q; want the field managers that fought", flapping[0].Writers)
		}
		for _, fd := range res.Findings {
			if fd.Origin == "observed" && fd.Rule == "ca-mismatch" && !strings.Contains(fd.FieldManagers, "(Update ") {
				t.Errorf("observed finding of %s lacks the field manager's operation and time: %q", fd.Subject, fd.FieldManagers)
			}
		}
		if code != 1 {
			t.Errorf("review exited %d; want 1 (something would be denied)", code)
		}
	})

	t.Run("review --audit-log names the writers' service accounts", func(t *testing.T) {
		var res reviewResult
		var code int
		var got []string
		want := slices.Sorted(slices.Values(users))
		framework.Eventually(t, 10*time.Second, "the audit log holds every writer's audited write", func() bool {
			res, code = reviewJSON(t, "--kubeconfig", kubeconfig, "--mapping", stormMapping, "--audit-log", f.env.AuditLogPath(t))
			got = subjectsOf(res, func(fd reviewFinding) bool {
				return fd.Origin == "audit-log" && fd.Rule == "ca-mismatch" && fd.Decision == "audit"
			})
			return slices.Equal(got, want)
		})
		if !slices.Equal(got, want) {
			t.Errorf("audit-log findings name %q; want every writer %q", got, want)
		}
		if res.AuditLog == nil || res.AuditLog.Decisions < stormWriters || res.AuditLog.Malformed != 0 {
			t.Errorf("audit log summary %+v; want >= %d decisions and no malformed line", res.AuditLog, stormWriters)
		}
		if code != 1 {
			t.Errorf("review --audit-log exited %d; want 1", code)
		}
	})
}

// setAll writes bundle into every webhooks[] entry.
func setAll(bundle []byte) func(*metav1.ObjectMeta, [][]byte) {
	return func(_ *metav1.ObjectMeta, bundles [][]byte) {
		for i := range bundles {
			bundles[i] = bundle
		}
	}
}

// TestObserverQuietThreeReplicasWriteNothing: three leader-elected replicas
// in the policy shape, nothing changing for 60 s: no replica writes
// anything but the leader's Lease renewals (client-go's own request
// metrics, by verb), and the observer handles no event. One observed change
// before the quiet period shows the observer was running.
func TestObserverQuietThreeReplicasWriteNothing(t *testing.T) {
	t.Parallel()
	opts := policyOptions("--leader-elect", "--leader-election-namespace", framework.GuardNamespace, "--records-flush-interval", "1s")
	opts.ReportCRDs = true
	f := newFixture(t, opts)
	replicas := []*framework.Guard{f.env.Guard, f.env.StartReplica(t), f.env.StartReplica(t)}
	waitPolicyActive(t, f)

	leader := -1
	framework.Eventually(t, 30*time.Second, "one replica leads and observes", func() bool {
		for i, g := range replicas {
			if strings.Contains(g.Log.String(), `"observing webhook configurations"`) {
				leader = i
			}
		}
		return leader >= 0
	})
	// One change the observer must see: the owner writes a foreign CA to
	// the audited configuration.
	foreign := framework.NewCA(t, "foreign-ca")
	if _, err := f.owner.SetCABundle(t.Context(), framework.Validating, auditedName, foreign.PEM); err != nil {
		t.Fatalf("audit mode refused the owner's foreign CA: %v", err)
	}
	framework.Eventually(t, 10*time.Second, "the leader observes the change and flushes its record", func() bool {
		return replicas[leader].Metric(t, "webhook_guard_observed_changes_total", map[string]string{"mapping": auditedMapping, "rule": "ca-mismatch"}) == 1 &&
			replicas[leader].Metric(t, "webhook_guard_report_writes_total", nil) >= 1
	})
	// Settled: the policy objects converged and no record is pending.
	framework.Eventually(t, 20*time.Second, "the replicas settle (two policy passes and 3 s without a write)", func() bool {
		before, reports, syncs := totalWrites(t, replicas), replicas[leader].Metric(t, "webhook_guard_report_writes_total", nil), totalSyncs(t, replicas)
		time.Sleep(3 * time.Second)
		return totalSyncs(t, replicas) >= syncs+2 && totalWrites(t, replicas) == before && replicas[leader].Metric(t, "webhook_guard_report_writes_total", nil) == reports
	})

	type snapshot map[string]float64
	take := func(g *framework.Guard) snapshot {
		m := g.Metrics(t)
		s := snapshot{}
		for _, verb := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			s[verb] = m.Sum("rest_client_requests_total", map[string]string{"method": verb})
		}
		for _, name := range []string{"webhook_guard_observer_events_total", "webhook_guard_observed_changes_total", "webhook_guard_report_writes_total", "webhook_guard_events_total", "webhook_guard_policy_writes_total"} {
			s[name] = m.Sum(name, nil)
		}
		return s
	}
	before := make([]snapshot, len(replicas))
	for i, g := range replicas {
		before[i] = take(g)
	}
	const quiet = 60 * time.Second
	time.Sleep(quiet)
	for i, g := range replicas {
		after := take(g)
		delta := func(k string) float64 { return after[k] - before[i][k] }
		for _, k := range []string{"POST", "PATCH", "DELETE", "webhook_guard_observer_events_total", "webhook_guard_observed_changes_total",
			"webhook_guard_report_writes_total", "webhook_guard_events_total", "webhook_guard_policy_writes_total"} {
			if d := delta(k); d != 0 {
				t.Errorf("replica %d (leader %v): %s rose by %g during %s without any change", i, i == leader, k, d, quiet)
			}
		}
		// The leader renews its Lease every 2 s (controller-runtime's
		// retry period); that is the only PUT anyone makes.
		maxPUT := 0.0
		if i == leader {
			maxPUT = quiet.Seconds()/2 + 2
		}
		if d := delta("PUT"); d > maxPUT {
			t.Errorf("replica %d (leader %v) made %g PUTs in %s; want at most %g (Lease renewals)", i, i == leader, d, quiet, maxPUT)
		}
		t.Logf("replica %d (leader %v), %s quiet: GET +%g, PUT +%g, POST +%g, PATCH +%g, DELETE +%g", i, i == leader, quiet,
			delta("GET"), delta("PUT"), delta("POST"), delta("PATCH"), delta("DELETE"))
	}
}

// TestObserverStaticShapeSeesBreakGlass: in the static shape a break-glass
// subject's foreign CA is allowed (break-glass always is); the observer
// records the change as observed, beside admission's break-glass record,
// each marked for what it is.
func TestObserverStaticShapeSeesBreakGlass(t *testing.T) {
	t.Parallel()
	f := newFixture(t, framework.Options{ReportCRDs: true, GuardArgs: []string{"--records-flush-interval", "1s"}})
	f.create(t, framework.Validating, enforcedName, f.ownerCA.PEM)
	foreign := framework.NewCA(t, "break-glass-foreign-ca")
	if _, err := f.admin.Mutate(t.Context(), framework.Validating, enforcedName, metav1.UpdateOptions{FieldManager: "hand-edit"}, setAll(foreign.PEM)); err != nil {
		t.Fatalf("the break-glass admin's write was refused: %v", err)
	}
	g := f.env.Guard
	framework.Eventually(t, 10*time.Second, "the observer records the change", func() bool {
		return g.Metric(t, "webhook_guard_observed_changes_total", map[string]string{"mapping": enforcedMapping, "rule": "ca-mismatch", "decision": "deny"}) == 1
	})
	assertWebhookHealth(t, g, enforcedName, enforcedMapping, foreign)
	kubeconfig := f.env.Kubeconfig(t, envtest.User{Name: "e2e-reviewer", Groups: []string{"system:masters"}})
	var res reviewResult
	framework.Eventually(t, 15*time.Second, "review shows the observed change beside admission's break-glass record", func() bool {
		res, _ = reviewJSON(t, "--kubeconfig", kubeconfig, "--mapping", enforcedMapping)
		observed := slices.ContainsFunc(res.Findings, func(fd reviewFinding) bool {
			return fd.Origin == "observed" && fd.Rule == "ca-mismatch" && fd.Subject == policy.ObservedSubjectPrefix+"hand-edit"
		})
		decided := slices.ContainsFunc(res.Findings, func(fd reviewFinding) bool {
			return fd.Origin == "" && fd.Decision == "break-glass"
		})
		return observed && decided
	})
}

// assertWebhookHealth: the guard's health series describe every entry of
// the validating configuration name, owned by mapping, with ca's
// fingerprint and expiry (the bundle holds ca alone).
func assertWebhookHealth(t *testing.T, g *framework.Guard, name, mapping string, ca *framework.CA) {
	t.Helper()
	fps, err := cabundle.Parse(ca.PEM)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"kind": string(policy.KindValidating), "configuration": name, "mapping": mapping, "ca_fingerprint": fps[0].Short()}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		m := g.Metrics(t)
		if describes(m, name, want, float64(ca.Cert.NotAfter.Unix())) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the health series do not describe %s with %v and expiry %s:\n%s%s", name, want, ca.Cert.NotAfter,
				m.Series("webhook_guard_webhook_info"), m.Series("webhook_guard_webhook_cabundle_expiry_timestamp_seconds"))
		}
	}
}

// describes: m has an info series with the labels want and an expiry
// series of value expiry for each entry of configuration name, and no
// other.
func describes(m framework.Metrics, name string, want map[string]string, expiry float64) bool {
	info, expiries := 0, 0
	for _, s := range m {
		if s.Labels["configuration"] != name {
			continue
		}
		switch s.Name {
		case "webhook_guard_webhook_info":
			for k, v := range want {
				if s.Labels[k] != v {
					return false
				}
			}
			info++
		case "webhook_guard_webhook_cabundle_expiry_timestamp_seconds":
			if s.Value != expiry {
				return false
			}
			expiries++
		}
	}
	return info > 0 && info == expiries
}
