package vap

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap/vaptest"
)

const rotationConfig = `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
owners:
  - name: app
    mode: enforce
    match: {validating: [app]}
    writers: {serviceAccounts: [cert-manager/cert-manager-cainjector]}
    ca: {secret: {namespace: app-system, name: app-ca}}
`

// casByResidue generates CA certificates until it holds one whose PEM length
// is 0, 1 and 2 modulo 3 (base64 aligns a merged bundle's second CA by the
// first one's length modulo 3), plus a foreign one.
func casByResidue(t *testing.T) (byResidue [3]*testpki.CA, foreign *testpki.CA) {
	t.Helper()
	found := 0
	for i := 0; found < 3 && i < 60; i++ {
		ca, err := testpki.NewCA("app-ca-" + strings.Repeat("x", i))
		require.NoError(t, err)
		if r := len(ca.PEM) % 3; byResidue[r] == nil {
			byResidue[r] = ca
			found++
		}
	}
	require.Equal(t, 3, found, "no CA of every PEM length modulo 3 in 60 tries")
	foreign, err := testpki.NewCA("another-replica-ca")
	require.NoError(t, err)
	return byResidue, foreign
}

// Test_rotation_mergedBundles runs the generated policy in Kubernetes' own
// VAP engine against the bundles real writers produce: cainjector's merge
// (the stored bundle followed by the new CA, for every length of both modulo
// 3), a replace, and foreign certificates, with the CA Secret as param.
func Test_rotation_mergedBundles(t *testing.T) {
	cas, foreign := casByResidue(t)
	cfg := load(t, rotationConfig)
	cainjector := &user.DefaultInfo{Name: "system:serviceaccount:cert-manager:cert-manager-cainjector"}
	param := &guardapi.KeyRef{Namespace: "app-system", Name: "app-ca", Key: "ca.crt"}

	// compile generates the mapping's policies with the CA the guard last
	// synced: the owner policy and the one that reads the CA Secret.
	compile := func(t *testing.T, synced []byte) policies {
		t.Helper()
		objs, err := Generate(Input{Config: cfg, CAs: map[string]CA{"app": {PEM: synced, Source: "Secret app-system/app-ca", Param: param}}})
		require.NoError(t, err)
		require.Len(t, objs.Policies, 2)
		return compileAll(t, objs)
	}
	secret := func(ca []byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app-system", Name: "app-ca"}, Data: map[string][]byte{"ca.crt": ca}}
	}
	// review writes entry w1 from old to next, as cainjector does; params
	// nil is a missing Secret, whose binding kube-apiserver skips.
	review := func(t *testing.T, ps policies, params *corev1.Secret, old, next []byte) []string {
		t.Helper()
		r := vaptest.Request{Operation: admission.Update, Name: "app", User: cainjector, Object: webhookConfig(next), Old: webhookConfig(old)}
		if params != nil {
			r.Params = params
		}
		return ps.validate(t, r, params != nil)
	}

	for ri, stored := range cas {
		for ci, next := range cas {
			if ri == ci {
				continue
			}
			t.Run(fmt.Sprintf("stored length %d mod 3, new CA length %d mod 3", ri, ci), func(t *testing.T) {
				merged := append(append([]byte{}, stored.PEM...), next.PEM...)
				beforeSync, afterSync := compile(t, stored.PEM), compile(t, next.PEM)
				assert.Empty(t, review(t, beforeSync, secret(next.PEM), stored.PEM, merged), "the merge, before the guard synced the new CA: the param has it")
				assert.Empty(t, review(t, afterSync, secret(next.PEM), stored.PEM, merged), "the merge, after the guard synced")
				assert.Empty(t, review(t, beforeSync, secret(next.PEM), stored.PEM, next.PEM), "a replace")

				withForeign := append(append([]byte{}, merged...), foreign.PEM...)
				assert.Len(t, review(t, beforeSync, secret(next.PEM), stored.PEM, withForeign), 1, "the merge with a foreign CA appended")
				foreignMerge := append(append([]byte{}, stored.PEM...), foreign.PEM...)
				assert.Len(t, review(t, beforeSync, secret(next.PEM), stored.PEM, foreignMerge), 1, "the stored bundle followed by a foreign CA")
				assert.Len(t, review(t, beforeSync, secret(next.PEM), stored.PEM, foreign.PEM), 1, "a foreign CA alone")
				assert.Empty(t, review(t, beforeSync, nil, stored.PEM, merged), "the merge with the Secret gone, before the guard saw it: kube-apiserver skips the param binding")
			})
		}
	}
	t.Run("a merge that drops an expired certificate: the CA the guard last synced followed by the new one", func(t *testing.T) {
		expired, prev, next := cas[0], cas[1], cas[2]
		stored := append(append([]byte{}, expired.PEM...), prev.PEM...)
		merged := append(append([]byte{}, prev.PEM...), next.PEM...)
		assert.Empty(t, review(t, compile(t, prev.PEM), secret(next.PEM), stored, merged))
	})
	t.Run("a new entry holding the CA the guard last synced followed by the new one: denied, it has nothing stored to keep", func(t *testing.T) {
		prev, next := cas[1], cas[2]
		merged := append(append([]byte{}, prev.PEM...), next.PEM...)
		ps := compile(t, prev.PEM)
		created := vaptest.Request{Operation: admission.Create, Name: "app", User: cainjector, Object: webhookConfig(merged), Params: secret(next.PEM)}
		assert.Len(t, ps.validate(t, created, true), 1, "a CREATE")
		renamed := webhookConfig(merged)
		renamed.Object["webhooks"].([]any)[0].(map[string]any)["name"] = "renamed.app.io"
		r := vaptest.Request{Operation: admission.Update, Name: "app", User: cainjector, Object: renamed, Old: webhookConfig(prev.PEM), Params: secret(next.PEM)}
		assert.NotEmpty(t, ps.validate(t, r, true), "a renamed entry")
	})
	t.Run("a Secret the guard sees missing: the owner policy checks caBundles against the literal (none: fail closed)", func(t *testing.T) {
		objs, err := Generate(Input{Config: cfg, CAs: map[string]CA{"app": {Err: "Secret app-system/app-ca: it does not exist", Param: param, ParamMissing: true}}})
		require.NoError(t, err)
		ps := compileAll(t, objs)
		merged := append(append([]byte{}, cas[0].PEM...), cas[1].PEM...)
		msgs := review(t, ps, nil, cas[0].PEM, merged)
		require.Len(t, msgs, 1)
		assert.Contains(t, msgs[0], "ca-unavailable")
		assert.Len(t, review(t, ps, secret(cas[1].PEM), cas[0].PEM, merged), 1, "the Secret is back: the param policy allows, the owner policy still fails closed until the guard's next pass")
		assert.Empty(t, review(t, ps, nil, cas[0].PEM, cas[0].PEM), "an unchanged caBundle")
	})
	t.Run("a non-writer is denied not-owner with the Secret missing: the owner policy reads no param", func(t *testing.T) {
		ps := compile(t, cas[0].PEM)
		intruder := &user.DefaultInfo{Name: "system:serviceaccount:other:intruder"}
		r := vaptest.Request{Operation: admission.Update, Name: "app", User: intruder, Object: webhookConfig(cas[0].PEM), Old: webhookConfig(cas[0].PEM)}
		msgs := ps.validate(t, r, false)
		require.Len(t, msgs, 1)
		assert.Contains(t, msgs[0], "not-owner")
	})
	t.Run("the message names the entry and the rule", func(t *testing.T) {
		msgs := review(t, compile(t, cas[0].PEM), secret(cas[1].PEM), cas[0].PEM, foreign.PEM)
		require.Len(t, msgs, 1)
		assert.Contains(t, msgs[0], `ca-mismatch: the caBundle of webhook(s) w1.app.io is neither the owner's CA`)
	})
}

// webhookConfig is a ValidatingWebhookConfiguration named app with one entry
// w1.app.io carrying bundle, as kube-apiserver hands it to CEL (caBundle as
// its base64 text).
func webhookConfig(bundle []byte) *unstructured.Unstructured {
	cc := map[string]any{"url": "https://app.example/validate"}
	if len(bundle) > 0 {
		cc["caBundle"] = base64.StdEncoding.EncodeToString(bundle)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1",
		"kind":       "ValidatingWebhookConfiguration",
		"metadata":   map[string]any{"name": "app"},
		"webhooks":   []any{map[string]any{"name": "w1.app.io", "clientConfig": cc}},
	}}
}

// policies are a mapping's compiled policies; kube-apiserver admits a request
// only when every one admits it.
type policies map[string]*vaptest.Validator

func compileAll(t *testing.T, objs *Objects) policies {
	t.Helper()
	ps := policies{}
	for _, p := range objs.Policies {
		v, err := vaptest.Compile(p)
		require.NoError(t, err, p.Name)
		ps[p.Name] = v
	}
	return ps
}

// validate evaluates every policy; one whose binding names a param is
// skipped when the param is missing (withParams false), as kube-apiserver
// skips it under parameterNotFoundAction Allow.
func (ps policies) validate(t *testing.T, r vaptest.Request, withParams bool) []string {
	t.Helper()
	var msgs []string
	for name, v := range ps {
		isParam := strings.HasSuffix(name, caSuffix)
		if isParam && !withParams {
			continue
		}
		rr := r
		if !isParam {
			rr.Params = nil
		}
		msgs = append(msgs, v.Validate(t.Context(), rr)...)
	}
	return msgs
}

// BenchmarkRotation is the generated policies (owner and CA Secret param) in
// Kubernetes' VAP engine deciding one cainjector write of a configuration of
// n entries: replace (each entry set to the CA as the Secret holds it, the
// cheap path) and merge (each entry set to its stored bundle followed by the
// new CA, the path that shifts the CA's base64 in CEL). The ratio merge /
// replace is what a rotation costs kube-apiserver over an ordinary write.
func BenchmarkRotation(b *testing.B) {
	cas, _ := casByResidue(&testing.T{})
	cfg, err := policy.Load([]byte(rotationConfig))
	require.NoError(b, err)
	param := &guardapi.KeyRef{Namespace: "app-system", Name: "app-ca", Key: "ca.crt"}
	objs, err := Generate(Input{Config: cfg, CAs: map[string]CA{"app": {PEM: cas[1].PEM, Source: "Secret app-system/app-ca", Param: param}}})
	require.NoError(b, err)
	var validators []*vaptest.Validator
	for _, p := range objs.Policies {
		v, err := vaptest.Compile(p)
		require.NoError(b, err)
		validators = append(validators, v)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app-system", Name: "app-ca"}, Data: map[string][]byte{"ca.crt": cas[2].PEM}}
	cainjector := &user.DefaultInfo{Name: "system:serviceaccount:cert-manager:cert-manager-cainjector"}
	merged := append(append([]byte{}, cas[1].PEM...), cas[2].PEM...)
	for _, n := range []int{5, 50} {
		for _, write := range []struct {
			name string
			next []byte
		}{{"replace", cas[2].PEM}, {"merge", merged}} {
			b.Run(fmt.Sprintf("entries=%d/%s", n, write.name), func(b *testing.B) {
				r := vaptest.Request{Operation: admission.Update, Name: "app", User: cainjector, Params: secret,
					Object: webhookConfigN(n, write.next), Old: webhookConfigN(n, cas[1].PEM)}
				for b.Loop() {
					for _, v := range validators {
						if msgs := v.Validate(b.Context(), r); len(msgs) > 0 {
							b.Fatal(msgs)
						}
					}
				}
			})
		}
	}
}

// webhookConfigN is webhookConfig with n entries carrying bundle.
func webhookConfigN(n int, bundle []byte) *unstructured.Unstructured {
	u := webhookConfig(bundle)
	entry := u.Object["webhooks"].([]any)[0].(map[string]any)
	hooks := make([]any, n)
	for i := range hooks {
		e := map[string]any{"name": fmt.Sprintf("w%d.app.io", i), "clientConfig": entry["clientConfig"]}
		hooks[i] = e
	}
	u.Object["webhooks"] = hooks
	return u
}
