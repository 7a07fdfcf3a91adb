package policy

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	cabundle "github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// Test_Decide_rotation is the rotation rule at the decision boundary: what a
// changed caBundle may hold when the owner's current CA set is {OwnerNew}
// (the source has rotated) and the stored entry held Owner (or Expired and
// Owner, after an earlier rotation).
func Test_Decide_rotation(t *testing.T) {
	f := testFixtures(t)
	cfg := mustLoad(t, decideDoc(f))
	source := "secret koordinator-system/webhook-certs"
	rotated := CAResult{Set: cabundle.NewCASetFromFingerprints(source, f.OwnerNew.FP), Resolved: true}
	koordSA := User{Username: sa("koordinator-system", "koord-manager")}
	cur := []string{f.OwnerNew.Short()}

	// update writes entry whA from old to next; a different name renames it.
	update := func(oldName string, old []byte, newName string, next []byte) Input {
		return Input{
			Operation: OperationUpdate, Name: "koord", User: koordSA, CA: rotated,
			OldEntries: []Entry{{Name: oldName, CABundle: old}},
			Entries:    []Entry{{Name: newName, CABundle: next}},
		}
	}
	foreignHere := func(index int, webhook string, found ...string) Violation {
		return Violation{
			Rule: RuleCAMismatch, Field: fmt.Sprintf("webhooks[%d].clientConfig.caBundle", index), Webhook: webhook,
			Detail:   fmt.Sprintf("%d certificate(s) neither in the owner's CA set from %s nor already in this entry's stored caBundle", len(found), source),
			Summary:  "certificate(s) not in the owner's CA set",
			Hint:     "write the owner's CA (a rotation may keep the certificates the entry already holds); if the owner's CA changed, update its source first",
			Expected: cur, Found: found,
		}
	}

	tests := map[string]struct {
		input         Input
		expViolations []Violation
	}{
		"if a merging writer appends the new CA to the stored one (cainjector), allow": {
			input: update(whA, f.Owner.PEM, whA, slices.Concat(f.Owner.PEM, f.OwnerNew.PEM)),
		},
		"if a replacing writer writes the new CA alone, allow": {
			input: update(whA, f.Owner.PEM, whA, f.OwnerNew.PEM),
		},
		"if an expired certificate of the stored bundle is kept beside the new CA, allow: an expired CA grants no trust": {
			input: update(whA, slices.Concat(f.Expired.PEM, f.Owner.PEM), whA, slices.Concat(f.Expired.PEM, f.Owner.PEM, f.OwnerNew.PEM)),
		},
		"if the expired certificate is dropped as the new CA is added, allow": {
			input: update(whA, slices.Concat(f.Expired.PEM, f.Owner.PEM), whA, slices.Concat(f.Owner.PEM, f.OwnerNew.PEM)),
		},
		"if the old certificates are put after the new CA, allow: order carries no trust": {
			input: update(whA, f.Owner.PEM, whA, slices.Concat(f.OwnerNew.PEM, f.Owner.PEM)),
		},
		"if a foreign certificate is added alongside the owner's new CA, deny naming only the foreign one": {
			input:         update(whA, f.Owner.PEM, whA, slices.Concat(f.Owner.PEM, f.OwnerNew.PEM, f.Foreign.PEM)),
			expViolations: []Violation{foreignHere(0, whA, f.Foreign.Short())},
		},
		"if a certificate that had been dropped is added back, deny: it is no longer stored": {
			input:         update(whA, f.Owner.PEM, whA, slices.Concat(f.Expired.PEM, f.Owner.PEM, f.OwnerNew.PEM)),
			expViolations: []Violation{foreignHere(0, whA, f.Expired.Short())},
		},
		"if the bundle keeps only stored certificates and drops the current CA, deny: it must still trust the owner's current CA": {
			input: update(whA, slices.Concat(f.Owner.PEM, f.OwnerNew.PEM), whA, f.Owner.PEM),
			expViolations: []Violation{{
				Rule: RuleCAMismatch, Field: "webhooks[0].clientConfig.caBundle", Webhook: whA,
				Detail:   "the caBundle keeps only certificates of the stored caBundle and none of the owner's CA set from " + source,
				Summary:  "the caBundle no longer holds the owner's current CA",
				Hint:     "add the owner's current CA to the bundle; a rotation may keep old certificates but must carry the current one",
				Expected: cur, Found: []string{f.Owner.Short()},
			}},
		},
		"if a renamed entry keeps the old name's certificate, deny: a new name has nothing stored": {
			input: update(whA, f.Owner.PEM, whB, slices.Concat(f.Owner.PEM, f.OwnerNew.PEM)),
			expViolations: []Violation{
				foreignHere(0, whB, f.Owner.Short()),
			},
		},
		"if a new entry copies another entry's old certificate, deny: already trusted means by the same entry": {
			input: Input{
				Operation: OperationUpdate, Name: "koord", User: koordSA, CA: rotated,
				OldEntries: []Entry{{Name: whA, CABundle: f.Owner.PEM}},
				Entries:    []Entry{{Name: whA, CABundle: f.Owner.PEM}, {Name: whB, CABundle: slices.Concat(f.Owner.PEM, f.OwnerNew.PEM)}},
			},
			expViolations: []Violation{foreignHere(1, whB, f.Owner.Short())},
		},
		"if a CREATE carries an old certificate beside the current CA, deny: nothing is stored yet": {
			input: Input{
				Operation: OperationCreate, Name: "koord", User: koordSA, CA: rotated,
				Entries: []Entry{{Name: whA, CABundle: slices.Concat(f.Owner.PEM, f.OwnerNew.PEM)}},
			},
			expViolations: []Violation{foreignHere(0, whA, f.Owner.Short())},
		},
		"if a CREATE carries the current CA, allow": {
			input: Input{
				Operation: OperationCreate, Name: "koord", User: koordSA, CA: rotated,
				Entries: []Entry{{Name: whA, CABundle: f.OwnerNew.PEM}},
			},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			in := test.input
			in.Kind = KindValidating
			d := cfg.Decide(&in)
			assert.Equal(t, test.expViolations, d.Violations)
			if len(test.expViolations) == 0 {
				assert.Equal(t, OutcomeAllow, d.Outcome)
			} else {
				assert.Equal(t, OutcomeDeny, d.Outcome)
			}
		})
	}
}
