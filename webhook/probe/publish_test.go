package probe

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// publishTest drives a Publisher on a fake client with a settable clock.
type publishTest struct {
	t       *testing.T
	client  client.Client
	now     time.Time
	pub     *Publisher
	results map[string]int
}

func newPublishTest(t *testing.T, funcs interceptor.Funcs) *publishTest {
	scheme := runtime.NewScheme()
	require.NoError(t, reportsv1alpha1.Install(scheme))
	pt := &publishTest{t: t, now: time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC), results: map[string]int{}}
	pt.client = fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(funcs).Build()
	pt.pub = &Publisher{Client: pt.client, Refresh: time.Minute, Now: func() time.Time { return pt.now },
		Writes: func(r string) { pt.results[r]++ }}
	return pt
}

func (pt *publishTest) report() reportsv1alpha1.ClusterReport {
	var rep reportsv1alpha1.ClusterReport
	require.NoError(pt.t, pt.client.Get(context.Background(), types.NamespacedName{Name: records.TrustPathsReport}, &rep))
	return rep
}

func publishPath(cfg, policy string) TrustPath {
	return TrustPath{Kind: "ValidatingWebhookConfiguration", Configuration: cfg, Mapping: "m", Webhook: "w.example.com",
		FailurePolicy: policy, Service: &ServiceRef{Namespace: "ns", Name: cfg, Port: 443}}
}

func Test_Publisher_Publish(t *testing.T) {
	pt := newPublishTest(t, interceptor.Funcs{})
	ctx := context.Background()
	ok, broken, ignored := publishPath("a", "Fail"), publishPath("b", "Fail"), publishPath("c", "Ignore")
	round := []Result{
		{Path: ok},
		{Path: broken, Reason: ReasonUnknownAuthority, Endpoint: "10.0.0.1:8443", Err: errors.New("x509: certificate signed by unknown authority")},
		{Path: ignored, Reason: ReasonNoEndpoints, Err: errors.New("service ns/c port 443: no ready endpoints")},
	}
	require.NoError(t, pt.pub.Publish(ctx, round))
	rep := pt.report()
	require.Equal(t, records.Source, rep.Source)
	require.Equal(t, "2026-12-04T10:00:00Z", rep.Annotations[records.AnnotationProbedAt])
	require.Equal(t, reportsv1alpha1.ReportSummary{Pass: 1, Fail: 1, Warn: 1}, rep.Summary)
	var got []string
	for _, r := range rep.Results {
		got = append(got, string(r.Result)+" "+r.Properties[records.PropConfiguration]+" "+r.Properties[records.PropReason])
	}
	require.Equal(t, []string{
		"fail ValidatingWebhookConfiguration/b unknown-authority",
		"warn ValidatingWebhookConfiguration/c no-endpoints",
		"pass ValidatingWebhookConfiguration/a ",
	}, got, "failing first; an Ignore webhook's broken path is a warning: kube-apiserver skips it")
	failed := rep.Results[0]
	require.Equal(t, "m", failed.Policy)
	require.Equal(t, records.RuleTrustPath, failed.Rule)
	require.Equal(t, "10.0.0.1:8443", failed.Properties[records.PropEndpoint])
	require.Equal(t, "Service ns/b port 443: the caBundle does not verify the certificate it serves (unknown-authority); kube-apiserver's calls to it fail", failed.Description)
	require.Equal(t, "2026-12-04T10:00:00Z", failed.Properties[records.PropSince])

	pt.now = pt.now.Add(30 * time.Second)
	require.NoError(t, pt.pub.Publish(ctx, round))
	require.Equal(t, rep.ResourceVersion, pt.report().ResourceVersion, "a round that changes no verdict writes nothing")

	pt.now = pt.now.Add(10 * time.Second)
	round[1] = Result{Path: broken}
	require.NoError(t, pt.pub.Publish(ctx, round))
	rep = pt.report()
	require.Equal(t, reportsv1alpha1.ReportSummary{Pass: 2, Warn: 1}, rep.Summary, "a verdict that changes is written at once")
	since := map[string]string{}
	for _, r := range rep.Results {
		since[r.Properties[records.PropConfiguration]] = r.Properties[records.PropSince]
	}
	require.Equal(t, map[string]string{
		"ValidatingWebhookConfiguration/a": "2026-12-04T10:00:00Z",
		"ValidatingWebhookConfiguration/b": "2026-12-04T10:00:40Z",
		"ValidatingWebhookConfiguration/c": "2026-12-04T10:00:00Z",
	}, since, "since is when each path's verdict began")

	pt.now = pt.now.Add(time.Minute)
	require.NoError(t, pt.pub.Publish(ctx, round))
	require.Equal(t, "2026-12-04T10:01:40Z", pt.report().Annotations[records.AnnotationProbedAt], "rewritten every Refresh, so readers can tell a stale report")
	require.Equal(t, map[string]int{"created": 1, "updated": 2, "unchanged": 1}, pt.results)
}

func Test_Publisher_Publish_apiNotInstalled(t *testing.T) {
	noMatch := &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "openreports.io", Kind: "ClusterReport"}}
	pt := newPublishTest(t, interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return noMatch
		},
	})
	require.NoError(t, pt.pub.Publish(context.Background(), []Result{{Path: publishPath("a", "Fail")}}),
		"without the OpenReports API there is nowhere to publish: not an error")
	require.Equal(t, map[string]int{"not-installed": 1}, pt.results)
}

func Test_Publisher_Publish_error(t *testing.T) {
	pt := newPublishTest(t, interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			return errors.New("etcdserver: request timed out")
		},
	})
	err := pt.pub.Publish(context.Background(), []Result{{Path: publishPath("a", "Fail")}})
	require.ErrorContains(t, err, "writing ClusterReport webhook-guard.trust-paths: etcdserver: request timed out")
	require.Equal(t, map[string]int{"error": 1}, pt.results)
}

// Test_Publisher_Publish_undoesOtherWrites: the report has a fixed name,
// so anyone who may write ClusterReports can replace it; the leader reads
// it every round and writes it again when it is not what it wrote last,
// before Refresh.
func Test_Publisher_Publish_undoesOtherWrites(t *testing.T) {
	ctx := context.Background()
	broken := Result{Path: publishPath("b", "Fail"), Reason: ReasonUnknownAuthority, Endpoint: "10.0.0.1:8443", Err: errors.New("x509: certificate signed by unknown authority")}
	forgeries := map[string]func(rep *reportsv1alpha1.ClusterReport){
		"if someone marks the failing path as passing, the round writes it back": func(rep *reportsv1alpha1.ClusterReport) {
			rep.Results[0].Result = "pass"
			delete(rep.Results[0].Properties, records.PropReason)
			rep.Summary = reportsv1alpha1.ReportSummary{Pass: 1}
		},
		"if someone empties the report and freshens its probed-at time, the round writes it back": func(rep *reportsv1alpha1.ClusterReport) {
			rep.Results, rep.Summary = nil, reportsv1alpha1.ReportSummary{}
			rep.Annotations[records.AnnotationProbedAt] = "2026-12-04T10:00:20Z"
		},
		"if someone changes its source, the round writes it back": func(rep *reportsv1alpha1.ClusterReport) {
			rep.Source = "someone"
		},
	}
	for name, forge := range forgeries {
		t.Run(name, func(t *testing.T) {
			pt := newPublishTest(t, interceptor.Funcs{})
			round := []Result{broken}
			require.NoError(t, pt.pub.Publish(ctx, round))
			rep := pt.report()
			forge(&rep)
			require.NoError(t, pt.client.Update(ctx, &rep))

			pt.now = pt.now.Add(30 * time.Second)
			require.NoError(t, pt.pub.Publish(ctx, round))
			got := pt.report()
			require.Equal(t, records.Source, got.Source)
			require.Equal(t, reportsv1alpha1.ReportSummary{Fail: 1}, got.Summary)
			require.Equal(t, "unknown-authority", got.Results[0].Properties[records.PropReason])
			require.Equal(t, "2026-12-04T10:00:30Z", got.Annotations[records.AnnotationProbedAt])
			require.Equal(t, map[string]int{"created": 1, "updated": 1}, pt.results)
		})
	}
}

// Test_Publisher_Publish_resultsAreBounded: each result has a resultID
// that names the entry whatever its verdict (as the decision reports'),
// and a URL of any length is cut in the description and the hint.
func Test_Publisher_Publish_resultsAreBounded(t *testing.T) {
	ctx := context.Background()
	pt := newPublishTest(t, interceptor.Funcs{})
	long := publishPath("u", "Fail")
	long.Service, long.URL = nil, "https://"+strings.Repeat("a", 60000)+".example.com/validate"
	a, b := publishPath("a", "Fail"), publishPath("b", "Fail")
	require.NoError(t, pt.pub.Publish(ctx, []Result{
		{Path: long, Reason: ReasonUnreachable, Endpoint: strings.Repeat("a", 60000) + ".example.com:443", Err: errors.New("dial tcp: lookup")},
		{Path: a}, {Path: b},
	}))
	ids := map[string]string{}
	for _, r := range pt.report().Results {
		ids[r.Properties[records.PropConfiguration]] = r.Properties[records.PropResultID]
		for what, text := range map[string]string{"description": r.Description, "hint": r.Properties[records.PropHint], "endpoint": r.Properties[records.PropEndpoint]} {
			require.LessOrEqual(t, len(text), 512, "%s of %s", what, r.Properties[records.PropConfiguration])
		}
	}
	require.Len(t, ids, 3)
	require.Len(t, ids["ValidatingWebhookConfiguration/a"], 32)
	require.NotEqual(t, ids["ValidatingWebhookConfiguration/a"], ids["ValidatingWebhookConfiguration/b"])

	pt.now = pt.now.Add(time.Second)
	require.NoError(t, pt.pub.Publish(ctx, []Result{{Path: long}, {Path: a, Reason: ReasonExpired, Err: errors.New("expired")}, {Path: b}}))
	for _, r := range pt.report().Results {
		require.Equal(t, ids[r.Properties[records.PropConfiguration]], r.Properties[records.PropResultID], "the same entry keeps its resultID when its verdict changes")
	}
}
