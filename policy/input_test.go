package policy

import (
	"crypto/sha256"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

func Test_ChangedBundles(t *testing.T) {
	f := testFixtures(t)
	old, next := f.Owner.PEM, f.OwnerNew.PEM
	emptyHash := sha256.Sum256(nil)

	tests := map[string]struct {
		input Input
		exp   []BundleChange
	}{
		"if CREATE sets caBundles, return every non-empty one": {
			input: Input{Operation: OperationCreate, Entries: []Entry{{Name: "a", CABundle: old}, {Name: "b"}, {Name: "c", CABundle: next}}},
			exp: []BundleChange{
				{Index: 0, Webhook: "a", New: old, Hash: sha256.Sum256(old)},
				{Index: 2, Webhook: "c", New: next, Hash: sha256.Sum256(next)},
			},
		},
		"if CREATE leaves every caBundle empty, return nothing: cainjector fills them later": {
			input: Input{Operation: OperationCreate, Entries: []Entry{{Name: "a"}, {Name: "b", CABundle: []byte{}}}},
			exp:   nil,
		},
		"if UPDATE leaves every caBundle alone, return nothing": {
			input: Input{Operation: OperationUpdate,
				OldEntries: []Entry{{Name: "a", CABundle: old}, {Name: "b"}},
				Entries:    []Entry{{Name: "a", CABundle: old}, {Name: "b"}}},
			exp: nil,
		},
		"if UPDATE reorders entries, pair them by name and return nothing": {
			input: Input{Operation: OperationUpdate,
				OldEntries: []Entry{{Name: "a", CABundle: old}, {Name: "b", CABundle: next}},
				Entries:    []Entry{{Name: "b", CABundle: next}, {Name: "a", CABundle: old}}},
			exp: nil,
		},
		"if UPDATE rotates one caBundle, return it with old and new at its new index": {
			input: Input{Operation: OperationUpdate,
				OldEntries: []Entry{{Name: "a", CABundle: old}, {Name: "b", CABundle: old}},
				Entries:    []Entry{{Name: "a", CABundle: old}, {Name: "b", CABundle: slices.Concat(old, next)}}},
			exp: []BundleChange{{Index: 1, Webhook: "b", Old: old, New: slices.Concat(old, next), Hash: sha256.Sum256(slices.Concat(old, next))}},
		},
		"if UPDATE empties a caBundle, return it as emptied": {
			input: Input{Operation: OperationUpdate,
				OldEntries: []Entry{{Name: "a", CABundle: old}},
				Entries:    []Entry{{Name: "a", CABundle: []byte{}}}},
			exp: []BundleChange{{Index: 0, Webhook: "a", Old: old, New: []byte{}, Hash: emptyHash}},
		},
		"if UPDATE adds an entry with an empty caBundle, return nothing": {
			input: Input{Operation: OperationUpdate,
				OldEntries: []Entry{{Name: "a", CABundle: old}},
				Entries:    []Entry{{Name: "a", CABundle: old}, {Name: "b"}}},
			exp: nil,
		},
		"if UPDATE adds an entry with a caBundle, return it with no old bundle": {
			input: Input{Operation: OperationUpdate,
				OldEntries: []Entry{{Name: "a", CABundle: old}},
				Entries:    []Entry{{Name: "a", CABundle: old}, {Name: "b", CABundle: next}}},
			exp: []BundleChange{{Index: 1, Webhook: "b", New: next, Hash: sha256.Sum256(next)}},
		},
		"if UPDATE removes an entry that carried a caBundle, return it as removed (emptied)": {
			input: Input{Operation: OperationUpdate,
				OldEntries: []Entry{{Name: "a", CABundle: old}, {Name: "b", CABundle: old}},
				Entries:    []Entry{{Name: "a", CABundle: old}}},
			exp: []BundleChange{{Index: 1, Webhook: "b", Old: old, Removed: true, Hash: emptyHash}},
		},
		"if UPDATE removes an entry with an empty caBundle, return nothing": {
			input: Input{Operation: OperationUpdate,
				OldEntries: []Entry{{Name: "a", CABundle: old}, {Name: "b"}},
				Entries:    []Entry{{Name: "a", CABundle: old}}},
			exp: nil,
		},
		"if UPDATE renames an entry and reorders the rest, return the new entry and the removed one": {
			input: Input{Operation: OperationUpdate,
				OldEntries: []Entry{{Name: "a", CABundle: old}, {Name: "b", CABundle: next}},
				Entries:    []Entry{{Name: "b", CABundle: next}, {Name: "a2", CABundle: old}}},
			exp: []BundleChange{
				{Index: 1, Webhook: "a2", New: old, Hash: sha256.Sum256(old)},
				{Index: 0, Webhook: "a", Old: old, Removed: true, Hash: emptyHash},
			},
		},
		"if DELETE, return nothing": {
			input: Input{Operation: OperationDelete, OldEntries: []Entry{{Name: "a", CABundle: old}}},
			exp:   nil,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, test.exp, ChangedBundles(&test.input))
		})
	}
}

func Test_BundleChange(t *testing.T) {
	tests := map[string]struct {
		input      BundleChange
		expField   string
		expEmptied bool
	}{
		"if a bundle is set where there was none, it is not emptied": {
			input:    BundleChange{Index: 3, New: []byte("x"), kind: KindValidating},
			expField: "webhooks[3].clientConfig.caBundle",
		},
		"if a bundle is replaced, it is not emptied": {
			input:    BundleChange{Index: 0, Old: []byte("x"), New: []byte("y"), kind: KindValidating},
			expField: "webhooks[0].clientConfig.caBundle",
		},
		"if an entry that carried a bundle is removed, it is emptied and its field is the list": {
			input:      BundleChange{Index: 2, Old: []byte("x"), Removed: true, kind: KindValidating},
			expField:   "webhooks",
			expEmptied: true,
		},
		"if a non-empty bundle is made empty, it is emptied": {
			input:      BundleChange{Index: 12, Old: []byte("x"), kind: KindValidating},
			expField:   "webhooks[12].clientConfig.caBundle",
			expEmptied: true,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, test.expField, test.input.Field())
			assert.Equal(t, test.expEmptied, test.input.Emptied())
		})
	}
}

func Test_NeedsCA(t *testing.T) {
	f := testFixtures(t)
	old, next := f.Owner.PEM, f.OwnerNew.PEM

	tests := map[string]struct {
		input Input
		exp   bool
	}{
		"if CREATE sets a caBundle, the CA is needed": {
			input: Input{Operation: OperationCreate, Entries: []Entry{{Name: "a", CABundle: old}}},
			exp:   true,
		},
		"if CREATE leaves caBundles empty, the CA is not needed": {
			input: Input{Operation: OperationCreate, Entries: []Entry{{Name: "a"}}},
			exp:   false,
		},
		"if UPDATE changes a caBundle, the CA is needed": {
			input: Input{Operation: OperationUpdate,
				OldEntries: []Entry{{Name: "a", CABundle: old}},
				Entries:    []Entry{{Name: "a", CABundle: next}}},
			exp: true,
		},
		"if UPDATE leaves caBundles alone, the CA is not needed": {
			input: Input{Operation: OperationUpdate,
				OldEntries: []Entry{{Name: "a", CABundle: old}},
				Entries:    []Entry{{Name: "a", CABundle: old}}},
			exp: false,
		},
		"if UPDATE only empties a caBundle, the CA is not needed: emptying is a mismatch on its own": {
			input: Input{Operation: OperationUpdate,
				OldEntries: []Entry{{Name: "a", CABundle: old}},
				Entries:    []Entry{{Name: "a"}}},
			exp: false,
		},
		"if UPDATE empties one caBundle and sets another, the CA is needed": {
			input: Input{Operation: OperationUpdate,
				OldEntries: []Entry{{Name: "a", CABundle: old}, {Name: "b"}},
				Entries:    []Entry{{Name: "a"}, {Name: "b", CABundle: next}}},
			exp: true,
		},
		"if DELETE, the CA is not needed": {
			input: Input{Operation: OperationDelete, OldEntries: []Entry{{Name: "a", CABundle: old}}},
			exp:   false,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, test.exp, NeedsCA(&test.input))
		})
	}
}
