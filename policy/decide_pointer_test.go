package policy

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	cabundle "github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// pointerDoc maps one webhook configuration and one CRD and APIService
// each under an unpinned and a pinned injectedByCertManager source, and a
// configuration whose CA is a Secret.
const pointerDoc = header + `defaultMode: enforce
breakGlass: {groups: [system:masters]}
owners:
- name: app
  match: {validating: [app]}
  writers: {serviceAccounts: [app-system/app-controller]}
  ca: {injectedByCertManager: {}}
- name: app-pinned
  match:
    validating: [app-pinned]
    customResourceDefinitions: [widgets.example.com]
    apiServices: [v1beta1.metrics.example.com]
  writers: {serviceAccounts: [app-system/app-controller]}
  ca: {injectedByCertManager: {certificate: {namespace: app-system, name: app-serving}}}
- name: app-crds
  match: {customResourceDefinitions: [gadgets.example.com]}
  writers: {serviceAccounts: [app-system/app-controller]}
  ca: {injectedByCertManager: {}}
- name: app-secret
  match: {validating: [app-secret]}
  writers: {serviceAccounts: [app-system/app-controller]}
  ca: {secret: {namespace: app-system, name: app-ca}}
`

// Test_Decide_pointer: the CA pointer (cainjector's annotations) and the
// endpoint are part of the trust. Under injectedByCertManager the pointer
// chooses the CA the guard checks against, so nobody but break-glass may
// move it once the object exists, and under a pin it must be the pin; a
// subject that may not write the trust of a CRD or APIService may neither
// move its endpoint nor its pointer.
func Test_Decide_pointer(t *testing.T) {
	f := testFixtures(t)
	cfg := mustLoad(t, pointerDoc)
	writer := User{Username: sa("app-system", "app-controller")}
	cainjector := User{Username: sa("cert-manager", "cert-manager-cainjector")}
	installer := User{Username: sa("argocd", "argocd-application-controller")}
	admin := User{Username: "kubernetes-admin", Groups: []string{"system:masters"}}
	pin := map[string]string{AnnotationInjectCAFrom: "app-system/app-serving"}
	other := map[string]string{AnnotationInjectCAFrom: "app-system/mine"}
	bogus := map[string]string{AnnotationInjectCAFrom: "nowhere/nothing"}
	pinCA := CAResult{Set: cabundle.NewCASetFromFingerprints("pinned Certificate app-system/app-serving", f.Owner.FP), Resolved: true}
	missing := CAResult{Err: errors.New(`Certificate app-system/app-serving: not found`), Resolved: true}

	withCA := func(in Input, ca CAResult) Input { in.CA = ca; return in }
	vwc := func(op Operation, name string, user User, stored, written map[string]string) Input {
		in := Input{Operation: op, Kind: KindValidating, Name: name, User: user, Annotations: stored, UpdatedAnnotations: written,
			Entries: []Entry{{Name: whA, CABundle: f.Owner.PEM}}, CA: pinCA}
		if op == OperationCreate {
			in.Annotations, in.UpdatedAnnotations = written, nil
		} else {
			in.OldEntries = in.Entries
		}
		return in
	}
	svcA := Endpoint{Namespace: "app-system", Name: "app-webhook", Path: "/convert", Port: 443}
	svcB := Endpoint{Namespace: "app-system", Name: "other", Path: "/convert", Port: 443}
	evil := Endpoint{URL: "https://evil.example.com/convert"}
	conv := func(b []byte, e Endpoint) []Entry {
		return []Entry{{Name: EntryConversion, CABundle: b, Endpoint: e}}
	}
	crd := func(op Operation, name string, user User, stored, written map[string]string, old, next []Entry) Input {
		in := Input{Operation: op, Kind: KindCRD, Name: name, User: user, Annotations: stored, UpdatedAnnotations: written, OldEntries: old, Entries: next}
		if op == OperationCreate {
			in.Annotations, in.UpdatedAnnotations = written, nil
		}
		return in
	}
	apisvcCreate := func(user User, written map[string]string, at Endpoint) Input {
		return Input{Operation: OperationCreate, Kind: KindAPIService, Name: "v1beta1.metrics.example.com", User: user, Annotations: written,
			Entries: []Entry{{Name: EntryService, Endpoint: at}}}
	}
	apisvc := func(user User, old, next Endpoint) Input {
		return Input{Operation: OperationUpdate, Kind: KindAPIService, Name: "v1beta1.metrics.example.com", User: user, Annotations: pin, UpdatedAnnotations: pin,
			OldEntries: []Entry{{Name: EntryService, CABundle: f.Owner.PEM, Endpoint: old}},
			Entries:    []Entry{{Name: EntryService, CABundle: f.Owner.PEM, Endpoint: next}}}
	}

	tests := map[string]struct {
		input      Input
		expOutcome Outcome
		expRule    Rule
		expField   string
	}{
		// A writer and the pointer, webhook configurations.
		"if a writer re-points inject-ca-from on an unpinned mapping, deny: two steps (annotation, then cainjector's write) must not pass where one is denied": {
			input: vwc(OperationUpdate, "app", writer, pin, other), expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expField: "metadata.annotations[cert-manager.io/inject-ca-from]",
		},
		"if a writer removes the pointer, deny: that is a move too": {
			input: vwc(OperationUpdate, "app", writer, pin, map[string]string{}), expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expField: "metadata.annotations[cert-manager.io/inject-ca-from]",
		},
		"if a writer adds inject-apiserver-ca beside the pointer, deny": {
			input:      vwc(OperationUpdate, "app", writer, pin, map[string]string{AnnotationInjectCAFrom: "app-system/app-serving", AnnotationInjectAPIServerCA: "true"}),
			expOutcome: OutcomeDeny, expRule: RuleCAMismatch, expField: "metadata.annotations[cert-manager.io/inject-apiserver-ca]",
		},
		"if a writer updates the object and keeps the pointer, allow": {
			input:      vwc(OperationUpdate, "app", writer, pin, map[string]string{AnnotationInjectCAFrom: "app-system/app-serving", "unrelated": "x"}),
			expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if a writer creates an unpinned mapping's configuration, allow its pointer: the creator chooses it": {
			input: vwc(OperationCreate, "app", writer, nil, other), expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if a writer creates a pinned mapping's configuration pointing elsewhere, deny": {
			input: vwc(OperationCreate, "app-pinned", writer, nil, other), expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expField: "metadata.annotations[cert-manager.io/inject-ca-from]",
		},
		"if a writer creates a pinned mapping's configuration pointing at the pin, allow": {
			input: vwc(OperationCreate, "app-pinned", writer, nil, pin), expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if a writer re-points a pinned mapping's configuration, deny": {
			input: vwc(OperationUpdate, "app-pinned", writer, pin, other), expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expField: "metadata.annotations[cert-manager.io/inject-ca-from]",
		},
		"if a writer points a pinned mapping's configuration back at the pin, allow": {
			input: vwc(OperationUpdate, "app-pinned", writer, other, pin), expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if cainjector re-points, deny it as any writer": {
			input: vwc(OperationUpdate, "app", cainjector, pin, other), expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expField: "metadata.annotations[cert-manager.io/inject-ca-from]",
		},
		"if break-glass re-points, allow": {
			input: vwc(OperationUpdate, "app", admin, pin, other), expOutcome: OutcomeBreakGlass, expRule: RuleBreakGlass,
		},
		"if the mapping's CA is a Secret, a writer may change the annotation: it chooses nothing the guard accepts": {
			input: vwc(OperationUpdate, "app-secret", writer, pin, other), expOutcome: OutcomeAllow, expRule: RuleNone,
		},

		// A subject that may not write the trust of a CRD or APIService.
		"if the installer moves a CRD's conversion webhook to another Service, deny not-owner": {
			input:      crd(OperationUpdate, "widgets.example.com", installer, pin, pin, conv(f.Owner.PEM, svcA), conv(f.Owner.PEM, svcB)),
			expOutcome: OutcomeDeny, expRule: RuleNotOwner,
		},
		"if the installer moves a CRD's conversion webhook to a URL, deny not-owner": {
			input:      crd(OperationUpdate, "widgets.example.com", installer, pin, pin, conv(f.Owner.PEM, svcA), conv(f.Owner.PEM, evil)),
			expOutcome: OutcomeDeny, expRule: RuleNotOwner,
		},
		"if the installer changes the CRD's schema or labels (same endpoint, caBundle and pointer), allow": {
			input:      crd(OperationUpdate, "widgets.example.com", installer, pin, map[string]string{AnnotationInjectCAFrom: "app-system/app-serving", "helm.sh/chart": "2"}, conv(f.Owner.PEM, svcA), conv(f.Owner.PEM, svcA)),
			expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if the installer switches a CRD from strategy None to a conversion webhook, deny not-owner: the endpoint is new": {
			input:      crd(OperationUpdate, "widgets.example.com", installer, pin, pin, nil, conv(nil, svcA)),
			expOutcome: OutcomeDeny, expRule: RuleNotOwner,
		},
		"if the installer re-points a CRD's annotation, deny not-owner": {
			input:      crd(OperationUpdate, "gadgets.example.com", installer, pin, other, conv(f.Owner.PEM, svcA), conv(f.Owner.PEM, svcA)),
			expOutcome: OutcomeDeny, expRule: RuleNotOwner,
		},
		"if the installer annotates a CRD bogusly and switches it to a URL without caBundle, deny not-owner": {
			input:      crd(OperationUpdate, "gadgets.example.com", installer, nil, bogus, nil, conv(nil, evil)),
			expOutcome: OutcomeDeny, expRule: RuleNotOwner,
		},
		"if the installer creates an unpinned mapping's CRD with a pointer of its choosing and an empty entry, deny not-owner": {
			input:      crd(OperationCreate, "gadgets.example.com", installer, nil, other, nil, conv(nil, svcA)),
			expOutcome: OutcomeDeny, expRule: RuleNotOwner,
		},
		"if the installer creates a pinned mapping's CRD pointing at the pin with an empty entry, deny not-owner: the CREATE chooses the conversion webhook's endpoint": {
			input:      withCA(crd(OperationCreate, "widgets.example.com", installer, nil, pin, nil, conv(nil, svcA)), pinCA),
			expOutcome: OutcomeDeny, expRule: RuleNotOwner, expField: "userInfo",
		},
		"if the installer recreates a pinned mapping's APIService at its own Service, pointing at the pin with an empty caBundle, deny not-owner": {
			input:      withCA(apisvcCreate(installer, pin, svcB), pinCA),
			expOutcome: OutcomeDeny, expRule: RuleNotOwner, expField: "userInfo",
		},
		"if the installer deletes a pinned mapping's APIService, allow: an object that is gone trusts nobody": {
			input:      Input{Operation: OperationDelete, Kind: KindAPIService, Name: "v1beta1.metrics.example.com", User: installer, Annotations: pin, OldEntries: []Entry{{Name: EntryService, CABundle: f.Owner.PEM, Endpoint: svcA}}},
			expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if a writer creates a pinned mapping's APIService at its Service, pointing at the pin with an empty caBundle, allow while the pinned CA can be read": {
			input:      withCA(apisvcCreate(writer, pin, svcA), pinCA),
			expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if a writer creates a pinned mapping's CRD pointing at the pin while the pinned CA cannot be read, deny the empty entry": {
			input:      withCA(crd(OperationCreate, "widgets.example.com", writer, nil, pin, nil, conv(nil, svcA)), missing),
			expOutcome: OutcomeDeny, expRule: RuleCAMismatch, expField: "spec.conversion.webhook.clientConfig.caBundle",
		},
		"if break-glass recreates an APIService at another Service, allow": {
			input: withCA(apisvcCreate(admin, pin, svcB), pinCA), expOutcome: OutcomeBreakGlass, expRule: RuleBreakGlass,
		},
		"if the installer creates a pinned mapping's CRD pointing elsewhere, deny not-owner": {
			input:      withCA(crd(OperationCreate, "widgets.example.com", installer, nil, bogus, nil, conv(nil, svcA)), pinCA),
			expOutcome: OutcomeDeny, expRule: RuleNotOwner,
		},
		"if the writer moves its own CRD's conversion webhook, allow: the endpoint is its": {
			input:      crd(OperationUpdate, "widgets.example.com", writer, pin, pin, conv(f.Owner.PEM, svcA), conv(f.Owner.PEM, svcB)),
			expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if the installer moves an APIService to another Service, deny not-owner": {
			input: apisvc(installer, svcA, svcB), expOutcome: OutcomeDeny, expRule: RuleNotOwner,
		},
		"if the installer updates an APIService and keeps its Service (a priority change), allow": {
			input: apisvc(installer, svcA, svcA), expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if break-glass moves an APIService, allow": {
			input: apisvc(admin, svcA, evil), expOutcome: OutcomeBreakGlass, expRule: RuleBreakGlass,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			d := cfg.Decide(&tt.input)
			assert.Equal(t, tt.expOutcome, d.Outcome, d.Message())
			assert.Equal(t, tt.expRule, d.Rule, d.Message())
			if tt.expField != "" && assert.NotEmpty(t, d.Violations) {
				assert.Equal(t, tt.expField, d.Violations[0].Field)
			}
		})
	}
}

// Test_PinOf: a pin is the one annotation cainjector reads for it.
func Test_PinOf(t *testing.T) {
	cfg := mustLoad(t, pointerDoc)
	pinned, ok := PinOf(cfg.Spec.Owners[1].CA)
	assert.True(t, ok)
	assert.Equal(t, Pointer{CAFrom: "app-system/app-serving"}, pinned)
	_, ok = PinOf(cfg.Spec.Owners[0].CA)
	assert.False(t, ok, "an unpinned injectedByCertManager has no pin")
	_, ok = PinOf(cfg.Spec.Owners[3].CA)
	assert.False(t, ok, "a Secret source has no pin")
}
