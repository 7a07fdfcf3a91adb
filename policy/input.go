package policy

import (
	"bytes"
	"crypto/sha256"
	"fmt"
)

// Operation is the admission operation.
type Operation string

const (
	OperationCreate Operation = "CREATE"
	OperationUpdate Operation = "UPDATE"
	OperationDelete Operation = "DELETE"
)

// Webhook is the part of one webhooks[] entry the decision needs.
type Webhook struct {
	Name     string
	CABundle []byte
}

// Input is everything a decision depends on. The caller decodes it from the
// AdmissionReview and resolves the owner's CA when NeedsCA says so.
type Input struct {
	Operation Operation
	Kind      ConfigKind
	Name      string
	// Labels and Annotations of the object as it is after the request (as it
	// was, for DELETE).
	Labels      map[string]string
	Annotations map[string]string
	User        User
	DryRun      bool
	// Webhooks is the object after the request; nil on DELETE.
	Webhooks []Webhook
	// OldWebhooks is the object before the request; nil on CREATE.
	OldWebhooks []Webhook
	// CA is the owner's resolved CA, or why it could not be resolved.
	CA CAResult
	// Fingerprints memoizes caBundle parsing across requests; nil parses
	// every bundle. It changes how fast a decision is, never what it is.
	Fingerprints *FingerprintCache
	// Observed marks a change seen after the fact by the observer (a watch
	// event), not an admission request: who made it is unknown, so only
	// what the object itself shows is decided (decideObserved).
	Observed bool
}

// CAResult is the outcome of resolving an owner's CA source.
type CAResult struct {
	Set CASet
	// Err says why the source could not be read; it names the source.
	Err error
	// Resolved is true once the caller has tried (Set or Err is meaningful).
	Resolved bool
}

// BundleChange is one webhooks[] entry whose caBundle was added, changed or
// emptied by the request.
type BundleChange struct {
	// Index is the entry's position in the new object (the old one when emptied by removal).
	Index   int
	Webhook string
	Old     []byte
	New     []byte
	// Hash is the SHA-256 of the new raw caBundle bytes, for flapping detection.
	Hash [sha256.Size]byte
}

// Field is the path of the entry's caBundle.
func (b BundleChange) Field() string {
	return fmt.Sprintf("webhooks[%d].clientConfig.caBundle", b.Index)
}

// Emptied reports a non-empty caBundle made empty.
func (b BundleChange) Emptied() bool { return len(b.Old) > 0 && len(b.New) == 0 }

// ChangedBundles lists the entries whose caBundle the request adds or
// changes. Entries are paired with the old object by webhook name (names are
// unique within a configuration). An empty caBundle on a new entry is not a
// change: cainjector fills it after creation. DELETE changes nothing.
func ChangedBundles(in *Input) []BundleChange {
	if in.Operation == OperationDelete {
		return nil
	}
	var changes []BundleChange
	for i, w := range in.Webhooks {
		old, changed := bundleChange(in, i)
		if !changed {
			continue
		}
		changes = append(changes, BundleChange{Index: i, Webhook: w.Name, Old: old, New: w.CABundle, Hash: in.Fingerprints.Sum(w.CABundle)})
	}
	return changes
}

// bundleChange returns the old caBundle of in.Webhooks[i] (paired by name)
// and whether the request changes it. Entries usually keep their order, so
// the same index is tried first: pairing n entries costs O(n), not O(n²).
func bundleChange(in *Input, i int) (old []byte, changed bool) {
	w := &in.Webhooks[i]
	if i < len(in.OldWebhooks) && in.OldWebhooks[i].Name == w.Name {
		old = in.OldWebhooks[i].CABundle
	} else {
		for j := range in.OldWebhooks {
			if in.OldWebhooks[j].Name == w.Name {
				old = in.OldWebhooks[j].CABundle
				break
			}
		}
	}
	// bytes.Equal treats nil and empty alike: an entry that stays empty is no change.
	return old, !bytes.Equal(old, w.CABundle)
}

// NeedsCA reports whether deciding this input requires the owner's CA: only
// when a caBundle is set to something non-empty. Updates that leave every
// caBundle alone never wait on, or fail because of, a CA source.
func NeedsCA(in *Input) bool {
	if in.Operation == OperationDelete {
		return false
	}
	for i := range in.Webhooks {
		if _, changed := bundleChange(in, i); changed && len(in.Webhooks[i].CABundle) > 0 {
			return true
		}
	}
	return false
}
