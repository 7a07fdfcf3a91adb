package policy

import (
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	cabundle "github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// GuardedKind is the kind of object a request is about: one of the four
// kinds whose caBundles kube-apiserver trusts, or an object the policy
// shape generates.
type GuardedKind string

const (
	KindValidating GuardedKind = guardapi.KindValidatingWebhookConfiguration
	KindMutating   GuardedKind = guardapi.KindMutatingWebhookConfiguration
	// KindCRD and KindAPIService carry one caBundle each: a CRD's
	// conversion webhook's, an APIService's. A mapping owns that trust,
	// not the whole object (OwnsTrustOnly).
	KindCRD        GuardedKind = guardapi.KindCustomResourceDefinition
	KindAPIService GuardedKind = guardapi.KindAPIService
)

// Info is the kind's row of guardapi.Kinds; false for a kind a mapping
// cannot name (the policy shape's generated objects, or any other string).
func (k GuardedKind) Info() (guardapi.KindInfo, bool) { return guardapi.KindInfoOf(string(k)) }

// OwnsTrustOnly reports whether a mapping owns only the caBundle of an
// object of this kind, not the object (guardapi.KindInfo.OwnsTrustOnly:
// a CustomResourceDefinition, an APIService). A write by a subject that
// is not a writer is then the mapping's to decide only when it changes
// the trust (a caBundle, insecureSkipTLSVerify).
func (k GuardedKind) OwnsTrustOnly() bool {
	info, ok := k.Info()
	return ok && info.OwnsTrustOnly
}

// ShortName abbreviates the kind in report names and tables: the row's
// (vwc, mwc and crd as kubectl's short names, apiservice as kubectl names
// the resource), vap and vapb for the policy shape's generated objects (which
// kubectl does not abbreviate), and any other kind (read from a record,
// not decided) in lower case.
func (k GuardedKind) ShortName() string {
	if info, ok := k.Info(); ok {
		return info.ShortName
	}
	switch k {
	case KindAdmissionPolicy:
		return "vap"
	case KindAdmissionPolicyBinding:
		return "vapb"
	case KindValidating, KindMutating, KindCRD, KindAPIService:
		// Their rows name them.
	}
	return strings.ToLower(string(k))
}

// MatchResult is the mapping that owns a configuration.
type MatchResult struct {
	// Owner is the owning mapping; nil when no mapping matches or when
	// Conflicting is set.
	Owner *guardapi.Owner
	// Mode is the owner's effective mode.
	Mode guardapi.Mode
	// Conflicting names every mapping that matched when more than one did
	// (only possible through label selectors; names are checked at load).
	Conflicting []string
	index       int
}

// MatchInput matches the configuration of a request: on UPDATE, a selector
// mapping that matches the stored labels or the written ones claims it (a
// move between two mappings is then ambiguous: neither owner alone may make
// it; break-glass may).
func (c *Mappings) MatchInput(in *Input) MatchResult {
	if in.Operation == OperationUpdate {
		return c.Match(in.Kind, in.Name, in.Labels, in.UpdatedLabels)
	}
	return c.Match(in.Kind, in.Name, in.Labels)
}

// Match finds the mapping that owns the named configuration; a selector
// mapping matches when its selector matches any of the label sets. Name
// matches are an index lookup; only selector mappings are evaluated, so the
// cost does not grow with the number of name-matched mappings.
func (c *Mappings) Match(kind GuardedKind, name string, labelSets ...map[string]string) MatchResult {
	matched := -1
	if i, ok := c.byName[kind][name]; ok {
		matched = i
	}
	var conflicting []int
	selectors := c.selectors
	if kind.OwnsTrustOnly() {
		selectors = nil // label selectors select webhook configurations only
	}
	for _, i := range selectors {
		if i == matched || !c.owners[i].selectsAny(labelSets) {
			continue
		}
		if matched < 0 {
			matched = i
			continue
		}
		if conflicting == nil {
			conflicting = append(conflicting, matched)
		}
		conflicting = append(conflicting, i)
	}
	if len(conflicting) > 0 {
		mode := guardapi.ModeAudit
		names := make([]string, 0, len(conflicting))
		for _, i := range conflicting {
			names = append(names, c.owners[i].spec.Name)
			if c.owners[i].mode == guardapi.ModeEnforce {
				mode = guardapi.ModeEnforce // the strictest of the claimants wins
			}
		}
		sort.Strings(names)
		return MatchResult{Conflicting: names, Mode: mode, index: -1}
	}
	if matched < 0 {
		return MatchResult{index: -1}
	}
	return MatchResult{Owner: c.owners[matched].spec, Mode: c.owners[matched].mode, index: matched}
}

// NamesConfiguration reports whether a mapping lists the configuration by
// name: a name the configuration bounds, unlike the names a selector
// mapping claims, which requests choose.
func (c *Mappings) NamesConfiguration(kind GuardedKind, name string) bool {
	_, ok := c.byName[kind][name]
	return ok
}

// InlineCA returns the owner's inline PEM CA set, if its source is pem.
func (c *Mappings) InlineCA(m MatchResult) (cabundle.CASet, bool) {
	if m.index < 0 || c.owners[m.index].inlineCA == nil {
		return cabundle.CASet{}, false
	}
	return *c.owners[m.index].inlineCA, true
}

func (o *compiledOwner) selectsAny(labelSets []map[string]string) bool {
	for _, ls := range labelSets {
		if o.selector.Matches(labels.Set(ls)) {
			return true
		}
	}
	return len(labelSets) == 0 && o.selector.Matches(labels.Set(nil))
}
