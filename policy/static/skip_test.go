package static

import (
	"context"
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/utils/ptr"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap/vapengine"
)

// grantAuthorizer allows the skip verb for one fingerprint to one service
// account, as the chart's grant does.
type grantAuthorizer struct{ user, fingerprint string }

func (g grantAuthorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetUser().GetName() == g.user && a.GetAPIGroup() == GrantGroup && a.GetResource() == GrantResource &&
		a.GetName() == g.fingerprint && a.GetVerb() == GrantVerb {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// skipConfig has a mapping by name, one by selector, and one naming a CRD.
func skipConfig() *guardapi.GuardConfig {
	return &guardapi.GuardConfig{
		BreakGlass: guardapi.Subjects{Groups: []string{"system:masters"}},
		Owners: []guardapi.Owner{
			{Name: "app", Match: guardapi.Match{Validating: []string{"app-vwc"}, Mutating: []string{"app-mwc"}},
				Writers: guardapi.Subjects{ServiceAccounts: []string{"app/ctrl"}}},
			{Name: "team-a", Match: guardapi.Match{LabelSelector: &metav1.LabelSelector{
				MatchLabels:      map[string]string{"team": "a"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"test"}}},
			}}, Writers: guardapi.Subjects{ServiceAccounts: []string{"team-a/ctrl"}}},
			{Name: "crds", Match: guardapi.Match{CustomResourceDefinitions: []string{"widgets.example.com"}},
				Writers: guardapi.Subjects{ServiceAccounts: []string{"cert-manager/cainjector"}}},
		},
	}
}

const testFingerprint = "0123456789abcdef0123456789abcdef"

func vwcObject(name string, labels map[string]string, edit func(*admv1.ValidatingWebhook)) *admv1.ValidatingWebhookConfiguration {
	w := admv1.ValidatingWebhook{
		Name:           "a.example.com",
		ClientConfig:   admv1.WebhookClientConfig{URL: new("https://a.example.com/validate"), CABundle: []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")},
		TimeoutSeconds: ptr.To[int32](10),
	}
	if edit != nil {
		edit(&w)
	}
	return &admv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Generation: 1},
		Webhooks:   []admv1.ValidatingWebhook{w},
	}
}

// toService points the entry at a Service instead of a URL.
func toService(port int32) func(*admv1.ValidatingWebhook) {
	return func(w *admv1.ValidatingWebhook) {
		w.ClientConfig.URL = nil
		w.ClientConfig.Service = &admv1.ServiceReference{Namespace: "app", Name: "app-webhook", Path: new("/validate"), Port: new(port)}
	}
}

func crdObject(annotations map[string]string, caBundle, service string) *unstructured.Unstructured {
	meta := map[string]any{"name": "widgets.example.com", "generation": int64(1)}
	if annotations != nil {
		a := map[string]any{}
		for k, v := range annotations {
			a[k] = v
		}
		meta["annotations"] = a
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": meta,
		"spec": map[string]any{"group": "example.com", "conversion": map[string]any{"strategy": "Webhook", "webhook": map[string]any{
			"conversionReviewVersions": []any{"v1"},
			"clientConfig":             map[string]any{"caBundle": caBundle, "service": map[string]any{"namespace": "widgets", "name": service, "port": int64(443)}},
		}}},
	}}
}

// Test_skipCondition evaluates the enforcing entry's matchConditions with
// kube-apiserver's own webhook matcher: false (not called) only for the
// writes whose answer is always "allowed", and only while the grant for
// the GuardConfig's fingerprint holds.
func Test_skipCondition(t *testing.T) {
	in := validInput(t)
	in.Skip = &Skip{Config: skipConfig(), Fingerprint: testFingerprint, GrantServiceAccount: "webhook-guard/webhook-guard"}
	in.BreakGlass = in.Skip.Config.BreakGlass
	vwc, err := ValidatingWebhookConfiguration(in)
	require.NoError(t, err)
	require.Equal(t, SkipConditionName, vwc.Webhooks[0].MatchConditions[len(vwc.Webhooks[0].MatchConditions)-1].Name)
	for _, w := range vwc.Webhooks[1:] {
		for _, c := range w.MatchConditions {
			assert.NotEqual(t, SkipConditionName, c.Name, "entry %s: only the enforcing entry skips", w.Name)
		}
	}
	matcher := webhook.NewValidatingWebhookAccessor("uid", ConfigName, &vwc.Webhooks[0]).GetCompiledMatcher(plugincel.NewConditionCompiler(vapengine.Env()))
	granted := grantAuthorizer{user: "system:serviceaccount:webhook-guard:webhook-guard", fingerprint: testFingerprint}

	sa := func(ns, name string) user.Info {
		return &user.DefaultInfo{Name: guardapi.ServiceAccountUsername(ns + "/" + name), Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	}
	writer, teamWriter, cainjector, other := sa("app", "ctrl"), sa("team-a", "ctrl"), sa("cert-manager", "cainjector"), sa("other", "ctrl")
	teamA := map[string]string{"team": "a"}
	stored := vwcObject("app-vwc", nil, nil)
	storedTeam := vwcObject("team-vwc", teamA, nil)
	withAnnotation := func(o *admv1.ValidatingWebhookConfiguration) *admv1.ValidatingWebhookConfiguration {
		o = o.DeepCopy()
		o.Annotations = map[string]string{"argocd.argoproj.io/sync": "now"}
		return o
	}
	pem2 := []byte("-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n")
	crd := crdObject(nil, "QUFBQQ==", "widgets")

	cases := map[string]struct {
		op       admission.Operation
		obj, old runtime.Object
		u        user.Info
		authz    authorizer.UnconditionalAuthorizer
		skipped  bool
	}{
		"writer's annotation: skipped":      {op: admission.Update, obj: withAnnotation(stored), old: stored, u: writer, skipped: true},
		"writer's label, no selector on it": {op: admission.Update, obj: vwcObject("app-vwc", map[string]string{"x": "y"}, nil), old: stored, u: writer, skipped: true},
		"writer's timeout: skipped":         {op: admission.Update, obj: vwcObject("app-vwc", nil, func(w *admv1.ValidatingWebhook) { w.TimeoutSeconds = ptr.To[int32](20) }), old: stored, u: writer, skipped: true},
		"writer's no-op write: skipped":     {op: admission.Update, obj: stored, old: stored, u: writer, skipped: true},
		"without the grant: sent":           {op: admission.Update, obj: withAnnotation(stored), old: stored, u: writer, authz: grantAuthorizer{user: granted.user, fingerprint: "ffffffffffffffffffffffffffffffff"}},
		"writer's caBundle change: sent":    {op: admission.Update, obj: vwcObject("app-vwc", nil, func(w *admv1.ValidatingWebhook) { w.ClientConfig.CABundle = pem2 }), old: stored, u: writer},
		"writer's URL change: sent":         {op: admission.Update, obj: vwcObject("app-vwc", nil, func(w *admv1.ValidatingWebhook) { w.ClientConfig.URL = new("https://b.example.com/validate") }), old: stored, u: writer},
		"writer's service port move: sent":  {op: admission.Update, obj: vwcObject("app-vwc", nil, toService(8443)), old: vwcObject("app-vwc", nil, toService(443)), u: writer},
		"writer's timeout, behind a service: skipped": {op: admission.Update, obj: vwcObject("app-vwc", nil, func(w *admv1.ValidatingWebhook) {
			toService(443)(w)
			w.TimeoutSeconds = ptr.To[int32](3)
		}), old: vwcObject("app-vwc", nil, toService(443)), u: writer, skipped: true},
		"writer's renamed entry: sent": {op: admission.Update, obj: vwcObject("app-vwc", nil, func(w *admv1.ValidatingWebhook) { w.Name = "b.example.com" }), old: stored, u: writer},
		"writer's CA pointer: sent": {op: admission.Update, obj: func() runtime.Object {
			o := stored.DeepCopy()
			o.Annotations = map[string]string{"cert-manager.io/inject-ca-from": "x/y"}
			return o
		}(), old: stored, u: writer},
		"writer's CREATE: sent":                {op: admission.Create, obj: stored, u: writer},
		"writer's DELETE: sent":                {op: admission.Delete, old: stored, u: writer},
		"non-writer's annotation: sent":        {op: admission.Update, obj: withAnnotation(stored), old: stored, u: other},
		"another mapping's writer: sent":       {op: admission.Update, obj: withAnnotation(stored), old: stored, u: teamWriter},
		"unowned configuration: sent":          {op: admission.Update, obj: withAnnotation(vwcObject("else", nil, nil)), old: vwcObject("else", nil, nil), u: writer},
		"selected, its writer's annotation":    {op: admission.Update, obj: withAnnotation(storedTeam), old: storedTeam, u: teamWriter, skipped: true},
		"selected, a label it ignores":         {op: admission.Update, obj: vwcObject("team-vwc", map[string]string{"team": "a", "x": "y"}, nil), old: storedTeam, u: teamWriter, skipped: true},
		"relabel out of the selector: sent":    {op: admission.Update, obj: vwcObject("team-vwc", map[string]string{"team": "b"}, nil), old: storedTeam, u: teamWriter},
		"relabel by NotIn out: sent":           {op: admission.Update, obj: vwcObject("team-vwc", map[string]string{"team": "a", "tier": "test"}, nil), old: storedTeam, u: teamWriter},
		"relabel into the selector: sent":      {op: admission.Update, obj: vwcObject("app-vwc", teamA, nil), old: stored, u: writer},
		"named and selected (ambiguous): sent": {op: admission.Update, obj: withAnnotation(vwcObject("app-vwc", teamA, nil)), old: vwcObject("app-vwc", teamA, nil), u: writer},
		"CRD schema by its installer: skipped": {op: admission.Update, obj: func() runtime.Object {
			o := crd.DeepCopy()
			o.Object["spec"].(map[string]any)["group"] = "example.org"
			return o
		}(), old: crd, u: other, skipped: true},
		"CRD caBundle by its installer: sent": {op: admission.Update, obj: crdObject(nil, "QkJCQg==", "widgets"), old: crd, u: other},
		"CRD caBundle by cainjector: sent":    {op: admission.Update, obj: crdObject(nil, "QkJCQg==", "widgets"), old: crd, u: cainjector},
		"CRD endpoint move: sent":             {op: admission.Update, obj: crdObject(nil, "QUFBQQ==", "evil"), old: crd, u: other},
		"CRD CA pointer move: sent":           {op: admission.Update, obj: crdObject(map[string]string{"cert-manager.io/inject-ca-from": "a/b"}, "QUFBQQ==", "widgets"), old: crd, u: other},
		"CRD recreated: sent":                 {op: admission.Create, obj: crd, u: other},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objName := "app-vwc"
			for _, o := range []runtime.Object{tc.obj, tc.old} {
				if m, err := meta(o); err == nil {
					objName = m.GetName()
				}
			}
			attrs, _ := vapengine.Attributes(tc.op, objName, tc.obj, tc.old, tc.u)
			authz := tc.authz
			if authz == nil {
				authz = granted
			}
			res := matcher.Match(context.Background(), attrs, nil, authz)
			require.NoError(t, res.Error)
			assert.Equal(t, !tc.skipped, res.Matches, "called (failed condition %q)", res.FailedConditionName)
		})
	}
}

func meta(o runtime.Object) (metav1.Object, error) {
	if o == nil {
		return nil, assert.AnError
	}
	return o.(metav1.Object), nil
}

func Test_Skip_validate(t *testing.T) {
	good := Skip{Config: skipConfig(), Fingerprint: testFingerprint, GrantServiceAccount: "ns/sa"}
	for name, edit := range map[string]func(*Skip){
		"no config":         func(s *Skip) { s.Config = nil },
		"short fingerprint": func(s *Skip) { s.Fingerprint = "abc" },
		"upper-case":        func(s *Skip) { s.Fingerprint = "0123456789ABCDEF0123456789ABCDEF" },
		"no account":        func(s *Skip) { s.GrantServiceAccount = "sa" },
	} {
		t.Run(name, func(t *testing.T) {
			s := good
			edit(&s)
			in := validInput(t)
			in.Skip = &s
			_, err := ValidatingWebhookConfiguration(in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "Skip")
		})
	}
	assert.Equal(t, "2c26b46b68ffc68ff99b453c1d304134", Fingerprint([]byte("foo")))
}

// Test_skipCondition_selectorAsLabelsSelector holds the skip condition's
// label selectors to labels.Selector: a writer's annotation of a
// configuration claimed only by a selector is skipped exactly when the
// selector matches its labels, for every operator and for absent labels.
func Test_skipCondition_selectorAsLabelsSelector(t *testing.T) {
	sel := &metav1.LabelSelector{
		MatchLabels: map[string]string{"team": "a"},
		MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", ""}},
			{Key: "stage", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"test"}},
			{Key: "owned", Operator: metav1.LabelSelectorOpExists},
			{Key: "legacy", Operator: metav1.LabelSelectorOpDoesNotExist},
		},
	}
	selector, err := metav1.LabelSelectorAsSelector(sel)
	require.NoError(t, err)
	in := validInput(t)
	in.Skip = &Skip{Fingerprint: testFingerprint, GrantServiceAccount: "webhook-guard/webhook-guard", Config: &guardapi.GuardConfig{
		Owners: []guardapi.Owner{{Name: "team-a", Match: guardapi.Match{LabelSelector: sel}, Writers: guardapi.Subjects{ServiceAccounts: []string{"team-a/ctrl"}}}},
	}}
	vwc, err := ValidatingWebhookConfiguration(in)
	require.NoError(t, err)
	matcher := webhook.NewValidatingWebhookAccessor("uid", ConfigName, &vwc.Webhooks[0]).GetCompiledMatcher(plugincel.NewConditionCompiler(vapengine.Env()))
	granted := grantAuthorizer{user: "system:serviceaccount:webhook-guard:webhook-guard", fingerprint: testFingerprint}
	writer := &user.DefaultInfo{Name: guardapi.ServiceAccountUsername("team-a/ctrl")}
	base := map[string]string{"team": "a", "tier": "web", "owned": ""}
	with := func(edit func(map[string]string)) map[string]string {
		l := maps.Clone(base)
		edit(l)
		return l
	}
	for name, l := range map[string]map[string]string{
		"no labels":                 nil,
		"all requirements met":      base,
		"matchLabels value differs": with(func(l map[string]string) { l["team"] = "b" }),
		"In: empty value listed":    with(func(l map[string]string) { l["tier"] = "" }),
		"In: value not listed":      with(func(l map[string]string) { l["tier"] = "db" }),
		"In: key absent":            with(func(l map[string]string) { delete(l, "tier") }),
		"NotIn: listed value":       with(func(l map[string]string) { l["stage"] = "test" }),
		"NotIn: other value":        with(func(l map[string]string) { l["stage"] = "prod" }),
		"Exists: key absent":        with(func(l map[string]string) { delete(l, "owned") }),
		"DoesNotExist: key present": with(func(l map[string]string) { l["legacy"] = "" }),
		"unrelated label added":     with(func(l map[string]string) { l["x"] = "y" }),
	} {
		t.Run(name, func(t *testing.T) {
			stored := vwcObject("team-vwc", l, nil)
			annotated := stored.DeepCopy()
			annotated.Annotations = map[string]string{"argocd.argoproj.io/sync": "now"}
			attrs, _ := vapengine.Attributes(admission.Update, stored.Name, annotated, stored, writer)
			res := matcher.Match(context.Background(), attrs, nil, granted)
			require.NoError(t, res.Error)
			assert.Equal(t, selector.Matches(labels.Set(l)), !res.Matches, "skipped")
		})
	}
}

// Test_skipCondition_claimants: with three mappings of different writers,
// one by name, one by label and one by both, a writer's annotation is
// skipped only when its own mapping is the only one that claims the
// configuration.
func Test_skipCondition_claimants(t *testing.T) {
	team := func(v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"team": v}}
	}
	in := validInput(t)
	in.Skip = &Skip{Fingerprint: testFingerprint, GrantServiceAccount: "webhook-guard/webhook-guard", Config: &guardapi.GuardConfig{
		Owners: []guardapi.Owner{
			{Name: "a", Match: guardapi.Match{Validating: []string{"a-vwc"}}, Writers: guardapi.Subjects{ServiceAccounts: []string{"a/ctrl"}}},
			{Name: "b", Match: guardapi.Match{LabelSelector: team("b")}, Writers: guardapi.Subjects{ServiceAccounts: []string{"b/ctrl"}}},
			{Name: "c", Match: guardapi.Match{Validating: []string{"c-vwc"}, LabelSelector: team("c")}, Writers: guardapi.Subjects{ServiceAccounts: []string{"c/ctrl"}}},
		},
	}}
	vwc, err := ValidatingWebhookConfiguration(in)
	require.NoError(t, err)
	matcher := webhook.NewValidatingWebhookAccessor("uid", ConfigName, &vwc.Webhooks[0]).GetCompiledMatcher(plugincel.NewConditionCompiler(vapengine.Env()))
	granted := grantAuthorizer{user: "system:serviceaccount:webhook-guard:webhook-guard", fingerprint: testFingerprint}
	for name, tc := range map[string]struct {
		writer, object, team string
		skipped              bool
	}{
		"named, its writer":               {writer: "a/ctrl", object: "a-vwc", skipped: true},
		"named, another mapping's writer": {writer: "b/ctrl", object: "a-vwc"},
		"selected, its writer":            {writer: "b/ctrl", object: "x-vwc", team: "b", skipped: true},
		"both ways, by name":              {writer: "c/ctrl", object: "c-vwc", skipped: true},
		"both ways, by label":             {writer: "c/ctrl", object: "y-vwc", team: "c", skipped: true},
		"both ways, by name and label":    {writer: "c/ctrl", object: "c-vwc", team: "c", skipped: true},
		"both ways, the other's writer":   {writer: "a/ctrl", object: "c-vwc"},
		"claimed by two mappings":         {writer: "c/ctrl", object: "a-vwc", team: "c"},
		"claimed by none":                 {writer: "a/ctrl", object: "z-vwc"},
	} {
		t.Run(name, func(t *testing.T) {
			var l map[string]string
			if tc.team != "" {
				l = map[string]string{"team": tc.team}
			}
			stored := vwcObject(tc.object, l, nil)
			annotated := stored.DeepCopy()
			annotated.Annotations = map[string]string{"argocd.argoproj.io/sync": "now"}
			attrs, _ := vapengine.Attributes(admission.Update, stored.Name, annotated, stored, &user.DefaultInfo{Name: guardapi.ServiceAccountUsername(tc.writer)})
			res := matcher.Match(context.Background(), attrs, nil, granted)
			require.NoError(t, res.Error)
			assert.Equal(t, tc.skipped, !res.Matches, "skipped")
		})
	}
}
