package policy

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	cabundle "github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// Test_Decide_unfilled is an entry without a caBundle at the decision
// boundary: kube-apiserver trusts its system roots for such an entry, so a
// writer may leave one empty only while cainjector is about to fill it (the
// mapping's CA is injectedByCertManager and the object carries one of
// cainjector's annotations), and never empty one that held a caBundle.
func Test_Decide_unfilled(t *testing.T) {
	f := testFixtures(t)
	cfg := mustLoad(t, decideDoc(f))
	cainjector := User{Username: sa("cert-manager", "cert-manager-cainjector")}
	koordSA := User{Username: sa("koordinator-system", "koord-manager")}
	auditedSA := User{Username: sa("audited-system", "controller")}
	admin := User{Username: "kubernetes-admin", Groups: []string{"system:masters"}}
	injectFrom := map[string]string{AnnotationInjectCAFrom: "istio-system/istiod"}
	// readable is the CA the annotation names, as the caller resolves it;
	// a fill is allowed only while it can be read.
	readable := CAResult{Set: cabundle.NewCASetFromFingerprints("Certificate istio-system/istiod", f.Owner.FP), Resolved: true}
	missing := CAResult{Err: errors.New(`Certificate istio-system/istiod: certificates.cert-manager.io "istiod" not found`), Resolved: true}
	withCA := func(in Input, ca CAResult) Input { in.CA = ca; return in }

	create := func(name string, user User, annotations map[string]string, bundles ...[]byte) Input {
		in := Input{Operation: OperationCreate, Kind: KindValidating, Name: name, User: user, Annotations: annotations}
		for i, b := range bundles {
			in.Entries = append(in.Entries, Entry{Name: []string{whA, whB}[i], CABundle: b})
		}
		return in
	}
	// update writes the object from old to next; the annotations are the
	// stored object's, as the admission path reads them on UPDATE.
	update := func(name string, user User, annotations map[string]string, old, next []Entry) Input {
		return Input{Operation: OperationUpdate, Kind: KindValidating, Name: name, User: user, Annotations: annotations, OldEntries: old, Entries: next}
	}

	tests := map[string]struct {
		input         Input
		expOutcome    Outcome
		expViolations []Violation
	}{
		"if cainjector's mapping is injectedByCertManager and the configuration names its Certificate, a CREATE with empty caBundles is allowed: the fill is coming": {
			input:      withCA(create("istio", cainjector, injectFrom, nil, []byte{}), readable),
			expOutcome: OutcomeAllow,
		},
		"if the annotation is inject-ca-from-secret, allow": {
			input:      withCA(create("istio", cainjector, map[string]string{AnnotationInjectCAFromSecret: "istio-system/istio-ca"}, nil), readable),
			expOutcome: OutcomeAllow,
		},
		"if the annotation names a Certificate that cannot be read, deny: no fill will come and the entry would trust the system roots for good": {
			input:      withCA(create("istio", cainjector, injectFrom, nil), missing),
			expOutcome: OutcomeDeny,
			expViolations: []Violation{withDetail(caUnfilled(0, whA),
				"; the fill cert-manager's cainjector would make cannot come: "+missing.Err.Error())},
		},
		"if the CA the annotation names was not resolved, deny: the fill is allowed only while its CA is known to be readable": {
			input:         create("istio", cainjector, injectFrom, nil),
			expOutcome:    OutcomeDeny,
			expViolations: []Violation{withDetail(caUnfilled(0, whA), "; the fill cert-manager's cainjector would make cannot come: the owner's CA was not resolved")},
		},
		"if the only annotation is inject-apiserver-ca, deny: the guard cannot name that CA, so it denies the fill and the entry would stay empty": {
			input:         create("istio", cainjector, map[string]string{"cert-manager.io/inject-apiserver-ca": "true"}, nil),
			expOutcome:    OutcomeDeny,
			expViolations: []Violation{caUnfilled(0, whA)},
		},
		"if an inject annotation is empty, deny: it names nothing to inject": {
			input:         create("istio", cainjector, map[string]string{AnnotationInjectCAFrom: ""}, nil),
			expOutcome:    OutcomeDeny,
			expViolations: []Violation{caUnfilled(0, whA)},
		},
		"if the configuration carries no inject annotation, deny every empty entry under injectedByCertManager too": {
			input:         create("istio", cainjector, map[string]string{"unrelated": "x"}, nil, nil),
			expOutcome:    OutcomeDeny,
			expViolations: []Violation{caUnfilled(0, whA), caUnfilled(1, whB)},
		},
		"if the mapping's CA is not injected, deny even with an inject annotation: nothing the guard trusts will fill it": {
			input:         create("koord", koordSA, injectFrom, nil),
			expOutcome:    OutcomeDeny,
			expViolations: []Violation{caUnfilled(0, whA)},
		},
		"if an audited mapping's writer creates an empty entry, audit it": {
			input:         create("audited", auditedSA, nil, nil),
			expOutcome:    OutcomeAudit,
			expViolations: []Violation{caUnfilled(0, whA)},
		},
		"if a writer adds an empty entry while a fill is coming, allow": {
			input: withCA(update("istio", cainjector, injectFrom,
				[]Entry{{Name: whA, CABundle: f.Owner.PEM}},
				[]Entry{{Name: whA, CABundle: f.Owner.PEM}, {Name: whB}}), readable),
			expOutcome: OutcomeAllow,
		},
		"if a writer renames an empty entry and no fill is coming, deny the new name": {
			input: update("koord", koordSA, nil,
				[]Entry{{Name: whA}},
				[]Entry{{Name: whB}}),
			expOutcome:    OutcomeDeny,
			expViolations: []Violation{caUnfilled(0, whB)},
		},
		"if an entry stored empty stays empty, allow: nothing changes (the window it opened stays bounded by cainjector's first fill)": {
			input: update("koord", koordSA, nil,
				[]Entry{{Name: whA}, {Name: whB}},
				[]Entry{{Name: whB}, {Name: whA}}),
			expOutcome: OutcomeAllow,
		},
		"if a writer empties a filled entry while the inject annotation is there, deny: the window ends at the first fill": {
			input: update("istio", cainjector, injectFrom,
				[]Entry{{Name: whA, CABundle: f.Owner.PEM}},
				[]Entry{{Name: whA}}),
			expOutcome:    OutcomeDeny,
			expViolations: []Violation{caEmptied(0, whA)},
		},
		"if break-glass creates empty entries, allow as before, listing nothing": {
			input:      create("koord", admin, nil, nil, nil),
			expOutcome: OutcomeBreakGlass,
		},
		"if a non-writer creates empty entries, deny not-owner alone: the subject decides it": {
			input:         create("koord", User{Username: "intruder"}, nil, nil),
			expOutcome:    OutcomeDeny,
			expViolations: []Violation{notOwnerUser("intruder", "koordinator")},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			d := cfg.Decide(&tt.input)
			assert.Equal(t, tt.expOutcome, d.Outcome)
			assert.Equal(t, tt.expViolations, d.Violations)
		})
	}
}

// Test_UnfilledEntries lists the entries with no caBundle and no stored
// entry of their name.
func Test_UnfilledEntries(t *testing.T) {
	pem := []byte("x")
	tests := map[string]struct {
		input Input
		exp   []int
	}{
		"every empty entry of a CREATE": {
			input: Input{Operation: OperationCreate, Entries: []Entry{{Name: "a"}, {Name: "b", CABundle: pem}, {Name: "c", CABundle: []byte{}}}},
			exp:   []int{0, 2},
		},
		"a new empty entry of an UPDATE, not a stored one": {
			input: Input{Operation: OperationUpdate, OldEntries: []Entry{{Name: "a"}}, Entries: []Entry{{Name: "a"}, {Name: "b"}}},
			exp:   []int{1},
		},
		"a renamed empty entry": {
			input: Input{Operation: OperationUpdate, OldEntries: []Entry{{Name: "a", CABundle: pem}}, Entries: []Entry{{Name: "b"}}},
			exp:   []int{0},
		},
		"an emptied entry is not unfilled: ChangedBundles lists it": {
			input: Input{Operation: OperationUpdate, OldEntries: []Entry{{Name: "a", CABundle: pem}}, Entries: []Entry{{Name: "a"}}},
		},
		"a DELETE lists none": {
			input: Input{Operation: OperationDelete, OldEntries: []Entry{{Name: "a"}}},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tt.exp, UnfilledEntries(&tt.input))
		})
	}
}

// withDetail is v with more said after its detail.
func withDetail(v Violation, more string) Violation {
	v.Detail += more
	return v
}
