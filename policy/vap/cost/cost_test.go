package cost

import (
	"encoding/base64"
	"fmt"
	"slices"
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
	"github.com/webhook-guard/webhook-guard/policy/vap"
	"github.com/webhook-guard/webhook-guard/policy/vap/vaptest"
)

const config = `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
owners:
  - name: app
    mode: enforce
    match: {validating: [app]}
    writers: {serviceAccounts: [cert-manager/cert-manager-cainjector]}
    ca: {secret: {namespace: app-system, name: app-ca}}
`

var cainjector = &user.DefaultInfo{Name: "system:serviceaccount:cert-manager:cert-manager-cainjector"}

// configuration is the validating configuration "app" with n entries,
// entry i holding bundles[i % len(bundles)].
func configuration(n int, bundles ...[]byte) *unstructured.Unstructured {
	hooks := make([]any, n)
	for i := range hooks {
		hooks[i] = map[string]any{"name": fmt.Sprintf("w%d.app.io", i), "clientConfig": map[string]any{
			"url": "https://app.example/validate", "caBundle": base64.StdEncoding.EncodeToString(bundles[i%len(bundles)])}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1",
		"kind":       "ValidatingWebhookConfiguration",
		"metadata":   map[string]any{"name": "app"},
		"webhooks":   hooks,
	}}
}

func Test_Check(t *testing.T) {
	cfg, err := policy.Load([]byte(config))
	require.NoError(t, err)
	owner := testpki.MustCA(t, "app-ca")
	previous := testpki.MustCA(t, "app-ca-previous")
	uniform := [][]byte{owner.PEM}
	// mixed: every other entry still holds the previous CA before the
	// owner's, so a merge is not one bundle written into every entry.
	mixed := [][]byte{owner.PEM, slices.Concat(previous.PEM, owner.PEM)}
	param := &guardapi.KeyRef{Namespace: "app-system", Name: "app-ca", Key: "ca.crt"}
	tests := map[string]struct {
		entries int
		bundles [][]byte
		param   *guardapi.KeyRef
		// refused is whether each of Writes is refused.
		refused map[Write]bool
		// costliest is the expression that costs most, per write.
		costliest map[Write]string
	}{
		"if the configuration has 50 entries, no write comes near the limit": {
			entries: 50, bundles: mixed, refused: map[Write]bool{Merge: false, Merged: false},
			costliest: map[Write]string{Merge: "variables.badWebhooks", Merged: "matchConditions[changes-trust]"},
		},
		"if every entry holds one bundle, the merge is skipped by the matchCondition, under the limit at 250 entries": {
			entries: 250, bundles: uniform, refused: map[Write]bool{Merge: false, Merged: false},
			costliest: map[Write]string{Merge: "matchConditions[changes-trust]", Merged: "matchConditions[changes-trust]"},
		},
		"if the entries hold different bundles, the merge of 250 is well under the limit: each entry is looked up through a map": {
			entries: 250, bundles: mixed, refused: map[Write]bool{Merge: false, Merged: false},
			costliest: map[Write]string{Merge: "variables.badWebhooks", Merged: "matchConditions[changes-trust]"},
		},
		"if the entries hold different bundles, the merge of 1300 is over the limit and an ordinary write is not": {
			entries: 1300, bundles: mixed, refused: map[Write]bool{Merge: true, Merged: false},
			costliest: map[Write]string{Merge: "variables.badWebhooks", Merged: "matchConditions[changes-trust]"},
		},
		"if the CA Secret is the policy's param and every entry holds one bundle, its -ca policy skips the uniform rotation, under the limit at 250 entries": {
			entries: 250, bundles: uniform, param: param, refused: map[Write]bool{Merge: false, Merged: false},
			costliest: map[Write]string{Merge: "matchConditions[changes-trust]", Merged: "matchConditions[changes-trust]"},
		},
		"if the CA Secret is the policy's param and the entries hold different bundles, the merge of 1300 is over the limit": {
			entries: 1300, bundles: mixed, param: param, refused: map[Write]bool{Merge: true, Merged: false},
			costliest: map[Write]string{Merge: "variables.badWebhooks", Merged: "matchConditions[changes-trust]"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := New(cfg, "app", vap.CA{PEM: owner.PEM, Source: "Secret app-system/app-ca", Param: tc.param})
			require.NoError(t, err)
			rs, err := c.Check(t.Context(), configuration(tc.entries, tc.bundles...))
			require.NoError(t, err)
			require.Len(t, rs, len(Writes))
			for _, r := range rs {
				t.Logf("%d entries, %s: %s, %s in %s, total %d", tc.entries, r.Write, r, r.Expression, r.Policy, r.Total)
				assert.Equal(t, tc.entries, r.Entries)
				assert.Equal(t, tc.refused[r.Write], r.Refused(), r.Write)
				assert.Equal(t, tc.refused[r.Write], r.Ratio() > 1, r.Write)
				assert.Equal(t, tc.costliest[r.Write], r.Expression, r.Write)
			}
		})
	}
}

// Test_Check_agreesWithKubeAPIServer: the write Check reports over the
// limit is the one kube-apiserver's own engine, with its own limits,
// refuses with "actual cost limit exceeded"; the one under it is admitted
// (it is a valid rotation, not a denial that would cost less).
func Test_Check_agreesWithKubeAPIServer(t *testing.T) {
	cfg, err := policy.Load([]byte(config))
	require.NoError(t, err)
	owner := testpki.MustCA(t, "app-ca")
	previous := testpki.MustCA(t, "app-ca-previous")
	for entries, refused := range map[int]bool{50: false, 1300: true} {
		t.Run(fmt.Sprint(entries), func(t *testing.T) {
			c, err := New(cfg, "app", vap.CA{PEM: owner.PEM, Source: "Secret app-system/app-ca"})
			require.NoError(t, err)
			stored := configuration(entries, owner.PEM, slices.Concat(previous.PEM, owner.PEM))
			rs, err := c.Check(t.Context(), stored)
			require.NoError(t, err)
			require.Equal(t, refused, rs[0].Refused())

			objs, err := vap.Generate(vap.Input{Config: cfg, CAs: map[string]vap.CA{"app": {PEM: c.newCA, Source: "Secret app-system/app-ca"}}})
			require.NoError(t, err)
			merged, err := merge(stored, c.newCA)
			require.NoError(t, err)
			var msgs []string
			for _, p := range objs.Policies {
				v, err := vaptest.Compile(p)
				require.NoError(t, err)
				msgs = append(msgs, v.Validate(t.Context(), vaptest.Request{Operation: admission.Update, Name: "app", User: cainjector, Object: merged, Old: stored,
					Params: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app-system", Name: "app-ca"}}})...)
			}
			if !refused {
				assert.Empty(t, msgs)
				return
			}
			require.Len(t, msgs, 1)
			assert.Contains(t, msgs[0], `composited variable "badWebhooks" fails to evaluate: operation cancelled: actual cost limit exceeded`)
		})
	}
}

// Test_Check_sizeBound: the owner's merge stays under the margin of the
// limit up to 512 KiB of caBundle text (hundreds of entries; a product
// writes a few dozen), whatever the CA's size, because each entry costs
// its own bytes and a map lookup; and a writer's write of every entry as
// stored plus a foreign CA in one entry is denied ca-mismatch, decided
// within the limit, never left to an evaluation that runs out of budget.
func Test_Check_sizeBound(t *testing.T) {
	cfg, err := policy.Load([]byte(config))
	require.NoError(t, err)
	const bound = 512 << 10
	for _, size := range []int{538, 1200, 2000} {
		t.Run(fmt.Sprintf("CA of %d bytes", size), func(t *testing.T) {
			ca, err := NewCA(size)
			require.NoError(t, err)
			previous, err := NewCA(size)
			require.NoError(t, err)
			foreign, err := NewCA(size)
			require.NoError(t, err)
			mixed := [][]byte{ca, slices.Concat(previous, ca)}
			perPair := base64.StdEncoding.EncodedLen(len(mixed[0])) + base64.StdEncoding.EncodedLen(len(mixed[1]))
			entries := 2 * bound / perPair
			stored := configuration(entries, mixed...)

			c, err := New(cfg, "app", vap.CA{PEM: ca, Source: "Secret app-system/app-ca"})
			require.NoError(t, err)
			rs, err := c.Check(t.Context(), stored)
			require.NoError(t, err)
			for _, r := range rs {
				t.Logf("%d entries: %s: %s", entries, r.Write, r)
				assert.Less(t, r.Ratio(), 0.8, "%s of %d entries", r.Write, entries)
			}

			objs, err := vap.Generate(vap.Input{Config: cfg, CAs: map[string]vap.CA{"app": {PEM: ca, Source: "Secret app-system/app-ca"}}})
			require.NoError(t, err)
			v, err := vaptest.Compile(objs.Policies[0])
			require.NoError(t, err)
			written := stored.DeepCopy()
			hooks, _, _ := unstructured.NestedSlice(written.Object, "webhooks")
			last := hooks[len(hooks)-1].(map[string]any)["clientConfig"].(map[string]any)
			last["caBundle"] = base64.StdEncoding.EncodeToString(slices.Concat(mixed[(len(hooks)-1)%2], foreign))
			require.NoError(t, unstructured.SetNestedSlice(written.Object, hooks, "webhooks"))
			msgs := v.Validate(t.Context(), vaptest.Request{Operation: admission.Update, Name: "app", User: cainjector, Object: written, Old: stored})
			require.Len(t, msgs, 1)
			assert.Contains(t, msgs[0], "ca-mismatch")
			assert.NotContains(t, msgs[0], "cost limit")
		})
	}
}

func Test_NewCA(t *testing.T) {
	for _, size := range []int{0, 538, 1200, 2000} {
		ca, err := NewCA(size)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, len(ca), size)
		assert.Less(t, len(ca), max(size, 600)*11/10, "a CA of the size class of %d bytes", size)
	}
}

// Test_measure_writeThatChangesNoEntry: a writer's write that changes no
// entry (a label) is skipped on its generation, and what it costs does not
// grow with the entries or depend on what the caBundles hold, under either
// layout of the CA.
func Test_measure_writeThatChangesNoEntry(t *testing.T) {
	cfg, err := policy.Load([]byte(config))
	require.NoError(t, err)
	owner, previous := testpki.MustCA(t, "app-ca"), testpki.MustCA(t, "app-ca-previous")
	merged := slices.Concat(previous.PEM, owner.PEM)
	param := &guardapi.KeyRef{Namespace: "app-system", Name: "app-ca", Key: "ca.crt"}
	relabel := func(obj *unstructured.Unstructured) *unstructured.Unstructured {
		out := obj.DeepCopy()
		out.SetLabels(map[string]string{"example.io/touched": "yes"})
		return out
	}
	for name, p := range map[string]*guardapi.KeyRef{"CA literal": nil, "CA Secret as param": param} {
		t.Run(name, func(t *testing.T) {
			c, err := New(cfg, "app", vap.CA{PEM: owner.PEM, Source: "Secret app-system/app-ca", Param: p})
			require.NoError(t, err)
			costs := map[int]int64{}
			for _, n := range []int{5, 250} {
				stored := configuration(n, merged, previous.PEM)
				for _, pol := range c.policies {
					r, err := c.measure(t.Context(), pol, relabel(stored), stored)
					require.NoError(t, err)
					assert.Equal(t, "matchConditions[changes-trust]", r.Expression, "%s, %d entries: only the skip is evaluated", pol.name, n)
					assert.Zero(t, r.Total, "%s, %d entries: no variable is evaluated", pol.name, n)
					costs[n] += r.Cost
				}
			}
			t.Logf("a label write costs %d at 5 entries, %d at 250", costs[5], costs[250])
			assert.Equal(t, costs[5], costs[250])
		})
	}
}
