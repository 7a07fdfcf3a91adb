package policy

import (
	"bytes"
	"crypto/sha256"

	cabundle "github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// Operation is the admission operation.
type Operation string

const (
	OperationCreate Operation = "CREATE"
	OperationUpdate Operation = "UPDATE"
	OperationDelete Operation = "DELETE"
)

// Entry is the part of one trusted entry the decision needs: a
// webhooks[] entry of a webhook configuration, or the one entry of a
// CustomResourceDefinition's conversion webhook (EntryConversion) or of an
// APIService (EntryService).
type Entry struct {
	Name     string
	CABundle []byte
	// InsecureSkipTLSVerify is an APIService's: kube-apiserver then trusts
	// any serving certificate.
	InsecureSkipTLSVerify bool
	// Endpoint is where kube-apiserver sends the entry's traffic. The
	// decision reads it for the kinds whose trust alone a mapping owns (a
	// CRD's conversion webhook, an APIService), where moving it is a trust
	// change a non-writer may not make (EndpointMoves); a webhook
	// configuration's entries are all its writers', endpoints included.
	// The serving check (ServingCheck) derives from it the name the served
	// chain is verified for, for every kind.
	Endpoint Endpoint
}

// Endpoint is where kube-apiserver sends an entry's traffic: a URL, or a
// Service (namespace, name, port, and for webhooks a path). Comparable: two
// entries are served at the same place when their Endpoints are equal.
type Endpoint struct {
	URL       string
	Namespace string
	Name      string
	Path      string
	Port      int32
}

// Input is everything a decision depends on besides the owner's CA: the
// caller decodes it (from an AdmissionReview, or from a watch event for the
// observer) and hands it to Mappings.Evaluate with an Env that looks the CA
// up when the decision needs it. Decide takes an Input whose CA is already
// set (tests and the generators' parity checks).
type Input struct {
	Operation Operation
	Kind      GuardedKind
	Name      string
	// Labels and Annotations of the stored object (UPDATE, DELETE), or of
	// the object created (CREATE).
	Labels      map[string]string
	Annotations map[string]string
	// UpdatedLabels are the labels an UPDATE writes. Every mapping whose
	// selector matches Labels or UpdatedLabels decides the request, so a
	// configuration cannot be relabelled into (or out of) a mapping unseen.
	UpdatedLabels map[string]string
	// UpdatedAnnotations are the annotations an UPDATE writes, where the CA
	// pointer of cert-manager's cainjector is (pointer.go); a decoder sets
	// it to a non-nil map on every UPDATE. nil means the request leaves the
	// annotations as stored (the observer's and tests' inputs).
	UpdatedAnnotations map[string]string
	User               User
	DryRun             bool
	// Entries is the object after the request; nil on DELETE.
	Entries []Entry
	// OldEntries is the object before the request; nil on CREATE.
	OldEntries []Entry
	// CA is the owner's resolved CA, or why it could not be resolved: set
	// by Evaluate from Env.CA, or by the caller of Decide.
	CA CAResult
	// Fingerprints memoizes caBundle parsing across requests; nil parses
	// every bundle. It changes how fast a decision is, never what it is.
	Fingerprints *cabundle.FingerprintCache
	// Observed marks a change seen after the fact by the observer (a watch
	// event), not an admission request: who made it is unknown, so only
	// what the object itself shows is decided (decideObserved).
	Observed bool
	// Write identifies the stored write the input is about, the same
	// whether admission decided the request or the observer saw its result
	// (WriteID), so that records count each write once; empty when unknown.
	Write string
}

// WriteID identifies one write of a configuration: its uid and the
// resourceVersion the write replaced (empty for a creation). Admission
// reads both from the request's objects, the observer from the stored
// object and the state it replaced, so the two name a write alike.
func WriteID(uid, replacedResourceVersion string) string {
	if uid == "" {
		return ""
	}
	return uid + "/" + replacedResourceVersion
}

// CAResult is the outcome of resolving an owner's CA source.
type CAResult struct {
	Set cabundle.CASet
	// Err says why the source could not be read; it names the source.
	Err error
	// Resolved is true once the caller has tried (Set or Err is meaningful).
	Resolved bool
}

// BundleChange is one webhooks[] entry whose caBundle was added, changed or
// emptied by the request.
type BundleChange struct {
	// Index is the entry's position in the new object (the old one when Removed).
	Index   int
	Webhook string
	Old     []byte
	New     []byte
	// Removed is true when the request dropped (or renamed) an entry that
	// carried a caBundle: for kube-apiserver that CA is gone, as if emptied.
	Removed bool
	// kind is the object's, for the field paths.
	kind GuardedKind
	// Hash is the SHA-256 of the new raw caBundle bytes, for flapping detection.
	Hash [sha256.Size]byte
}

// Field is the path of the entry's caBundle; for a removed entry, the list
// it was removed from.
func (b BundleChange) Field() string {
	if b.Removed {
		return entriesField(b.kind)
	}
	return entryField(b.kind, b.Index)
}

// Emptied reports a non-empty caBundle made empty, or removed with its entry.
func (b BundleChange) Emptied() bool { return len(b.Old) > 0 && len(b.New) == 0 }

// ChangedBundles lists the entries whose caBundle the request adds, changes
// or empties, in the new object's order, followed by the entries that
// carried a caBundle and are gone from the new object (removed or renamed:
// names are unique within a configuration, so a rename is a removal plus an
// addition). An empty caBundle on a new entry is not a change here (it
// writes no CA); UnfilledEntries lists those, and the decision denies them
// unless cainjector is about to fill them. DELETE changes nothing.
func ChangedBundles(in *Input) []BundleChange {
	if in.Operation == OperationDelete {
		return nil
	}
	var changes []BundleChange
	p := pairOld(in)
	for i, w := range in.Entries {
		old, changed := p.change(i)
		if !changed {
			continue
		}
		changes = append(changes, BundleChange{Index: i, Webhook: w.Name, Old: old, New: w.CABundle, Hash: in.Fingerprints.Sum(w.CABundle), kind: in.Kind})
	}
	for j, w := range in.OldEntries {
		if len(w.CABundle) > 0 && !p.isKept(j) {
			changes = append(changes, BundleChange{Index: j, Webhook: w.Name, Old: w.CABundle, Removed: true, Hash: in.Fingerprints.Sum(nil), kind: in.Kind})
		}
	}
	return changes
}

// pairing pairs the entries of the new object with the old one by name.
type pairing struct {
	in *Input
	// old maps an entry of the new object to its index in the old one (-1:
	// new entry); nil when every entry kept its position and name.
	old []int
	// kept marks the old entries paired with a new one (when old is set).
	kept []bool
}

// pairOld pairs entries in O(n): entries usually keep their order, which is
// checked first; otherwise an index by name pairs them (a reordered object
// costs one map, not n² comparisons).
func pairOld(in *Input) pairing {
	if len(in.Entries) == len(in.OldEntries) {
		same := true
		for i := range in.Entries {
			if in.Entries[i].Name != in.OldEntries[i].Name {
				same = false
				break
			}
		}
		if same {
			return pairing{in: in}
		}
	}
	byName := make(map[string]int, len(in.OldEntries))
	for j := range in.OldEntries {
		if _, dup := byName[in.OldEntries[j].Name]; !dup {
			byName[in.OldEntries[j].Name] = j
		}
	}
	p := pairing{in: in, old: make([]int, len(in.Entries)), kept: make([]bool, len(in.OldEntries))}
	for i := range in.Entries {
		j, ok := byName[in.Entries[i].Name]
		if !ok {
			j = -1
		} else {
			p.kept[j] = true
		}
		p.old[i] = j
	}
	return p
}

// change returns the old caBundle of in.Entries[i] and whether the request
// changes it.
func (p pairing) change(i int) (old []byte, changed bool) {
	j := i
	if p.old != nil {
		j = p.old[i]
	}
	if j >= 0 && j < len(p.in.OldEntries) {
		old = p.in.OldEntries[j].CABundle
	}
	// bytes.Equal treats nil and empty alike: an entry that stays empty is no change.
	return old, !bytes.Equal(old, p.in.Entries[i].CABundle)
}

// stored reports whether in.Entries[i] has an entry of the same name in
// the object before the request.
func (p pairing) stored(i int) bool { return p.oldIndex(i) >= 0 }

// oldIndex is the index of in.Entries[i]'s entry in the object before the
// request; -1 when it has none.
func (p pairing) oldIndex(i int) int {
	if p.old != nil {
		return p.old[i]
	}
	if i < len(p.in.OldEntries) {
		return i
	}
	return -1
}

// kept reports whether old entry j is still in the new object.
func (p pairing) isKept(j int) bool {
	return p.old == nil || p.kept[j]
}

// NeedsCA reports whether deciding this input requires the owner's CA: only
// when a caBundle is set to something non-empty. Updates that leave every
// caBundle alone never wait on, or fail because of, a CA source.
func NeedsCA(in *Input) bool {
	if in.Operation == OperationDelete {
		return false
	}
	p := pairOld(in)
	for i := range in.Entries {
		if _, changed := p.change(i); changed && len(in.Entries[i].CABundle) > 0 {
			return true
		}
	}
	return false
}

// newAnnotations are the annotations of the object after the request: those
// an UPDATE writes, or the created object's. On DELETE, the stored ones.
func (in *Input) newAnnotations() map[string]string {
	if in.Operation == OperationUpdate && in.UpdatedAnnotations != nil {
		return in.UpdatedAnnotations
	}
	return in.Annotations
}
