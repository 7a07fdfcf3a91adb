package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	cabundle "github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// decideDoc is the configuration most Test_Decide cases run against:
// defaultMode audit, unmanaged allow, system:masters break-glass, and one
// mapping per CA source kind and matching style.
func decideDoc(f *fixtures) string {
	return header + `defaultMode: audit
breakGlass: {groups: [system:masters]}
owners:
- name: koordinator
  mode: enforce
  match: {validating: [koord], mutating: [koord]}
  writers:
    serviceAccounts: [koordinator-system/koord-manager]
    groups: [koord-admins]
  ca: {secret: {namespace: koordinator-system, name: webhook-certs}}
- name: audited
  match: {validating: [audited], mutating: [audited]}
  writers: {serviceAccounts: [audited-system/controller]}
  ca: {configMap: {namespace: audited-system, name: ca}}
- name: legacy
  mode: enforce
  match: {validating: [legacy], mutating: [legacy]}
  writers: {users: [legacy-operator]}
  ca:
    pem: |
` + testpki.Indent(string(f.Inline.PEM), 6) + `
- name: istio
  mode: enforce
  match: {validating: [istio], mutating: [istio]}
  ca: {injectedByCertManager: {}}
- name: team-a
  match: {labelSelector: {matchLabels: {team: a}}}
  writers: {serviceAccounts: [team-a/controller]}
  ca: {certificate: {namespace: team-a, name: webhook}}
- name: shared
  mode: enforce
  match: {labelSelector: {matchExpressions: [{key: shared, operator: Exists}]}}
  writers: {serviceAccounts: [shared/controller]}
  ca: {issuer: {kind: ClusterIssuer, name: shared-ca}}
`
}

// strictDoc flips the defaults: defaultMode enforce, unmanaged audit, and a
// non-default cainjector service account.
const strictDoc = header + `defaultMode: enforce
unmanaged: audit
certManager: {caInjectorServiceAccount: cert-manager-system/injector}
owners:
- name: relaxed
  mode: audit
  match: {validating: [relaxed], mutating: [relaxed]}
  writers: {serviceAccounts: [relaxed/controller]}
  ca: {secret: {namespace: relaxed, name: ca}}
- name: strict
  match: {validating: [strict], mutating: [strict]}
  writers: {serviceAccounts: [strict/controller]}
  ca: {secret: {namespace: strict, name: ca}}
- name: istio
  match: {validating: [istio], mutating: [istio]}
  ca: {injectedByCertManager: {}}
`

// Expected violations, spelled out once so that every case compares the
// whole text exactly.

func notOwnerSA(ns, name, mapping string) Violation {
	return Violation{
		Rule:   RuleNotOwner,
		Field:  "userInfo",
		Detail: fmt.Sprintf("%q is not a writer", sa(ns, name)),
		Hint:   fmt.Sprintf("if it should own this configuration, add %s/%s to owners[%s].writers.serviceAccounts", ns, name, mapping),
	}
}

func notOwnerUser(user, mapping string) Violation {
	return Violation{
		Rule:   RuleNotOwner,
		Field:  "userInfo",
		Detail: fmt.Sprintf("%q is not a writer", user),
		Hint:   fmt.Sprintf("if it should own this configuration, add %q to owners[%s].writers.users", user, mapping),
	}
}

func caMismatch(index int, webhook, source string, expected, found []string) Violation {
	return Violation{
		Rule:     RuleCAMismatch,
		Field:    fmt.Sprintf("webhooks[%d].clientConfig.caBundle", index),
		Webhook:  webhook,
		Detail:   fmt.Sprintf("%d certificate(s) neither in the owner's CA set from %s nor already in this entry's stored caBundle", len(found), source),
		Summary:  "certificate(s) not in the owner's CA set",
		Hint:     "write the owner's CA (a rotation may keep the certificates the entry already holds); if the owner's CA changed, update its source first",
		Expected: expected,
		Found:    found,
	}
}

func caEmptied(index int, webhook string) Violation {
	return Violation{
		Rule:    RuleCAMismatch,
		Field:   fmt.Sprintf("webhooks[%d].clientConfig.caBundle", index),
		Webhook: webhook,
		Detail:  "a non-empty caBundle was emptied; kube-apiserver would trust its system roots for the webhook instead of the owner's CA",
		Hint:    "write the owner's CA instead of removing it",
	}
}

func caUnfilled(index int, webhook string) Violation {
	return Violation{
		Rule:    RuleCAMismatch,
		Field:   fmt.Sprintf("webhooks[%d].clientConfig.caBundle", index),
		Webhook: webhook,
		Detail:  "the new entry has no caBundle; kube-apiserver would trust its system roots for it, so any host with a publicly trusted certificate could serve it",
		Summary: "the new entry has no caBundle; kube-apiserver would trust its system roots",
		Hint:    UnfilledHint,
	}
}

// sharedTeamAAmbiguous: the selectors of mappings shared and team-a both match.
var sharedTeamAAmbiguous = Violation{
	Rule:   RuleAmbiguousOwner,
	Field:  "metadata.labels",
	Detail: `the label selectors of mappings "shared", "team-a" all match this configuration; single ownership cannot be decided`,
	Hint:   "narrow the labelSelector of all but one of these mappings",
}

func caInvalid(index int, webhook, reason string) Violation {
	return Violation{
		Rule:    RuleCAMismatch,
		Field:   fmt.Sprintf("webhooks[%d].clientConfig.caBundle", index),
		Webhook: webhook,
		Detail:  "the caBundle " + reason,
		Hint:    "caBundle must hold the owner's CA certificates in PEM",
	}
}

func caUnavailable(index int, webhook, cause string) Violation {
	return Violation{
		Rule:    RuleCAUnavailable,
		Field:   fmt.Sprintf("webhooks[%d].clientConfig.caBundle", index),
		Webhook: webhook,
		Detail:  "cannot verify the new caBundle: " + cause + "; caBundle changes fail closed until the source can be read",
		Hint:    "fix the CA source named above; updates that leave caBundle alone are not affected",
	}
}

const (
	whA = "a.koord.io"
	whB = "b.koord.io"
)

func Test_Decide(t *testing.T) {
	f := testFixtures(t)
	cfg := mustLoad(t, decideDoc(f))
	strictCfg := mustLoad(t, strictDoc)

	koordSource := "secret koordinator-system/webhook-certs"
	koordCA := CAResult{Set: cabundle.NewCASetFromFingerprints(koordSource, f.Owner.FP), Resolved: true}
	rotatingCA := CAResult{Set: cabundle.NewCASetFromFingerprints(koordSource, f.Owner.FP, f.OwnerNew.FP), Resolved: true}
	sourceErr := errors.New(`secret koordinator-system/webhook-certs: secrets "webhook-certs" not found`)

	koordSA := User{Username: sa("koordinator-system", "koord-manager"), Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	intruder := User{Username: sa("kube-system", "intruder"), Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	admin := User{Username: "kubernetes-admin", Groups: []string{"system:masters", "system:authenticated"}}

	// update writes webhooks over old; both have entries whA and whB.
	update := func(name string, user User, old, next [2][]byte, ca CAResult) Input {
		return Input{
			Operation:  OperationUpdate,
			Name:       name,
			User:       user,
			OldEntries: []Entry{{Name: whA, CABundle: old[0]}, {Name: whB, CABundle: old[1]}},
			Entries:    []Entry{{Name: whA, CABundle: next[0]}, {Name: whB, CABundle: next[1]}},
			CA:         ca,
		}
	}
	same := [2][]byte{f.Owner.PEM, f.Owner.PEM}
	empty := [2][]byte{}

	tests := map[string]struct {
		// config is cfg unless set.
		config *Mappings
		input  Input

		expMapping    string
		expMode       guardapi.Mode
		expOutcome    Outcome
		expRule       Rule
		expViolations []Violation
		expChanges    []string
		expRecord     bool
	}{
		// Owners writing their own CA.
		"if the owner writes its own CA, allow and do not record": {
			input:      update("koord", koordSA, empty, same, koordCA),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeAllow, expRule: RuleNone,
			expChanges: []string{"webhooks[0].clientConfig.caBundle", "webhooks[1].clientConfig.caBundle"},
		},
		"if the subject is a writer through one of its groups, allow": {
			input:      update("koord", User{Username: "alice", Groups: []string{"system:authenticated", "koord-admins"}}, empty, same, koordCA),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeAllow, expRule: RuleNone,
			expChanges: []string{"webhooks[0].clientConfig.caBundle", "webhooks[1].clientConfig.caBundle"},
		},
		"if the owner rotates to a bundle of old and new CA and both are in the CA set, allow": {
			input:      update("koord", koordSA, same, [2][]byte{slices.Concat(f.Owner.PEM, f.OwnerNew.PEM), slices.Concat(f.OwnerNew.PEM, f.Owner.PEM)}, rotatingCA),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeAllow, expRule: RuleNone,
			expChanges: []string{"webhooks[0].clientConfig.caBundle", "webhooks[1].clientConfig.caBundle"},
		},
		"if the owner updates without touching caBundle and the CA is not resolved, allow: the CA is not needed": {
			input:      update("koord", koordSA, same, same, CAResult{}),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if the owner updates without touching caBundle and the CA source fails, allow": {
			input:      update("koord", koordSA, same, same, CAResult{Err: sourceErr, Resolved: true}),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if the owner creates the configuration with empty caBundles and no fill is coming, deny: kube-apiserver would trust its system roots": {
			input:      Input{Operation: OperationCreate, Name: "koord", User: koordSA, Entries: []Entry{{Name: whA}, {Name: whB, CABundle: []byte{}}}},
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expViolations: []Violation{caUnfilled(0, whA), caUnfilled(1, whB)},
			expRecord:     true,
		},
		"if the owner creates the configuration with its CA, allow": {
			input:      Input{Operation: OperationCreate, Name: "koord", User: koordSA, Entries: []Entry{{Name: whA, CABundle: f.Owner.PEM}}, CA: koordCA},
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeAllow, expRule: RuleNone,
			expChanges: []string{"webhooks[0].clientConfig.caBundle"},
		},
		"if an entry's caBundle was empty and stays empty, allow": {
			input:      update("koord", koordSA, [2][]byte{f.Owner.PEM, nil}, [2][]byte{f.Owner.PEM, {}}, CAResult{}),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if UPDATE adds an entry with an empty caBundle and no fill is coming, deny: kube-apiserver would trust its system roots": {
			input: Input{
				Operation: OperationUpdate, Name: "koord", User: koordSA,
				OldEntries: []Entry{{Name: whA, CABundle: f.Owner.PEM}},
				Entries:    []Entry{{Name: whA, CABundle: f.Owner.PEM}, {Name: whB}},
			},
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expViolations: []Violation{caUnfilled(1, whB)},
			expRecord:     true,
		},
		"if the owner deletes the configuration, allow": {
			input:      Input{Operation: OperationDelete, Name: "koord", User: koordSA, OldEntries: []Entry{{Name: whA, CABundle: f.Owner.PEM}}},
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeAllow, expRule: RuleNone,
		},

		// ca-mismatch.
		"if the owner writes a foreign CA, deny with ca-mismatch naming expected and found fingerprints": {
			input:      update("koord", koordSA, same, [2][]byte{f.Owner.PEM, f.Foreign.PEM}, koordCA),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expViolations: []Violation{caMismatch(1, whB, koordSource, []string{f.Owner.Short()}, []string{f.Foreign.Short()})},
			expChanges:    []string{"webhooks[1].clientConfig.caBundle"},
			expRecord:     true,
		},
		"if a rotation bundle holds one CA of the set and one foreign, deny naming only the foreign one": {
			input:      update("koord", koordSA, same, [2][]byte{slices.Concat(f.Owner.PEM, f.Foreign.PEM), f.Owner.PEM}, koordCA),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expViolations: []Violation{caMismatch(0, whA, koordSource, []string{f.Owner.Short()}, []string{f.Foreign.Short()})},
			expChanges:    []string{"webhooks[0].clientConfig.caBundle"},
			expRecord:     true,
		},
		"if the new CA is written before the CA source holds it, deny: update the source first": {
			input:      update("koord", koordSA, same, [2][]byte{f.OwnerNew.PEM, f.OwnerNew.PEM}, koordCA),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expViolations: []Violation{
				caMismatch(0, whA, koordSource, []string{f.Owner.Short()}, []string{f.OwnerNew.Short()}),
				caMismatch(1, whB, koordSource, []string{f.Owner.Short()}, []string{f.OwnerNew.Short()}),
			},
			expChanges: []string{"webhooks[0].clientConfig.caBundle", "webhooks[1].clientConfig.caBundle"},
			expRecord:  true,
		},
		"if the owner empties a non-empty caBundle, deny with ca-mismatch": {
			input:      update("koord", koordSA, same, [2][]byte{f.Owner.PEM, nil}, CAResult{}),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expViolations: []Violation{caEmptied(1, whB)},
			expChanges:    []string{"webhooks[1].clientConfig.caBundle"},
			expRecord:     true,
		},
		"if the owner writes a caBundle that is not PEM, deny with ca-mismatch": {
			input:      update("koord", koordSA, same, [2][]byte{[]byte("not pem"), f.Owner.PEM}, koordCA),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expViolations: []Violation{caInvalid(0, whA, `is not PEM: no "-----BEGIN CERTIFICATE-----" block found`)},
			expChanges:    []string{"webhooks[0].clientConfig.caBundle"},
			expRecord:     true,
		},
		"if the owner writes a private key as caBundle, deny with ca-mismatch: it holds no usable certificate": {
			input:      update("koord", koordSA, same, [2][]byte{f.Owner.PEM, f.KeyPEM}, koordCA),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expViolations: []Violation{caInvalid(1, whB, `holds no certificate kube-apiserver can use (PEM block 0 is a "EC PRIVATE KEY", not a CERTIFICATE; kube-apiserver skips such blocks)`)},
			expChanges:    []string{"webhooks[1].clientConfig.caBundle"},
			expRecord:     true,
		},
		"if the owner writes a whitespace caBundle, deny: it holds no certificate": {
			input:      update("koord", koordSA, same, [2][]byte{f.Owner.PEM, []byte("\n")}, CAResult{}),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expViolations: []Violation{caInvalid(1, whB, "is empty")},
			expChanges:    []string{"webhooks[1].clientConfig.caBundle"},
			expRecord:     true,
		},

		// ca-unavailable.
		"if caBundle changes and the CA source failed, deny with ca-unavailable naming the source error": {
			input:      update("koord", koordSA, empty, same, CAResult{Err: sourceErr, Resolved: true}),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleCAUnavailable,
			expViolations: []Violation{caUnavailable(0, whA, sourceErr.Error()), caUnavailable(1, whB, sourceErr.Error())},
			expChanges:    []string{"webhooks[0].clientConfig.caBundle", "webhooks[1].clientConfig.caBundle"},
			expRecord:     true,
		},
		"if caBundle changes and the CA was not resolved, deny with ca-unavailable": {
			input:      update("koord", koordSA, same, [2][]byte{f.Owner.PEM, f.OwnerNew.PEM}, CAResult{}),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleCAUnavailable,
			expViolations: []Violation{caUnavailable(1, whB, "the owner's CA was not resolved")},
			expChanges:    []string{"webhooks[1].clientConfig.caBundle"},
			expRecord:     true,
		},
		"if caBundle changes and the CA source holds no certificate, deny with ca-unavailable": {
			input:      update("koord", koordSA, same, [2][]byte{f.Owner.PEM, f.OwnerNew.PEM}, CAResult{Set: cabundle.NewCASetFromFingerprints(koordSource), Resolved: true}),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleCAUnavailable,
			expViolations: []Violation{caUnavailable(1, whB, "secret koordinator-system/webhook-certs holds no CA certificate")},
			expChanges:    []string{"webhooks[1].clientConfig.caBundle"},
			expRecord:     true,
		},
		"if caBundle changes in audit mode and the CA source failed, allow with a warning and record": {
			input:      update("audited", User{Username: sa("audited-system", "controller")}, empty, [2][]byte{f.Owner.PEM, nil}, CAResult{Err: sourceErr, Resolved: true}),
			expMapping: "audited", expMode: guardapi.ModeAudit, expOutcome: OutcomeAudit, expRule: RuleCAUnavailable,
			expViolations: []Violation{caUnavailable(0, whA, sourceErr.Error())},
			expChanges:    []string{"webhooks[0].clientConfig.caBundle"},
			expRecord:     true,
		},

		// not-owner.
		"if a non-owner updates in enforce mode, deny with not-owner and a hint naming the mapping's service accounts": {
			input:      update("koord", intruder, same, same, CAResult{}),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleNotOwner,
			expViolations: []Violation{notOwnerSA("kube-system", "intruder", "koordinator")},
			expRecord:     true,
		},
		"if a non-owner updates in audit mode, allow with warnings and audit annotations, and record": {
			input:      update("audited", intruder, same, same, CAResult{}),
			expMapping: "audited", expMode: guardapi.ModeAudit, expOutcome: OutcomeAudit, expRule: RuleNotOwner,
			expViolations: []Violation{notOwnerSA("kube-system", "intruder", "audited")},
			expRecord:     true,
		},
		"if a non-owner writes a foreign CA, deny with not-owner only: nothing of the owner's CA is read or shown": {
			input:      update("koord", intruder, same, [2][]byte{f.Foreign.PEM, f.Owner.PEM}, koordCA),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleNotOwner,
			expViolations: []Violation{notOwnerSA("kube-system", "intruder", "koordinator")},
			expChanges:    []string{"webhooks[0].clientConfig.caBundle"},
			expRecord:     true,
		},
		"if a non-owner creates a guarded name, deny: a create can be a takeover": {
			input:      Input{Operation: OperationCreate, Name: "koord", User: User{Username: "bob"}, Entries: []Entry{{Name: whA}}},
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleNotOwner,
			expViolations: []Violation{notOwnerUser("bob", "koordinator")},
			expRecord:     true,
		},
		"if a non-owner creates a guarded name with a caBundle, deny with not-owner only: its CA is never resolved": {
			input:      Input{Operation: OperationCreate, Name: "koord", User: User{Username: "bob"}, Entries: []Entry{{Name: whA, CABundle: f.Foreign.PEM}}},
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleNotOwner,
			expViolations: []Violation{notOwnerUser("bob", "koordinator")},
			expChanges:    []string{"webhooks[0].clientConfig.caBundle"},
			expRecord:     true,
		},
		"if a non-owner deletes a guarded configuration, deny and call it a takeover": {
			input:      Input{Operation: OperationDelete, Name: "koord", User: intruder, OldEntries: []Entry{{Name: whA, CABundle: f.Owner.PEM}}},
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleNotOwner,
			expViolations: []Violation{{
				Rule:   RuleNotOwner,
				Field:  "userInfo",
				Detail: `"system:serviceaccount:kube-system:intruder" is not a writer; deleting it (and recreating it) is a takeover`,
				Hint:   "if it should own this configuration, add kube-system/intruder to owners[koordinator].writers.serviceAccounts",
			}},
			expRecord: true,
		},
		"if a service account's name merely starts with a writer's name, it is not a writer": {
			input:      update("koord", User{Username: sa("koordinator-system", "koord-manager-2")}, same, same, CAResult{}),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleNotOwner,
			expViolations: []Violation{notOwnerSA("koordinator-system", "koord-manager-2", "koordinator")},
			expRecord:     true,
		},
		"if a service account's name is a prefix of a writer's name, it is not a writer": {
			input:      update("koord", User{Username: sa("koordinator-system", "koord")}, same, same, CAResult{}),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleNotOwner,
			expViolations: []Violation{notOwnerSA("koordinator-system", "koord", "koordinator")},
			expRecord:     true,
		},
		"if a group merely starts with a writer group's name, it is not a writer": {
			input:      update("koord", User{Username: "carol", Groups: []string{"koord-admins-readonly", "system:masters-ish"}}, same, same, CAResult{}),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleNotOwner,
			expViolations: []Violation{notOwnerUser("carol", "koordinator")},
			expRecord:     true,
		},
		"if the username is the writer's service account without its prefix, it is not a writer": {
			input:      update("koord", User{Username: "koordinator-system/koord-manager"}, same, same, CAResult{}),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleNotOwner,
			expViolations: []Violation{notOwnerUser("koordinator-system/koord-manager", "koordinator")},
			expRecord:     true,
		},

		// Dry run.
		"if a non-owner's dry run is audited, return the same outcome but no record": {
			input: func() Input {
				in := update("audited", intruder, same, same, CAResult{})
				in.DryRun = true
				return in
			}(),
			expMapping: "audited", expMode: guardapi.ModeAudit, expOutcome: OutcomeAudit, expRule: RuleNotOwner,
			expViolations: []Violation{notOwnerSA("kube-system", "intruder", "audited")},
		},
		"if a non-owner's dry run is enforced, deny but do not record": {
			input: func() Input {
				in := update("koord", intruder, same, same, CAResult{})
				in.DryRun = true
				return in
			}(),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleNotOwner,
			expViolations: []Violation{notOwnerSA("kube-system", "intruder", "koordinator")},
		},

		// Break-glass.
		"if a break-glass subject who is no writer updates, allow with a warning and record": {
			input:      update("koord", admin, same, same, CAResult{}),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeBreakGlass, expRule: RuleBreakGlass,
			expRecord: true,
		},
		"if a break-glass subject writes a foreign CA, still allow, list what it bypassed, warn and record": {
			input:      update("koord", admin, same, [2][]byte{f.Foreign.PEM, nil}, koordCA),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeBreakGlass, expRule: RuleBreakGlass,
			expViolations: []Violation{
				caMismatch(0, whA, koordSource, []string{f.Owner.Short()}, []string{f.Foreign.Short()}),
				caEmptied(1, whB),
			},
			expChanges: []string{"webhooks[0].clientConfig.caBundle", "webhooks[1].clientConfig.caBundle"},
			expRecord:  true,
		},
		"if a break-glass subject deletes a guarded configuration, allow and record": {
			input:      Input{Operation: OperationDelete, Name: "koord", User: admin},
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeBreakGlass, expRule: RuleBreakGlass,
			expRecord: true,
		},
		"if a break-glass subject's request is a dry run, allow with a warning but do not record": {
			input: func() Input {
				in := update("koord", admin, same, same, CAResult{})
				in.DryRun = true
				return in
			}(),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeBreakGlass, expRule: RuleBreakGlass,
		},
		"if a break-glass subject writes an unmanaged configuration, allow and record": {
			input:      update("unrelated", admin, empty, same, CAResult{}),
			expOutcome: OutcomeBreakGlass, expRule: RuleBreakGlass,
			expChanges: []string{"webhooks[0].clientConfig.caBundle", "webhooks[1].clientConfig.caBundle"},
			expRecord:  true,
		},
		"if a break-glass subject is also a writer, allow it as break-glass (as matchConditions do) and list the foreign CA": {
			input:      update("koord", User{Username: "root", Groups: []string{"system:masters", "koord-admins"}}, same, [2][]byte{f.Foreign.PEM, f.Owner.PEM}, koordCA),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeBreakGlass, expRule: RuleBreakGlass,
			expViolations: []Violation{caMismatch(0, whA, koordSource, []string{f.Owner.Short()}, []string{f.Foreign.Short()})},
			expChanges:    []string{"webhooks[0].clientConfig.caBundle"},
			expRecord:     true,
		},

		// Unmanaged configurations.
		"if no mapping covers the configuration and unmanaged is allow, allow and do not record": {
			input:      update("unrelated", intruder, empty, [2][]byte{f.Foreign.PEM, nil}, CAResult{}),
			expOutcome: OutcomeAllow, expRule: RuleNone,
			expChanges: []string{"webhooks[0].clientConfig.caBundle"},
		},
		"if no mapping covers the configuration and unmanaged is audit, allow with a warning and record": {
			config:     strictCfg,
			input:      update("unrelated", intruder, same, same, CAResult{}),
			expOutcome: OutcomeAudit, expRule: RuleUnmanaged,
			expViolations: []Violation{{
				Rule:   RuleUnmanaged,
				Detail: "no owner mapping covers this configuration",
				Hint:   "add it to the match of the mapping of the controller that owns it",
			}},
			expRecord: true,
		},
		"if an audited unmanaged write is a dry run, do not record it": {
			config: strictCfg,
			input: func() Input {
				in := update("unrelated", intruder, same, same, CAResult{})
				in.DryRun = true
				return in
			}(),
			expOutcome: OutcomeAudit, expRule: RuleUnmanaged,
			expViolations: []Violation{{
				Rule:   RuleUnmanaged,
				Detail: "no owner mapping covers this configuration",
				Hint:   "add it to the match of the mapping of the controller that owns it",
			}},
		},

		// Modes.
		"if a mapping sets mode audit under defaultMode enforce, audit": {
			config:     strictCfg,
			input:      update("relaxed", intruder, same, same, CAResult{}),
			expMapping: "relaxed", expMode: guardapi.ModeAudit, expOutcome: OutcomeAudit, expRule: RuleNotOwner,
			expViolations: []Violation{notOwnerSA("kube-system", "intruder", "relaxed")},
			expRecord:     true,
		},
		"if a mapping sets no mode under defaultMode enforce, enforce": {
			config:     strictCfg,
			input:      update("strict", intruder, same, same, CAResult{}),
			expMapping: "strict", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleNotOwner,
			expViolations: []Violation{notOwnerSA("kube-system", "intruder", "strict")},
			expRecord:     true,
		},

		// Inline pem.
		"if the CA source is inline pem, use it without CA resolution": {
			input:      update("legacy", User{Username: "legacy-operator"}, empty, [2][]byte{f.Inline.PEM, nil}, CAResult{}),
			expMapping: "legacy", expMode: guardapi.ModeEnforce, expOutcome: OutcomeAllow, expRule: RuleNone,
			expChanges: []string{"webhooks[0].clientConfig.caBundle"},
		},
		"if the CA source is inline pem and a foreign CA is written, deny naming the inline source": {
			input:      update("legacy", User{Username: "legacy-operator"}, empty, [2][]byte{f.Foreign.PEM, nil}, koordCA),
			expMapping: "legacy", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expViolations: []Violation{caMismatch(0, whA, "inline pem of owners[legacy]", []string{f.Inline.Short()}, []string{f.Foreign.Short()})},
			expChanges:    []string{"webhooks[0].clientConfig.caBundle"},
			expRecord:     true,
		},

		// injectedByCertManager.
		"if the CA is injected by cert-manager, the default cainjector service account is a writer": {
			input:      update("istio", User{Username: sa("cert-manager", "cert-manager-cainjector")}, empty, same, koordCA),
			expMapping: "istio", expMode: guardapi.ModeEnforce, expOutcome: OutcomeAllow, expRule: RuleNone,
			expChanges: []string{"webhooks[0].clientConfig.caBundle", "webhooks[1].clientConfig.caBundle"},
		},
		"if the CA is injected by cert-manager, the configured cainjector service account is a writer": {
			config:     strictCfg,
			input:      update("istio", User{Username: sa("cert-manager-system", "injector")}, empty, same, koordCA),
			expMapping: "istio", expMode: guardapi.ModeEnforce, expOutcome: OutcomeAllow, expRule: RuleNone,
			expChanges: []string{"webhooks[0].clientConfig.caBundle", "webhooks[1].clientConfig.caBundle"},
		},
		"if a cainjector service account is configured, the default one is no writer": {
			config:     strictCfg,
			input:      update("istio", User{Username: sa("cert-manager", "cert-manager-cainjector")}, same, same, CAResult{}),
			expMapping: "istio", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleNotOwner,
			expViolations: []Violation{notOwnerSA("cert-manager", "cert-manager-cainjector", "istio")},
			expRecord:     true,
		},
		"if the CA is not injected by cert-manager, cainjector is no writer": {
			input:      update("koord", User{Username: sa("cert-manager", "cert-manager-cainjector")}, same, same, CAResult{}),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleNotOwner,
			expViolations: []Violation{notOwnerSA("cert-manager", "cert-manager-cainjector", "koordinator")},
			expRecord:     true,
		},

		// Label selectors.
		"if a label selector matches, apply its mapping": {
			input: func() Input {
				in := update("team-a-webhook", intruder, same, same, CAResult{})
				in.Labels = map[string]string{"team": "a"}
				return in
			}(),
			expMapping: "team-a", expMode: guardapi.ModeAudit, expOutcome: OutcomeAudit, expRule: RuleNotOwner,
			expViolations: []Violation{notOwnerSA("kube-system", "intruder", "team-a")},
			expRecord:     true,
		},
		"if an UPDATE relabels an unlabelled configuration into a selector mapping, that mapping decides": {
			input: func() Input {
				in := update("relabelled", intruder, same, same, CAResult{})
				in.UpdatedLabels = map[string]string{"shared": "yes"}
				return in
			}(),
			expMapping: "shared", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleNotOwner,
			expViolations: []Violation{notOwnerSA("kube-system", "intruder", "shared")},
			expRecord:     true,
		},
		"if an UPDATE relabels a configuration out of its selector mapping, that mapping still decides": {
			input: func() Input {
				in := update("relabelled", intruder, same, same, CAResult{})
				in.Labels = map[string]string{"shared": "yes"}
				in.UpdatedLabels = map[string]string{}
				return in
			}(),
			expMapping: "shared", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleNotOwner,
			expViolations: []Violation{notOwnerSA("kube-system", "intruder", "shared")},
			expRecord:     true,
		},
		"if an UPDATE relabels a configuration from one selector mapping into another, it is ambiguous: neither owner alone may move it": {
			input: func() Input {
				in := update("moved", User{Username: sa("team-a", "controller")}, same, same, CAResult{})
				in.Labels = map[string]string{"team": "a"}
				in.UpdatedLabels = map[string]string{"shared": "yes"}
				return in
			}(),
			expMapping: "shared,team-a", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleAmbiguousOwner,
			expViolations: []Violation{sharedTeamAAmbiguous},
			expRecord:     true,
		},
		"if the owner removes an entry that carried a caBundle, allow: the trust goes with the entry": {
			input: Input{Operation: OperationUpdate, Name: "koord", User: koordSA, CA: koordCA,
				OldEntries: []Entry{{Name: whA, CABundle: f.Owner.PEM}, {Name: whB, CABundle: f.Owner.PEM}},
				Entries:    []Entry{{Name: whA, CABundle: f.Owner.PEM}}},
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeAllow, expRule: RuleNone,
			expChanges: []string{"webhooks"},
		},
		"if a non-writer removes an entry that carried a caBundle, deny with not-owner": {
			input: Input{Operation: OperationUpdate, Name: "koord", User: intruder, CA: koordCA,
				OldEntries: []Entry{{Name: whA, CABundle: f.Owner.PEM}, {Name: whB, CABundle: f.Owner.PEM}},
				Entries:    []Entry{{Name: whA, CABundle: f.Owner.PEM}}},
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleNotOwner,
			expViolations: []Violation{notOwnerSA("kube-system", "intruder", "koordinator")},
			expChanges:    []string{"webhooks"},
			expRecord:     true,
		},
		"if the owner renames an entry and keeps its CA, allow: the new name holds the current CA": {
			input: Input{Operation: OperationUpdate, Name: "koord", User: koordSA, CA: koordCA,
				OldEntries: []Entry{{Name: whA, CABundle: f.Owner.PEM}},
				Entries:    []Entry{{Name: "renamed.koord.io", CABundle: f.Owner.PEM}}},
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeAllow, expRule: RuleNone,
			expChanges: []string{"webhooks[0].clientConfig.caBundle", "webhooks"},
		},
		"if the owner renames an entry that carried a caBundle and leaves the new one empty, deny with ca-mismatch": {
			input: Input{Operation: OperationUpdate, Name: "koord", User: koordSA, CA: koordCA,
				OldEntries: []Entry{{Name: whA, CABundle: f.Owner.PEM}},
				Entries:    []Entry{{Name: "renamed.koord.io"}}},
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expViolations: []Violation{caUnfilled(0, "renamed.koord.io")},
			expChanges:    []string{"webhooks"},
			expRecord:     true,
		},
		"if the owner writes a CERTIFICATE block with PEM headers, deny: kube-apiserver would skip it": {
			input:      update("koord", koordSA, same, [2][]byte{testpki.WithPEMHeaders(f.Owner.PEM), f.Owner.PEM}, koordCA),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleCAMismatch,
			expViolations: []Violation{caInvalid(0, whA, "holds no certificate kube-apiserver can use (PEM block 0 carries PEM headers; kube-apiserver skips such blocks)")},
			expChanges:    []string{"webhooks[0].clientConfig.caBundle"},
			expRecord:     true,
		},
		"if the owner writes its CA beside a headered foreign block, allow: kube-apiserver trusts only the owner's": {
			input:      update("koord", koordSA, same, [2][]byte{slices.Concat(f.Owner.PEM, testpki.WithPEMHeaders(f.Foreign.PEM)), f.Owner.PEM}, koordCA),
			expMapping: "koordinator", expMode: guardapi.ModeEnforce, expOutcome: OutcomeAllow, expRule: RuleNone,
			expChanges: []string{"webhooks[0].clientConfig.caBundle"},
		},
		"if two label selectors match, return ambiguous-owner in the strictest claimant's mode": {
			input: func() Input {
				in := update("multi", User{Username: sa("team-a", "controller")}, same, same, CAResult{})
				in.Labels = map[string]string{"team": "a", "shared": "true"}
				return in
			}(),
			expMapping: "shared,team-a", expMode: guardapi.ModeEnforce, expOutcome: OutcomeDeny, expRule: RuleAmbiguousOwner,
			expViolations: []Violation{sharedTeamAAmbiguous},
			expRecord:     true,
		},
		"if two label selectors match a break-glass subject's write, allow, warn and record": {
			input: func() Input {
				in := update("multi", admin, same, same, CAResult{})
				in.Labels = map[string]string{"team": "a", "shared": "true"}
				return in
			}(),
			expMapping: "shared,team-a", expMode: guardapi.ModeEnforce, expOutcome: OutcomeBreakGlass, expRule: RuleBreakGlass,
			expViolations: []Violation{sharedTeamAAmbiguous},
			expRecord:     true,
		},
	}

	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			c := cfg
			if test.config != nil {
				c = test.config
			}
			for _, kind := range []GuardedKind{KindValidating, KindMutating} {
				t.Run(string(kind), func(t *testing.T) {
					in := test.input
					in.Kind = kind
					d := c.Decide(&in)

					var changes []string
					for _, ch := range d.Changes {
						changes = append(changes, ch.Field())
					}
					assert.Equal(t, test.expChanges, changes, "changes")
					d.Changes = nil

					assert.Equal(t, Decision{
						Operation:  in.Operation,
						Kind:       kind,
						Name:       in.Name,
						Subject:    in.User.Username,
						DryRun:     in.DryRun,
						Mapping:    test.expMapping,
						Mode:       test.expMode,
						Outcome:    test.expOutcome,
						Rule:       test.expRule,
						Violations: test.expViolations,
						Record:     test.expRecord,
					}, d)

					assertResponse(t, &d)
				})
			}
		})
	}
}

// assertResponse checks what the admission response is built from against
// the decision's outcome: allowed and code, message, warnings, annotations.
func assertResponse(t *testing.T, d *Decision) {
	t.Helper()
	warnings := d.Warnings()
	annotations := d.AuditAnnotations()
	for _, w := range warnings {
		assert.LessOrEqual(t, len(w), maxWarningLen, "warning %q", w)
		assert.True(t, utf8.ValidString(w), "warning %q", w)
	}

	switch d.Outcome {
	case OutcomeAllow:
		assert.True(t, d.Allowed())
		assert.Empty(t, d.Message())
		assert.Nil(t, warnings)
		assert.Nil(t, annotations)
		assert.False(t, d.Record)
		return
	case OutcomeDeny:
		assert.False(t, d.Allowed())
		assert.Nil(t, warnings)
		msg := d.Message()
		require.NotEmpty(t, d.Violations)
		assert.True(t, strings.HasPrefix(msg, fmt.Sprintf("webhook-guard denied %s of %s %q by %q (mapping %q, enforce); ", d.Operation, d.Kind, d.Name, d.Subject, d.Mapping)), msg)
		for _, v := range d.Violations {
			assert.Contains(t, msg, v.String())
		}
	case OutcomeAudit:
		assert.True(t, d.Allowed())
		require.NotEmpty(t, d.Violations)
		assert.Len(t, warnings, len(d.Violations))
		for _, w := range warnings {
			assert.True(t, strings.HasPrefix(w, "webhook-guard (audit) would deny: "), w)
		}
		assert.True(t, strings.HasPrefix(d.Message(), "webhook-guard would deny (audit mode) "), d.Message())
	case OutcomeBreakGlass:
		assert.True(t, d.Allowed())
		require.NotEmpty(t, warnings)
		for _, w := range warnings {
			assert.True(t, strings.HasPrefix(w, "webhook-guard break-glass: "), w)
		}
	default:
		t.Fatalf("unknown outcome %q", d.Outcome)
	}

	require.NotNil(t, annotations)
	assert.Equal(t, string(d.Outcome), annotations["decision"])
	assert.Equal(t, string(d.Rule), annotations["rule"])
	mapping, ok := annotations["mapping"]
	assert.Equal(t, d.Mapping != "", ok)
	assert.Equal(t, d.Mapping, mapping)
}

// Test_Decide_withFingerprintCache: the cache changes how fast a decision
// is, never what it is.
func Test_Decide_withFingerprintCache(t *testing.T) {
	f := testFixtures(t)
	c := mustLoad(t, decideDoc(f))
	in := Input{
		Operation:  OperationUpdate,
		Kind:       KindValidating,
		Name:       "koord",
		User:       User{Username: sa("koordinator-system", "koord-manager")},
		CA:         CAResult{Set: cabundle.NewCASetFromFingerprints("secret koordinator-system/webhook-certs", f.Owner.FP), Resolved: true},
		OldEntries: []Entry{{Name: "a", CABundle: f.Owner.PEM}, {Name: "b", CABundle: f.Owner.PEM}},
		Entries:    []Entry{{Name: "a", CABundle: f.Foreign.PEM}, {Name: "b", CABundle: []byte("garbage")}},
	}
	want := c.Decide(&in)
	in.Fingerprints = cabundle.NewFingerprintCache(0)
	for range 2 {
		assert.Equal(t, want, c.Decide(&in))
	}
}
