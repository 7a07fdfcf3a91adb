package policy

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	cabundle "github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// matchDoc has name mappings per kind and overlapping selector mappings.
const matchDoc = header + `owners:
- name: koordinator
  mode: enforce
  match:
    validating: [koord-validating]
    mutating: [koord-mutating]
  writers: {serviceAccounts: [koordinator-system/koord-manager]}
  ca: {secret: {namespace: koordinator-system, name: webhook-certs}}
- name: kyverno
  match: {labelSelector: {matchLabels: {app.kubernetes.io/part-of: kyverno}}}
  writers: {serviceAccounts: [kyverno/kyverno]}
  ca: {configMap: {namespace: kyverno, name: kyverno-ca}}
- name: team-b
  mode: enforce
  match: {labelSelector: {matchExpressions: [{key: team, operator: In, values: [b]}]}}
  writers: {serviceAccounts: [team-b/controller]}
  ca: {certificate: {namespace: team-b, name: webhook}}
- name: team-a
  match: {labelSelector: {matchLabels: {team: a}}}
  writers: {serviceAccounts: [team-a/controller]}
  ca: {certificate: {namespace: team-a, name: webhook}}
`

func Test_Match(t *testing.T) {
	c := mustLoad(t, matchDoc)
	owners := c.Spec.Owners

	tests := map[string]struct {
		kind   GuardedKind
		name   string
		labels map[string]string
		exp    MatchResult
	}{
		"if a validating configuration's name is listed, return its mapping": {
			kind: KindValidating, name: "koord-validating",
			exp: MatchResult{Owner: &owners[0], Mode: guardapi.ModeEnforce, index: 0},
		},
		"if a mutating configuration's name is listed, return its mapping": {
			kind: KindMutating, name: "koord-mutating",
			exp: MatchResult{Owner: &owners[0], Mode: guardapi.ModeEnforce, index: 0},
		},
		"if a name is listed only for validating, do not match the mutating configuration of that name": {
			kind: KindMutating, name: "koord-validating",
			exp: MatchResult{index: -1},
		},
		"if a name is listed only for mutating, do not match the validating configuration of that name": {
			kind: KindValidating, name: "koord-mutating",
			exp: MatchResult{index: -1},
		},
		"if the labels match a selector, return its mapping with the default mode": {
			kind: KindMutating, name: "kyverno-resource-mutating", labels: map[string]string{"app.kubernetes.io/part-of": "kyverno", "other": "x"},
			exp: MatchResult{Owner: &owners[1], Mode: guardapi.ModeAudit, index: 1},
		},
		"if the labels match a selector with expressions, return its mapping": {
			kind: KindValidating, name: "team-b-webhook", labels: map[string]string{"team": "b"},
			exp: MatchResult{Owner: &owners[2], Mode: guardapi.ModeEnforce, index: 2},
		},
		"if nothing matches, return no owner": {
			kind: KindValidating, name: "unrelated", labels: map[string]string{"team": "c"},
			exp: MatchResult{index: -1},
		},
		"if the configuration has no labels and no listed name, return no owner": {
			kind: KindValidating, name: "unrelated",
			exp: MatchResult{index: -1},
		},
		"if two selectors match, return both mappings sorted, enforce because one claimant enforces": {
			kind: KindValidating, name: "shared", labels: map[string]string{"team": "b", "app.kubernetes.io/part-of": "kyverno"},
			exp: MatchResult{Conflicting: []string{"kyverno", "team-b"}, Mode: guardapi.ModeEnforce, index: -1},
		},
		"if two audit selectors match, return both mappings sorted in audit mode": {
			kind: KindMutating, name: "shared", labels: map[string]string{"team": "a", "app.kubernetes.io/part-of": "kyverno"},
			exp: MatchResult{Conflicting: []string{"kyverno", "team-a"}, Mode: guardapi.ModeAudit, index: -1},
		},
		"if a listed name also matches a selector, return both as conflicting": {
			kind: KindValidating, name: "koord-validating", labels: map[string]string{"team": "a"},
			exp: MatchResult{Conflicting: []string{"koordinator", "team-a"}, Mode: guardapi.ModeEnforce, index: -1},
		},
		"if a listed name and two selectors match, return all three sorted": {
			kind: KindMutating, name: "koord-mutating", labels: map[string]string{"team": "a", "app.kubernetes.io/part-of": "kyverno"},
			exp: MatchResult{Conflicting: []string{"koordinator", "kyverno", "team-a"}, Mode: guardapi.ModeEnforce, index: -1},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, test.exp, c.Match(test.kind, test.name, test.labels))
		})
	}
}

func Test_InlineCA(t *testing.T) {
	f := testFixtures(t)
	c := mustLoad(t, header+`owners:
- name: legacy
  match: {validating: [legacy]}
  writers: {users: [legacy-operator]}
  ca:
    pem: |
`+testpki.Indent(string(slices.Concat(f.Inline.PEM, f.OwnerNew.PEM)), 6)+`
- name: koordinator
  match: {validating: [koord]}
  writers: {serviceAccounts: [koordinator-system/koord-manager]}
  ca: {secret: {namespace: koordinator-system, name: webhook-certs}}
`)

	tests := map[string]struct {
		name   string
		expOK  bool
		expSet cabundle.CASet
	}{
		"if the owner's CA is inline pem, return its set": {
			name: "legacy", expOK: true,
			// The set keeps the inline bytes too (policy shape copies them).
			expSet: func() cabundle.CASet {
				set, err := cabundle.NewCASet("inline pem of owners[legacy]", slices.Concat(f.Inline.PEM, f.OwnerNew.PEM))
				require.NoError(t, err)
				return set
			}(),
		},
		"if the owner's CA comes from a Secret, return nothing": {
			name: "koord",
		},
		"if nothing matches, return nothing": {
			name: "unrelated",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			set, ok := c.InlineCA(c.Match(KindValidating, test.name, nil))
			assert.Equal(t, test.expOK, ok)
			assert.Equal(t, test.expSet.Source, set.Source)
			assert.Equal(t, test.expSet.Fingerprints(), set.Fingerprints())
		})
	}
}
