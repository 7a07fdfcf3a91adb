package static

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authentication/user"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap/vapengine"
)

// BenchmarkSkipCondition evaluates the enforcing entry's matchConditions
// for a writer's skipped write with kube-apiserver's own webhook matcher,
// beside the least caBundle check evaluated the same way in the same run
// (the least policy of docs/performance.md as one matchCondition): the
// seam the in-cluster benchmark (BenchmarkAPIServerStatic) measures whole.
// A timeout change must read both objects' entries, the least check only
// the new object's, so about 2x is that check's floor. x-least is the
// ratio of ns/op.
func BenchmarkSkipCondition(b *testing.B) {
	in := validInput(b)
	in.Skip = &Skip{Config: skipConfig(), Fingerprint: testFingerprint, GrantServiceAccount: "webhook-guard/webhook-guard"}
	in.BreakGlass = in.Skip.Config.BreakGlass
	vwc, err := ValidatingWebhookConfiguration(in)
	if err != nil {
		b.Fatal(err)
	}
	compiler := plugincel.NewConditionCompiler(vapengine.Env())
	skip := webhook.NewValidatingWebhookAccessor("skip", ConfigName, &vwc.Webhooks[0]).GetCompiledMatcher(compiler)
	ca := base64.StdEncoding.EncodeToString(benchCA())
	leastEntry := admv1.ValidatingWebhook{Name: "least.example.com", MatchConditions: []admv1.MatchCondition{{Name: "least",
		Expression: `!object.webhooks.all(w, string(w.clientConfig.caBundle) == "` + ca + `")`}}}
	least := webhook.NewValidatingWebhookAccessor("least", "least", &leastEntry).GetCompiledMatcher(compiler)
	granted := grantAuthorizer{user: "system:serviceaccount:webhook-guard:webhook-guard", fingerprint: testFingerprint}
	writer := &user.DefaultInfo{Name: guardapi.ServiceAccountUsername("app/ctrl"), Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	for _, n := range []int{5, 50} {
		stored := benchConfig(n, 1, 10)
		annotated := stored.DeepCopy()
		annotated.Annotations = map[string]string{"argocd.argoproj.io/sync": "now"}
		for _, w := range []struct {
			name string
			obj  *admv1.ValidatingWebhookConfiguration
		}{{"annotation", annotated}, {"timeout", benchConfig(n, 2, 20)}} {
			attrs, _ := vapengine.Attributes(admission.Update, stored.Name, w.obj, stored, writer)
			var leastNs float64
			for _, m := range []struct {
				name    string
				matcher matchconditions.Matcher
			}{{"least", least}, {"skip", skip}} {
				b.Run(fmt.Sprintf("entries=%d/write=%s/%s", n, w.name, m.name), func(b *testing.B) {
					for b.Loop() {
						// Objects converted afresh, as for each request.
						a := *attrs
						a.VersionedObject.Set(attrs.VersionedObject.Object())
						a.VersionedOldObject.Set(attrs.VersionedOldObject.Object())
						if res := m.matcher.Match(context.Background(), &a, nil, granted); res.Error != nil || res.Matches {
							b.Fatalf("%s: matched %v (failed %q), error %v", m.name, res.Matches, res.FailedConditionName, res.Error)
						}
					}
					ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
					if m.name == "least" {
						leastNs = ns
					} else if leastNs > 0 {
						b.ReportMetric(ns/leastNs, "x-least")
					}
				})
			}
		}
	}
}

// benchCA is a caBundle the size of an RSA-2048 CA's PEM.
func benchCA() []byte {
	return []byte("-----BEGIN CERTIFICATE-----\n" + strings.Repeat(strings.Repeat("A", 64)+"\n", 17) + "-----END CERTIFICATE-----\n")
}

// benchConfig is the named configuration of n entries behind a service,
// at generation gen, every entry's timeout as given and its caBundle
// bytes of its own, as decoded objects have them.
func benchConfig(n int, gen int64, timeout int32) *admv1.ValidatingWebhookConfiguration {
	o := vwcObject("app-vwc", nil, nil)
	o.Generation, o.Webhooks = gen, nil
	for i := range n {
		o.Webhooks = append(o.Webhooks, admv1.ValidatingWebhook{
			Name: fmt.Sprintf("w%d.example.com", i),
			ClientConfig: admv1.WebhookClientConfig{CABundle: benchCA(),
				Service: &admv1.ServiceReference{Namespace: "app", Name: "app-webhook", Path: new("/validate"), Port: new(int32(443))}},
			TimeoutSeconds: new(timeout),
		})
	}
	return o
}
