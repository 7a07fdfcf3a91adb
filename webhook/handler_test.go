package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/policy/flapping"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

// fakeResolver answers live=false with Cached and live=true with Live, and
// counts the calls.
type fakeResolver struct {
	Cached, Live casource.Result

	mu        sync.Mutex
	calls     int
	liveCalls int
	requests  []casource.Request
}

func (r *fakeResolver) Resolve(_ context.Context, req casource.Request, live bool) casource.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	r.requests = append(r.requests, req)
	if live {
		r.liveCalls++
		return r.Live
	}
	return r.Cached
}

// fakeRecorder keeps what it is asked to record.
type fakeRecorder struct {
	mu        sync.Mutex
	decisions []policy.Decision
	flaps     []recordedFlap
}

type recordedFlap struct {
	Mapping string
	Report  flapping.Report
}

func (r *fakeRecorder) RecordDecision(_ context.Context, d *policy.Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decisions = append(r.decisions, *d)
}

func (r *fakeRecorder) RecordFlapping(_ context.Context, mapping string, report flapping.Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flaps = append(r.flaps, recordedFlap{Mapping: mapping, Report: report})
}

// recorded lists the recorded decisions as "mapping/rule/outcome".
func (r *fakeRecorder) recorded() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, d := range r.decisions {
		out = append(out, fmt.Sprintf("%s/%s/%s", d.Mapping, d.Rule, d.Outcome))
	}
	return out
}

// Sources as the resolver names them.
const (
	koordSource   = "Secret koordinator-system/webhook-certs (key ca.crt)"
	auditedSource = "Secret audited-system/ca (key ca.crt)"
)

// caResult is a resolver answer holding the given CAs.
func caResult(tb testing.TB, source string, cached bool, pems ...[]byte) casource.Result {
	tb.Helper()
	set, err := cabundle.NewCASet(source, slices.Concat(pems...))
	require.NoError(tb, err)
	return casource.Result{CAResult: policy.CAResult{Resolved: true, Set: set}, Cached: cached, Source: source}
}

// denied is the response to an enforced denial.
func denied(message string, annotations map[string]string) admissionv1.AdmissionResponse {
	return admissionv1.AdmissionResponse{
		Allowed:          false,
		AuditAnnotations: annotations,
		Result:           &metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden, Code: 403, Message: message},
	}
}

// allowed is the response to an allowed request.
func allowed(warnings []string, annotations map[string]string) admissionv1.AdmissionResponse {
	return admissionv1.AdmissionResponse{Allowed: true, Warnings: warnings, AuditAnnotations: annotations, Result: &metav1.Status{Code: 200}}
}

// Violation texts, spelled out once.
const (
	intruderNotOwnerKoord   = `not-owner: userInfo: "system:serviceaccount:intruder-system:intruder" is not a writer; hint: if it should own this configuration, add intruder-system/intruder to owners[koordinator].writers.serviceAccounts`
	intruderNotOwnerAudited = `not-owner: userInfo: "system:serviceaccount:intruder-system:intruder" is not a writer; hint: if it should own this configuration, add intruder-system/intruder to owners[audited].writers.serviceAccounts`
)

func caMismatch(webhook, source, expected, found string) string {
	return fmt.Sprintf(`ca-mismatch: webhooks[0].clientConfig.caBundle (webhook %q): 1 certificate(s) neither in the owner's CA set from %s nor already in this entry's stored caBundle [expected CA %s, found %s]; hint: write the owner's CA (a rotation may keep the certificates the entry already holds); if the owner's CA changed, update its source first`,
		webhook, source, expected, found)
}

func Test_Handler_Review(t *testing.T) {
	f := testFixtures(t)
	cfg := mustLoad(t, guardConfigDoc(f))

	koord := object{Name: "koord", Labels: map[string]string{"app": "koord"}, Bundles: [][]byte{f.Owner.PEM}}
	koordRelabelled := object{Name: "koord", Labels: map[string]string{"app": "koord-2"}, Bundles: [][]byte{f.Owner.PEM}}
	koordEmpty := object{Name: "koord", Bundles: [][]byte{nil}}
	koordForeign := object{Name: "koord", Bundles: [][]byte{f.Foreign.PEM}}
	koordRotating := object{Name: "koord", Bundles: [][]byte{slices.Concat(f.Owner.PEM, f.OwnerNew.PEM)}}
	audited := object{Name: "audited", Bundles: [][]byte{f.Owner.PEM}}
	auditedRelabelled := object{Name: "audited", Labels: map[string]string{"x": "y"}, Bundles: [][]byte{f.Owner.PEM}}
	auditedForeign := object{Name: "audited", Bundles: [][]byte{f.Foreign.PEM}}
	teamA := object{Name: "team-a-hooks", Labels: map[string]string{"team": "a"}, Bundles: [][]byte{f.Owner.PEM}}
	teamAEscaped := object{Name: "team-a-hooks", Labels: map[string]string{"team": "b"}, Bundles: [][]byte{f.Owner.PEM}}
	unmanaged := object{Name: "someone-else", Bundles: [][]byte{f.Foreign.PEM}}

	sourceErr := &casource.SourceError{Source: koordSource, Reason: "it does not exist", Definitive: true}

	koordDenial := func(op string, kind policy.GuardedKind, violations ...string) string {
		msg := fmt.Sprintf(`webhook-guard denied %s of %s "koord" by %q (mapping "koordinator", enforce)`, op, kind, intruder)
		for _, v := range violations {
			msg += "; " + v
		}
		return msg
	}

	tests := map[string]struct {
		req      func(t *testing.T) *admissionv1.AdmissionRequest
		resolver *fakeResolver
		expResp  admissionv1.AdmissionResponse
		// expDecision is the decisions_total series counted, as
		// "mapping/rule/decision"; empty for a malformed review.
		expDecision string
		expRecords  []string
		expCalls    int
		expLive     int
		// expRereads are the ca_live_rereads_total values by outcome.
		expRereads map[string]float64
		// expSourceErrors is ca_source_errors_total for the request's mapping.
		expSourceErrors float64
		expInvalid      float64
	}{
		"if the owner writes its own CA, allow without warnings, annotations or records": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Update, policy.KindValidating, koordManager, &koord, &koordEmpty)
			},
			resolver:    &fakeResolver{Cached: caResult(t, koordSource, true, f.Owner.PEM)},
			expResp:     allowed(nil, nil),
			expDecision: "koordinator/none/allow",
			expCalls:    1,
		},
		"if the owner writes its own CA to a MutatingWebhookConfiguration, allow": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Create, policy.KindMutating, koordManager, &koordRotating, nil)
			},
			resolver:    &fakeResolver{Cached: caResult(t, koordSource, false, f.Owner.PEM, f.OwnerNew.PEM)},
			expResp:     allowed(nil, nil),
			expDecision: "koordinator/none/allow",
			expCalls:    1,
		},
		"if an intruder updates an enforced configuration, deny with 403 Forbidden naming mapping, rule and fix, and record it": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Update, policy.KindValidating, intruder, &koordRelabelled, &koord)
			},
			resolver: &fakeResolver{},
			expResp: denied(koordDenial("UPDATE", policy.KindValidating, intruderNotOwnerKoord), map[string]string{
				"decision": "deny", "rule": "not-owner", "mapping": "koordinator", "violations": intruderNotOwnerKoord,
			}),
			expDecision: "koordinator/not-owner/deny",
			expRecords:  []string{"koordinator/not-owner/deny"},
		},
		"if an intruder deletes an enforced MutatingWebhookConfiguration, deny it as a takeover": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Delete, policy.KindMutating, intruder, nil, &koord)
			},
			resolver: &fakeResolver{},
			expResp: denied(koordDenial("DELETE", policy.KindMutating, `not-owner: userInfo: "system:serviceaccount:intruder-system:intruder" is not a writer; deleting it (and recreating it) is a takeover; hint: if it should own this configuration, add intruder-system/intruder to owners[koordinator].writers.serviceAccounts`), map[string]string{
				"decision": "deny", "rule": "not-owner", "mapping": "koordinator",
				"violations": `not-owner: userInfo: "system:serviceaccount:intruder-system:intruder" is not a writer; deleting it (and recreating it) is a takeover; hint: if it should own this configuration, add intruder-system/intruder to owners[koordinator].writers.serviceAccounts`,
			}),
			expDecision: "koordinator/not-owner/deny",
			expRecords:  []string{"koordinator/not-owner/deny"},
		},
		"if an intruder writes a foreign CA, deny with not-owner only and never resolve the owner's CA": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Update, policy.KindValidating, intruder, &koordForeign, &koord)
			},
			resolver: &fakeResolver{Cached: caResult(t, koordSource, true, f.Owner.PEM), Live: caResult(t, koordSource, false, f.Owner.PEM)},
			expResp: denied(koordDenial("UPDATE", policy.KindValidating, intruderNotOwnerKoord), map[string]string{
				"decision": "deny", "rule": "not-owner", "mapping": "koordinator", "violations": intruderNotOwnerKoord,
			}),
			expDecision: "koordinator/not-owner/deny",
			expRecords:  []string{"koordinator/not-owner/deny"},
		},
		"if the owner writes a foreign CA decided on a cached CA, look again once, confirm and deny with fingerprints": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Update, policy.KindValidating, koordManager, &koordForeign, &koord)
			},
			resolver: &fakeResolver{Cached: caResult(t, koordSource, true, f.Owner.PEM), Live: caResult(t, koordSource, false, f.Owner.PEM)},
			expResp: denied(
				fmt.Sprintf(`webhook-guard denied UPDATE of ValidatingWebhookConfiguration "koord" by %q (mapping "koordinator", enforce); %s`, koordManager, caMismatch("koord-0.example.com", koordSource, f.Owner.Short(), f.Foreign.Short())),
				map[string]string{"decision": "deny", "rule": "ca-mismatch", "mapping": "koordinator", "violations": caMismatch("koord-0.example.com", koordSource, f.Owner.Short(), f.Foreign.Short())}),
			expDecision: "koordinator/ca-mismatch/deny",
			expRecords:  []string{"koordinator/ca-mismatch/deny"},
			expCalls:    2,
			expLive:     1,
			expRereads:  map[string]float64{"confirmed": 1},
		},
		"if a mismatch on a cached CA is re-read live and the fresh CA includes the written one (rotation raced the cache), allow": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Update, policy.KindValidating, koordManager, &koordRotating, &koord)
			},
			resolver:    &fakeResolver{Cached: caResult(t, koordSource, true, f.Owner.PEM), Live: caResult(t, koordSource, false, f.Owner.PEM, f.OwnerNew.PEM)},
			expResp:     allowed(nil, nil),
			expDecision: "koordinator/none/allow",
			expCalls:    2,
			expLive:     1,
			expRereads:  map[string]float64{"rotated": 1},
		},
		"if a mismatch was decided on a fresh read, do not re-read": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Update, policy.KindValidating, koordManager, &koordRotating, &koord)
			},
			resolver: &fakeResolver{Cached: caResult(t, koordSource, false, f.Owner.PEM), Live: caResult(t, koordSource, false, f.Owner.PEM, f.OwnerNew.PEM)},
			expResp: denied(
				fmt.Sprintf(`webhook-guard denied UPDATE of ValidatingWebhookConfiguration "koord" by %q (mapping "koordinator", enforce); %s`, koordManager, caMismatch("koord-0.example.com", koordSource, f.Owner.Short(), f.OwnerNew.Short())),
				map[string]string{"decision": "deny", "rule": "ca-mismatch", "mapping": "koordinator", "violations": caMismatch("koord-0.example.com", koordSource, f.Owner.Short(), f.OwnerNew.Short())}),
			expDecision: "koordinator/ca-mismatch/deny",
			expRecords:  []string{"koordinator/ca-mismatch/deny"},
			expCalls:    1,
		},
		"if an update leaves every caBundle alone, never call the resolver, even when it would fail": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Update, policy.KindValidating, koordManager, &koordRelabelled, &koord)
			},
			resolver:    &fakeResolver{Cached: casource.Result{CAResult: policy.CAResult{Resolved: true, Err: sourceErr}, Source: koordSource}},
			expResp:     allowed(nil, nil),
			expDecision: "koordinator/none/allow",
		},
		"if an update empties a caBundle, deny without calling the resolver": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Update, policy.KindValidating, koordManager, &koordEmpty, &koord)
			},
			resolver: &fakeResolver{Cached: casource.Result{CAResult: policy.CAResult{Resolved: true, Err: sourceErr}, Source: koordSource}},
			expResp: denied(
				fmt.Sprintf(`webhook-guard denied UPDATE of ValidatingWebhookConfiguration "koord" by %q (mapping "koordinator", enforce); ca-mismatch: webhooks[0].clientConfig.caBundle (webhook "koord-0.example.com"): a non-empty caBundle was emptied; kube-apiserver would trust its system roots for the webhook instead of the owner's CA; hint: write the owner's CA instead of removing it`, koordManager),
				map[string]string{"decision": "deny", "rule": "ca-mismatch", "mapping": "koordinator", "violations": `ca-mismatch: webhooks[0].clientConfig.caBundle (webhook "koord-0.example.com"): a non-empty caBundle was emptied; kube-apiserver would trust its system roots for the webhook instead of the owner's CA; hint: write the owner's CA instead of removing it`}),
			expDecision: "koordinator/ca-mismatch/deny",
			expRecords:  []string{"koordinator/ca-mismatch/deny"},
		},
		"if the CA source cannot be read, deny a caBundle change with ca-unavailable naming the source, and count the source error": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Update, policy.KindValidating, koordManager, &koordRotating, &koord)
			},
			resolver: &fakeResolver{Cached: casource.Result{CAResult: policy.CAResult{Resolved: true, Err: sourceErr}, Source: koordSource}},
			expResp: denied(
				fmt.Sprintf(`webhook-guard denied UPDATE of ValidatingWebhookConfiguration "koord" by %q (mapping "koordinator", enforce); ca-unavailable: webhooks[0].clientConfig.caBundle (webhook "koord-0.example.com"): cannot verify the new caBundle: cannot read the owner's CA from Secret koordinator-system/webhook-certs (key ca.crt): it does not exist; caBundle changes fail closed until the source can be read; hint: fix the CA source named above; updates that leave caBundle alone are not affected`, koordManager),
				map[string]string{"decision": "deny", "rule": "ca-unavailable", "mapping": "koordinator", "violations": `ca-unavailable: webhooks[0].clientConfig.caBundle (webhook "koord-0.example.com"): cannot verify the new caBundle: cannot read the owner's CA from Secret koordinator-system/webhook-certs (key ca.crt): it does not exist; caBundle changes fail closed until the source can be read; hint: fix the CA source named above; updates that leave caBundle alone are not affected`}),
			expDecision:     "koordinator/ca-unavailable/deny",
			expRecords:      []string{"koordinator/ca-unavailable/deny"},
			expCalls:        1,
			expSourceErrors: 1,
		},
		"if the CA is served stale while its source is unreachable, count a source error and decide on it": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Update, policy.KindValidating, koordManager, &koord, &koordEmpty)
			},
			resolver: &fakeResolver{Cached: func() casource.Result {
				r := caResult(t, koordSource, true, f.Owner.PEM)
				r.Stale = true
				return r
			}()},
			expResp:         allowed(nil, nil),
			expDecision:     "koordinator/none/allow",
			expCalls:        1,
			expSourceErrors: 1,
		},
		"if an intruder updates an audited configuration, allow with a warning kubectl prints and audit annotations, and record it": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Update, policy.KindValidating, intruder, &auditedRelabelled, &audited)
			},
			resolver: &fakeResolver{},
			expResp: allowed([]string{"webhook-guard (audit) would deny: " + intruderNotOwnerAudited}, map[string]string{
				"decision": "audit", "rule": "not-owner", "mapping": "audited", "violations": intruderNotOwnerAudited,
			}),
			expDecision: "audited/not-owner/audit",
			expRecords:  []string{"audited/not-owner/audit"},
		},
		"if the owner of an audited configuration writes a foreign CA, re-read, then allow with a compact warning and the full violation in the annotations": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Update, policy.KindMutating, auditedOwner, &auditedForeign, &audited)
			},
			resolver: &fakeResolver{Cached: caResult(t, auditedSource, true, f.Owner.PEM), Live: caResult(t, auditedSource, false, f.Owner.PEM)},
			expResp: allowed(
				[]string{fmt.Sprintf(`webhook-guard (audit) would deny: ca-mismatch: webhooks[0].clientConfig.caBundle (webhook "audited-0.example.com"): certificate(s) not in the owner's CA set [expected CA %s, found %s]`, f.Owner.Short(), f.Foreign.Short())},
				map[string]string{"decision": "audit", "rule": "ca-mismatch", "mapping": "audited", "violations": caMismatch("audited-0.example.com", auditedSource, f.Owner.Short(), f.Foreign.Short())}),
			expDecision: "audited/ca-mismatch/audit",
			expRecords:  []string{"audited/ca-mismatch/audit"},
			expCalls:    2,
			expLive:     1,
			expRereads:  map[string]float64{"confirmed": 1},
		},
		"if a break-glass subject updates a guarded configuration, allow with a warning and record it": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				req := request(t, admissionv1.Update, policy.KindValidating, "alice", &koordRelabelled, &koord)
				req.UserInfo.Groups = []string{"system:masters", "system:authenticated"}
				return req
			},
			resolver: &fakeResolver{},
			expResp: allowed([]string{`webhook-guard break-glass: "alice" wrote ValidatingWebhookConfiguration "koord" owned by mapping "koordinator"; this write is recorded`},
				map[string]string{"decision": "break-glass", "rule": "break-glass", "mapping": "koordinator"}),
			expDecision: "koordinator/break-glass/break-glass",
			expRecords:  []string{"koordinator/break-glass/break-glass"},
		},
		"if an intruder's request is a dry run, deny it the same way and record nothing": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				req := request(t, admissionv1.Update, policy.KindValidating, intruder, &koordRelabelled, &koord)
				req.DryRun = new(true)
				return req
			},
			resolver: &fakeResolver{},
			expResp: denied(koordDenial("UPDATE", policy.KindValidating, intruderNotOwnerKoord), map[string]string{
				"decision": "deny", "rule": "not-owner", "mapping": "koordinator", "violations": intruderNotOwnerKoord,
			}),
			expDecision: "koordinator/not-owner/deny",
		},
		"if an intruder relabels a label-selected configuration out of its owner's selector, decide it under the stored labels and deny": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Update, policy.KindValidating, intruder, &teamAEscaped, &teamA)
			},
			resolver: &fakeResolver{},
			expResp: denied(
				fmt.Sprintf(`webhook-guard denied UPDATE of ValidatingWebhookConfiguration "team-a-hooks" by %q (mapping "team-a", enforce); not-owner: userInfo: %q is not a writer; hint: if it should own this configuration, add intruder-system/intruder to owners[team-a].writers.serviceAccounts`, intruder, intruder),
				map[string]string{"decision": "deny", "rule": "not-owner", "mapping": "team-a", "violations": fmt.Sprintf(`not-owner: userInfo: %q is not a writer; hint: if it should own this configuration, add intruder-system/intruder to owners[team-a].writers.serviceAccounts`, intruder)}),
			expDecision: "team-a/not-owner/deny",
			expRecords:  []string{"team-a/not-owner/deny"},
		},
		"if the owner relabels its label-selected configuration, allow": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Update, policy.KindValidating, teamAOwner, &teamAEscaped, &teamA)
			},
			resolver:    &fakeResolver{},
			expResp:     allowed(nil, nil),
			expDecision: "team-a/none/allow",
		},
		"if no mapping covers the configuration, allow without asking the resolver": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Create, policy.KindValidating, intruder, &unmanaged, nil)
			},
			resolver:    &fakeResolver{},
			expResp:     allowed(nil, nil),
			expDecision: "/none/allow",
		},
		"if the review is malformed, answer 400 naming the problem and count it": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Update, policy.KindValidating, "", &koord, &koord)
			},
			resolver:   &fakeResolver{},
			expResp:    admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Code: 400, Message: "request.userInfo.username is missing"}},
			expInvalid: 1,
		},
		"if the review is of another kind, answer 400 and count it": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				req := request(t, admissionv1.Create, policy.KindValidating, koordManager, &koord, nil)
				req.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "Secret"}
				return req
			},
			resolver:   &fakeResolver{},
			expResp:    admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Code: 400, Message: "request.kind /v1, Kind=Secret is not guarded: expected admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration, admissionregistration.k8s.io/v1 MutatingWebhookConfiguration, apiextensions.k8s.io/v1 CustomResourceDefinition, apiregistration.k8s.io/v1 APIService; check the rules of the webhook registration"}},
			expInvalid: 1,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			m := NewMetrics(prometheus.NewRegistry())
			rec := &fakeRecorder{}
			h := newHandler(t, HandlerOptions{Config: StaticConfig{Config: cfg}, CA: test.resolver, Metrics: m, Recorder: rec})

			resp := answer(t, h, test.req(t))

			assert.Equal(t, test.expResp, resp)
			assert.Equal(t, test.expCalls, test.resolver.calls, "resolver calls")
			assert.Equal(t, test.expLive, test.resolver.liveCalls, "live resolver calls")
			assert.Equal(t, test.expRecords, rec.recorded(), "recorded decisions")
			assert.Empty(t, rec.flaps)

			assert.Equal(t, test.expInvalid, toFloat64(t, m.InvalidRequests), "invalid requests")
			if test.expDecision == "" {
				assert.Equal(t, 0, collectAndCount(m.Decisions), "decisions series")
				assert.Equal(t, 0, collectAndCount(m.DecisionDuration), "duration series")
			} else {
				assert.Equal(t, 1, collectAndCount(m.Decisions), "decisions series")
				assert.Equal(t, 1.0, toFloat64(t, m.Decisions.WithLabelValues(splitSeries(t, test.expDecision)...)), "decisions_total{%s}", test.expDecision)
				assert.Equal(t, 1, collectAndCount(m.DecisionDuration), "duration series")
			}
			assert.Equal(t, len(test.expRecords), collectAndCount(m.Records), "records series")
			for _, r := range test.expRecords {
				assert.Equal(t, 1.0, toFloat64(t, m.Records.WithLabelValues(splitSeries(t, r)...)), "records_total{%s}", r)
			}
			assert.Equal(t, len(test.expRereads), collectAndCount(m.CALiveRereads), "live re-read series")
			for outcome, v := range test.expRereads {
				assert.Equal(t, v, toFloat64(t, m.CALiveRereads.WithLabelValues(outcome)), "ca_live_rereads_total{outcome=%q}", outcome)
			}
			if test.expSourceErrors == 0 {
				assert.Equal(t, 0, collectAndCount(m.CASourceErrors), "source error series")
			} else {
				assert.Equal(t, 1, collectAndCount(m.CASourceErrors), "source error series")
				assert.Equal(t, test.expSourceErrors, toFloat64(t, m.CASourceErrors.WithLabelValues("koordinator", koordSource)))
			}
			assert.Equal(t, 0, collectAndCount(m.FlappingDetected), "flapping series")
		})
	}
}

// splitSeries splits "mapping/rule/decision" into label values.
func splitSeries(t *testing.T, s string) []string {
	t.Helper()
	parts := strings.Split(s, "/")
	require.Len(t, parts, 3, s)
	return parts
}

func Test_Handler_Review_resolverRequest(t *testing.T) {
	f := testFixtures(t)
	cfg := mustLoad(t, guardConfigDoc(f))
	res := &fakeResolver{Cached: caResult(t, koordSource, false, f.Owner.PEM)}
	h := newHandler(t, HandlerOptions{Config: StaticConfig{Config: cfg}, CA: res})
	old := object{Name: "koord", Annotations: map[string]string{casource.AnnotationInjectCAFrom: "koordinator-system/webhook"}}
	obj := object{Name: "koord", Annotations: map[string]string{casource.AnnotationInjectCAFrom: "intruder-system/mine"}, Bundles: [][]byte{f.Owner.PEM}}

	resp := answer(t, h, request(t, admissionv1.Update, policy.KindMutating, koordManager, &obj, &old))

	require.True(t, resp.Allowed)
	assert.Equal(t, []casource.Request{{
		Owner:                    &cfg.Spec.Owners[0],
		Annotations:              old.Annotations,
		ClusterResourceNamespace: "cert-manager",
	}}, res.requests, "the resolver is asked for the owner's CA with the stored object's annotations")
}

func Test_Handler_Review_flapping(t *testing.T) {
	f := testFixtures(t)
	cfg := mustLoad(t, guardConfigDoc(f))
	store := NewConfigStore(cfg)
	m := NewMetrics(prometheus.NewRegistry())
	rec := &fakeRecorder{}
	res := &fakeResolver{Cached: caResult(t, auditedSource, false, f.Owner.PEM, f.OwnerNew.PEM)}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h := newHandler(t, HandlerOptions{Config: store, CA: res, Metrics: m, Recorder: rec, Now: func() time.Time { return now }})

	// Five distinct bundles within the 10m window, by the owner, in audit
	// mode: the fourth exceeds maxDistinctBundles (3) and is reported; the
	// fifth is within the window of the report and is not reported again.
	bundles := [][]byte{
		f.Owner.PEM,
		slices.Concat(f.Owner.PEM, f.OwnerNew.PEM),
		f.OwnerNew.PEM,
		slices.Concat(f.OwnerNew.PEM, f.Owner.PEM),
		f.Foreign.PEM,
	}
	var warnings [][]string
	prev := object{Name: "audited", Bundles: [][]byte{nil}}
	for i, b := range bundles {
		obj := object{Name: "audited", Bundles: [][]byte{b}}
		resp := answer(t, h, request(t, admissionv1.Update, policy.KindValidating, auditedOwner, &obj, &prev))
		require.True(t, resp.Allowed, "write %d", i)
		warnings = append(warnings, resp.Warnings)
		prev = obj
		now = now.Add(time.Minute)
	}

	assert.Equal(t, [][]string{nil, nil, nil, nil, {fmt.Sprintf(`webhook-guard (audit) would deny: ca-mismatch: webhooks[0].clientConfig.caBundle (webhook "audited-0.example.com"): certificate(s) not in the owner's CA set [expected CA %s, found %s]`,
		shortSorted(f.Owner, f.OwnerNew), f.Foreign.Short())}}, warnings)
	assert.Equal(t, []recordedFlap{{Mapping: "audited", Report: flapping.Report{
		Kind:            policy.KindValidating,
		Name:            "audited",
		DistinctBundles: 4,
		Window:          10 * time.Minute,
		Writers:         []string{auditedOwner},
	}}}, rec.flaps)
	assert.Equal(t, 1, collectAndCount(m.FlappingDetected))
	assert.Equal(t, 1.0, toFloat64(t, m.FlappingDetected.WithLabelValues("audited", "ValidatingWebhookConfiguration", "audited")))
	assert.Equal(t, []string{"audited/ca-mismatch/audit"}, rec.recorded())

	// A reload that changes the flapping settings starts a new detector with
	// the new limits and no memory of the earlier report: three distinct
	// bundles now exceed maxDistinctBundles 2 and are reported, although the
	// old detector reported this configuration less than a window ago.
	store.Set(mustLoad(t, guardConfigDoc(f)+"flapping: {maxDistinctBundles: 2, window: 5m}\n"))
	for _, b := range [][]byte{f.Owner.PEM, f.OwnerNew.PEM, slices.Concat(f.Owner.PEM, f.OwnerNew.PEM)} {
		obj := object{Name: "audited", Bundles: [][]byte{b}}
		resp := answer(t, h, request(t, admissionv1.Update, policy.KindValidating, auditedOwner, &obj, &prev))
		require.True(t, resp.Allowed)
		prev = obj
		now = now.Add(time.Minute)
	}
	require.Len(t, rec.flaps, 2)
	assert.Equal(t, recordedFlap{Mapping: "audited", Report: flapping.Report{
		Kind:            policy.KindValidating,
		Name:            "audited",
		DistinctBundles: 3,
		Window:          5 * time.Minute,
		Writers:         []string{auditedOwner},
	}}, rec.flaps[1])
	assert.Equal(t, 2.0, toFloat64(t, m.FlappingDetected.WithLabelValues("audited", "ValidatingWebhookConfiguration", "audited")))
}

// shortSorted is the comma-joined short fingerprints of a CA set, sorted as
// messages print them.
func shortSorted(cas ...*testCA) string {
	var pems [][]byte
	for _, c := range cas {
		pems = append(pems, c.PEM)
	}
	set, _ := cabundle.NewCASet("", slices.Concat(pems...))
	return strings.Join(set.Short(), ",")
}

func Test_Handler_Review_dryRunNotFlapping(t *testing.T) {
	f := testFixtures(t)
	cfg := mustLoad(t, guardConfigDoc(f))
	m := NewMetrics(prometheus.NewRegistry())
	rec := &fakeRecorder{}
	h := newHandler(t, HandlerOptions{Config: StaticConfig{Config: cfg}, CA: &fakeResolver{Cached: caResult(t, auditedSource, false, f.Owner.PEM)}, Metrics: m, Recorder: rec})
	prev := object{Name: "audited", Bundles: [][]byte{nil}}
	for i := range 6 {
		obj := object{Name: "audited", Bundles: [][]byte{newTestCA(t, fmt.Sprintf("flap-%d", i)).PEM}}
		req := request(t, admissionv1.Update, policy.KindValidating, auditedOwner, &obj, &prev)
		req.DryRun = new(true)
		resp := answer(t, h, req)
		require.True(t, resp.Allowed)
		prev = obj
	}
	assert.Empty(t, rec.flaps, "dry runs are never flapping")
	assert.Empty(t, rec.recorded(), "dry runs are never recorded")
	assert.Equal(t, 6.0, toFloat64(t, m.Decisions.WithLabelValues("audited", "ca-mismatch", "audit")))
	assert.Equal(t, 0, collectAndCount(m.Records))
}

func Test_Response(t *testing.T) {
	tests := map[string]struct {
		d   policy.Decision
		exp admissionv1.AdmissionResponse
	}{
		"if the decision allows, return allowed with code 200 and nothing else": {
			d:   policy.Decision{Outcome: policy.OutcomeAllow, Rule: policy.RuleNone},
			exp: admissionv1.AdmissionResponse{Allowed: true, Result: &metav1.Status{Code: 200}},
		},
		"if the decision denies, return a 403 Forbidden failure with the message": {
			d: policy.Decision{
				Operation: policy.OperationCreate, Kind: policy.KindMutating, Name: "x", Subject: "bob",
				Mapping: "m", Mode: guardapi.ModeEnforce, Outcome: policy.OutcomeDeny, Rule: policy.RuleNotOwner,
				Violations: []policy.Violation{{Rule: policy.RuleNotOwner, Field: "userInfo", Detail: `"bob" is not a writer`}},
			},
			exp: admissionv1.AdmissionResponse{
				Allowed:          false,
				AuditAnnotations: map[string]string{"decision": "deny", "rule": "not-owner", "mapping": "m", "violations": `not-owner: userInfo: "bob" is not a writer`},
				Result: &metav1.Status{Status: "Failure", Reason: "Forbidden", Code: 403,
					Message: `webhook-guard denied CREATE of MutatingWebhookConfiguration "x" by "bob" (mapping "m", enforce); not-owner: userInfo: "bob" is not a writer`},
			},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, test.exp, Response(&test.d))
		})
	}
}

func Test_LogRecorder(t *testing.T) {
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	r := LogRecorder{Log: log}
	r.RecordDecision(t.Context(), &policy.Decision{
		Operation: policy.OperationUpdate, Kind: policy.KindValidating, Name: "koord", Subject: "bob",
		Mapping: "koordinator", Mode: guardapi.ModeAudit, Outcome: policy.OutcomeAudit, Rule: policy.RuleNotOwner,
		Violations: []policy.Violation{{Rule: policy.RuleNotOwner, Field: "userInfo", Detail: "x"}},
	})
	r.RecordFlapping(t.Context(), "koordinator", flapping.Report{
		Kind: policy.KindMutating, Name: "koord", DistinctBundles: 4, Window: 10 * time.Minute, Writers: []string{"a", "b"},
	})
	assert.Equal(t, []string{
		`"level"=0 "msg"="decision recorded" "mapping"="koordinator" "mode"="audit" "rule"="not-owner" "outcome"="audit" "operation"="UPDATE" "kind"="ValidatingWebhookConfiguration" "name"="koord" "subject"="bob" "dryRun"=false "violations"=["not-owner: userInfo: x"]`,
		`"level"=0 "msg"="caBundle flapping detected" "mapping"="koordinator" "kind"="MutatingWebhookConfiguration" "name"="koord" "distinctBundles"=4 "window"="10m0s" "writers"=["a" "b"]`,
	}, lines)
}

// Under a storm of replicas each writing its own CA, the guard waits for
// its CA watches once per foreign CA, not once per write.
func Test_Handler_Decide_confirmedMismatchIsNotWaitedForAgain(t *testing.T) {
	f := testFixtures(t)
	cfg := mustLoad(t, guardConfigDoc(f))
	watched := caResult(t, "Secret koordinator-system/webhook-certs (key ca.crt)", false, f.Owner.PEM)
	watched.Watched = true
	tests := map[string]struct {
		writes      [][]byte
		expLive     int
		expRereads  map[string]float64
		expOutcomes []policy.Outcome
	}{
		"if the same foreign CA is written twice, wait for the watches only the first time": {
			writes:      [][]byte{f.Foreign.PEM, f.Foreign.PEM},
			expLive:     1,
			expRereads:  map[string]float64{"confirmed": 1, "recent": 1},
			expOutcomes: []policy.Outcome{policy.OutcomeDeny, policy.OutcomeDeny},
		},
		"if another foreign CA is written, wait for the watches again": {
			writes:      [][]byte{f.Foreign.PEM, f.OwnerNew.PEM},
			expLive:     2,
			expRereads:  map[string]float64{"confirmed": 2},
			expOutcomes: []policy.Outcome{policy.OutcomeDeny, policy.OutcomeDeny},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			m := NewMetrics(prometheus.NewRegistry())
			res := &fakeResolver{Cached: watched, Live: watched}
			h := newHandler(t, HandlerOptions{Config: StaticConfig{Config: cfg}, CA: res, Metrics: m, Recorder: &fakeRecorder{}})
			var outcomes []policy.Outcome
			for _, b := range test.writes {
				in := &policy.Input{Operation: policy.OperationUpdate, Kind: policy.KindValidating, Name: "koord",
					User:       policy.User{Username: koordManager},
					OldEntries: []policy.Entry{{Name: "w", CABundle: f.Owner.PEM}},
					Entries:    []policy.Entry{{Name: "w", CABundle: b}}}
				d := h.Decide(t.Context(), in)
				outcomes = append(outcomes, d.Outcome)
			}
			assert.Equal(t, test.expOutcomes, outcomes)
			assert.Equal(t, test.expLive, res.liveCalls, "live resolver calls")
			for outcome, v := range test.expRereads {
				assert.Equal(t, v, toFloat64(t, m.CALiveRereads.WithLabelValues(outcome)), "ca_live_rereads_total{outcome=%q}", outcome)
			}
		})
	}
}
