package policy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
)

// trustKindsDoc maps a CRD's conversion webhook and an APIService to the
// owner's controller, with its CA inline, and a selector mapping that must
// not reach them.
func trustKindsDoc(f *fixtures) string {
	return header + `defaultMode: enforce
breakGlass: {groups: [system:masters]}
owners:
- name: widgets
  match:
    customResourceDefinitions: [widgets.example.com]
    apiServices: [v1beta1.metrics.example.com]
  writers: {serviceAccounts: [widgets-system/controller]}
  ca:
    pem: |
` + testpki.Indent(string(f.Inline.PEM), 6) + `
- name: labelled
  match: {labelSelector: {matchLabels: {team: a}}}
  writers: {serviceAccounts: [team-a/controller]}
  ca: {secret: {namespace: team-a, name: ca}}
`
}

// Test_Decide_trustKinds: a mapping owns the caBundle of a CRD's
// conversion webhook or of an APIService, not the object. Its writers'
// caBundles are checked as a webhook configuration's; anyone else may
// write the rest of the object (a CRD's schema is its installer's) but not
// the trust, and nobody but break-glass may set insecureSkipTLSVerify.
func Test_Decide_trustKinds(t *testing.T) {
	f := testFixtures(t)
	cfg := mustLoad(t, trustKindsDoc(f))
	owner := User{Username: sa("widgets-system", "controller")}
	installer := User{Username: sa("argocd", "argocd-application-controller")}
	admin := User{Username: "kubernetes-admin", Groups: []string{"system:masters"}}
	crd := func(op Operation, user User, old, next []Entry) Input {
		return Input{Operation: op, Kind: KindCRD, Name: "widgets.example.com", User: user, Labels: map[string]string{"team": "a"}, OldEntries: old, Entries: next}
	}
	apisvc := func(op Operation, user User, old, next []Entry) Input {
		return Input{Operation: op, Kind: KindAPIService, Name: "v1beta1.metrics.example.com", User: user, OldEntries: old, Entries: next}
	}
	conv := func(b []byte) []Entry { return []Entry{{Name: EntryConversion, CABundle: b}} }
	svc := func(b []byte, insecure bool) []Entry {
		return []Entry{{Name: EntryService, CABundle: b, InsecureSkipTLSVerify: insecure}}
	}

	tests := map[string]struct {
		input      Input
		expOutcome Outcome
		expRule    Rule
		expField   string
	}{
		"if the owner writes its CA into the conversion webhook, allow": {
			input: crd(OperationUpdate, owner, conv(nil), conv(f.Inline.PEM)), expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if the owner writes a foreign CA into the conversion webhook, deny ca-mismatch at the CRD's path": {
			input: crd(OperationUpdate, owner, conv(f.Inline.PEM), conv(f.Foreign.PEM)), expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expField: "spec.conversion.webhook.clientConfig.caBundle",
		},
		"if the installer updates the CRD and leaves the caBundle alone, allow: the schema is not the mapping's": {
			input: crd(OperationUpdate, installer, conv(f.Inline.PEM), conv(f.Inline.PEM)), expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if the installer creates the CRD with no conversion webhook, allow": {
			input: crd(OperationCreate, installer, nil, nil), expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if the installer empties the caBundle (a GitOps sync without an ignore rule), deny not-owner": {
			input: crd(OperationUpdate, installer, conv(f.Inline.PEM), conv(nil)), expOutcome: OutcomeDeny, expRule: RuleNotOwner,
		},
		"if the installer writes the owner's own CA, deny not-owner: who writes the trust is the rule": {
			input: crd(OperationUpdate, installer, conv(nil), conv(f.Inline.PEM)), expOutcome: OutcomeDeny, expRule: RuleNotOwner,
		},
		"if the installer switches conversion off (the entry that carried a caBundle is gone), deny not-owner": {
			input: crd(OperationUpdate, installer, conv(f.Inline.PEM), nil), expOutcome: OutcomeDeny, expRule: RuleNotOwner,
		},
		"if the installer creates the CRD with a conversion webhook, deny not-owner: the CREATE chooses the endpoint kube-apiserver trusts": {
			input: crd(OperationCreate, installer, nil, conv(nil)), expOutcome: OutcomeDeny, expRule: RuleNotOwner,
			expField: "userInfo",
		},
		"if the installer deletes the CRD, allow: deleting it trusts nobody": {
			input: crd(OperationDelete, installer, conv(f.Inline.PEM), nil), expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if the CRD carries a label a selector mapping selects, that mapping does not claim it": {
			input:      Input{Operation: OperationUpdate, Kind: KindCRD, Name: "other.example.com", User: installer, Labels: map[string]string{"team": "a"}, OldEntries: conv(nil), Entries: conv(f.Foreign.PEM)},
			expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if the owner writes its CA into the APIService, allow": {
			input: apisvc(OperationUpdate, owner, svc(f.Inline.PEM, false), svc(f.Inline.PEM, false)), expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if the owner writes a foreign CA into the APIService, deny ca-mismatch at spec.caBundle": {
			input: apisvc(OperationUpdate, owner, svc(f.Inline.PEM, false), svc(f.Foreign.PEM, false)), expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expField: "spec.caBundle",
		},
		"if the owner sets insecureSkipTLSVerify, deny ca-mismatch: no CA vouches for any certificate": {
			input: apisvc(OperationUpdate, owner, svc(f.Inline.PEM, false), svc(nil, true)), expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expField: "spec.caBundle",
		},
		"if another subject sets insecureSkipTLSVerify on a stored APIService without a caBundle, deny not-owner": {
			input: apisvc(OperationUpdate, installer, svc(nil, false), svc(nil, true)), expOutcome: OutcomeDeny, expRule: RuleNotOwner,
		},
		"if an APIService stays insecure, that is no change": {
			input: apisvc(OperationUpdate, installer, svc(nil, true), svc(nil, true)), expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if break-glass sets insecureSkipTLSVerify, allow and record it": {
			input: apisvc(OperationUpdate, admin, svc(f.Inline.PEM, false), svc(nil, true)), expOutcome: OutcomeBreakGlass, expRule: RuleBreakGlass,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := cfg.Decide(&tc.input)
			assert.Equal(t, tc.expOutcome, d.Outcome, "%+v", d.Violations)
			assert.Equal(t, tc.expRule, d.Rule)
			if tc.expField != "" && assert.NotEmpty(t, d.Violations) {
				assert.Equal(t, tc.expField, d.Violations[0].Field)
			}
		})
	}
}

// Test_Load_trustKinds: CRDs and APIServices are named as kube-apiserver
// names them, and claimed by one mapping each.
func Test_Load_trustKinds(t *testing.T) {
	tests := map[string]struct {
		match  string
		expErr string
	}{
		"if a CRD is named without its group, return an error saying how CRDs are named": {
			match:  `{customResourceDefinitions: [widgets]}`,
			expErr: `owners[1].match.customResourceDefinitions[0]: Invalid value: "widgets": a CustomResourceDefinition is named <plural>.<group>, such as certificates.cert-manager.io`,
		},
		"if an APIService is named without its group, return an error saying how APIServices are named": {
			match:  `{apiServices: [v1beta1]}`,
			expErr: `owners[1].match.apiServices[0]: Invalid value: "v1beta1": an APIService is named <version>.<group>, such as v1beta1.metrics.k8s.io`,
		},
		"if two mappings name one CRD, return an error naming both": {
			match:  `{customResourceDefinitions: [widgets.example.com]}`,
			expErr: `widgets.example.com\" is already owned by owners[0] (widgets)`,
		},
		"if a mapping names only an APIService, load": {
			match: `{apiServices: [v1.other.example.com]}`,
		},
	}
	f := testFixtures(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			doc := trustKindsDoc(f) + `- name: second
  match: ` + tc.match + `
  writers: {serviceAccounts: [second/controller]}
  ca: {secret: {namespace: second, name: ca}}
`
			doc = strings.Replace(doc, "- name: labelled\n  match: {labelSelector: {matchLabels: {team: a}}}\n  writers: {serviceAccounts: [team-a/controller]}\n  ca: {secret: {namespace: team-a, name: ca}}\n", "", 1)
			_, err := Load([]byte(doc))
			if tc.expErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.expErr)
		})
	}
}

// Test_EntryField: each kind's entry fields, as messages and findings name them.
func Test_EntryField(t *testing.T) {
	tests := map[string]struct {
		kind  GuardedKind
		index int
		field string
		want  string
	}{
		"a webhook configuration's entry is its webhooks[i]":   {KindMutating, 2, "clientConfig.caBundle", "webhooks[2].clientConfig.caBundle"},
		"every entry of a webhook configuration":               {KindValidating, -1, "clientConfig.caBundle", "webhooks[].clientConfig.caBundle"},
		"a CRD's entry is its conversion webhook":              {KindCRD, 0, "clientConfig.caBundle", "spec.conversion.webhook.clientConfig.caBundle"},
		"an APIService's caBundle is in its spec":              {KindAPIService, 0, "clientConfig.caBundle", "spec.caBundle"},
		"an APIService's service is in its spec":               {KindAPIService, 0, "clientConfig.service", "spec.service"},
		"an APIService's insecureSkipTLSVerify is in its spec": {KindAPIService, 0, "insecureSkipTLSVerify", "spec.insecureSkipTLSVerify"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, EntryField(tc.kind, tc.index, tc.field))
		})
	}
}
