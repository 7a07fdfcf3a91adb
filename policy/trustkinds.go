package policy

import (
	"fmt"
	"slices"
	"strings"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// The names of the one entry a CustomResourceDefinition or an APIService
// carries, as decisions, messages and records name it (their rows'
// Entries.Name).
const (
	// EntryConversion is a CRD's conversion webhook (with strategy Webhook).
	EntryConversion = guardapi.EntryConversion
	// EntryService is an APIService's service (a local APIService has none).
	EntryService = guardapi.EntryService
)

// APIVersion is the group/version the guard reads and names objects of
// this kind in (owner references, Events): guardapi.Kinds' for the kinds a
// mapping names, admissionregistration.k8s.io/v1 for the policy shape's
// generated objects.
func (k GuardedKind) APIVersion() string {
	if info, ok := k.Info(); ok {
		return info.APIVersion()
	}
	return "admissionregistration.k8s.io/v1"
}

// EntryField is the path of a field of entry i of an object of the kind,
// from its row's Entries; field is spelled as in a webhooks[] entry
// (clientConfig.caBundle, clientConfig.service, timeoutSeconds), and i < 0
// names every entry. A CRD's entry is its conversion webhook, an
// APIService's its spec, where the service and caBundle are no
// clientConfig's. A kind without a row (no object of it has entries) gets
// field alone.
func EntryField(kind GuardedKind, i int, field string) string {
	info, ok := kind.Info()
	if !ok {
		return field
	}
	e := info.Entries
	if !e.One() {
		if i < 0 {
			return e.List + "[]." + field
		}
		return fmt.Sprintf("%s[%d].%s", e.List, i, field)
	}
	path := slices.Clone(e.At)
	if rest, ok := strings.CutPrefix(field, "clientConfig."); ok {
		path = append(append(path, e.ClientConfig...), rest)
	} else {
		path = append(path, field)
	}
	return strings.Join(path, ".")
}

// entryField is the path of entry i's caBundle in an object of this kind.
func entryField(kind GuardedKind, i int) string { return EntryField(kind, i, "clientConfig.caBundle") }

// entriesField is the path of the entries of an object of this kind, where
// a removed entry was: the list, or the path whose presence means the one
// entry is there.
func entriesField(kind GuardedKind) string {
	info, _ := kind.Info()
	if info.Entries.One() {
		return strings.Join(info.Entries.Present, ".")
	}
	return info.Entries.List
}

// InsecureEntries lists the indexes of the entries of the new object that
// set insecureSkipTLSVerify where the stored entry of the same name did
// not (every such entry of a CREATE): kube-apiserver then trusts any
// serving certificate, the widest trust change there is. Only an
// APIService has the field.
func InsecureEntries(in *Input) []int {
	// Only an APIService has the field: every other write, the admission
	// path's common one, returns here without pairing the entries.
	if in.Operation == OperationDelete || !slices.ContainsFunc(in.Entries, func(w Entry) bool { return w.InsecureSkipTLSVerify }) {
		return nil
	}
	var out []int
	p := pairOld(in)
	for i, w := range in.Entries {
		if !w.InsecureSkipTLSVerify {
			continue
		}
		if j := p.oldIndex(i); j >= 0 && in.OldEntries[j].InsecureSkipTLSVerify {
			continue
		}
		out = append(out, i)
	}
	return out
}

// ChangesTrust reports whether the request changes whom kube-apiserver
// trusts to serve the object: a caBundle added, changed, emptied or
// removed, insecureSkipTLSVerify set, the entry's endpoint moved, or the CA
// pointer moved off the mapping's pin (ca, the mapping's CA source). For a
// kind whose trust alone a mapping owns (GuardedKind.OwnsTrustOnly), only
// such a write is decided by who the subject is.
func ChangesTrust(ca guardapi.CASource, in *Input, changes []BundleChange) bool {
	return len(changes) > 0 || len(InsecureEntries(in)) > 0 || EndpointMoves(in) || PointerMoves(ca, in)
}

// EndpointMoves reports whether the request chooses where an entry's
// traffic goes: on an UPDATE, an entry whose endpoint differs from the
// stored entry of the same name, or an entry the stored object did not
// have (a CRD switched to strategy Webhook); on a CREATE, any entry (a
// conversion webhook, an APIService's service: each names its endpoint).
// kube-apiserver sends that endpoint whole objects (a conversion) or a
// whole API group's requests (an APIService), trusting any server with a
// certificate under the caBundle, and cainjector fills the caBundle of a
// pinned object whoever created it. A CREATE is no fresh start: the guard
// keeps nothing across a DELETE, so a non-writer that deletes an object and
// creates it again at its own Service would move the endpoint in two
// steps where one step (an UPDATE) is denied. A DELETE moves nothing.
func EndpointMoves(in *Input) bool {
	switch in.Operation {
	case OperationCreate:
		return len(in.Entries) > 0
	case OperationUpdate:
	case OperationDelete:
		return false
	}
	p := pairOld(in)
	for i := range in.Entries {
		j := p.oldIndex(i)
		if j < 0 || in.OldEntries[j].Endpoint != in.Entries[i].Endpoint {
			return true
		}
	}
	return false
}

// checkInsecure denies insecureSkipTLSVerify to every writer: no CA source
// can vouch for "any certificate".
func checkInsecure(in *Input) []Violation {
	var out []Violation
	for _, i := range InsecureEntries(in) {
		out = append(out, Violation{
			Rule:    RuleCAMismatch,
			Field:   "spec.insecureSkipTLSVerify",
			Webhook: in.Entries[i].Name,
			Detail:  "insecureSkipTLSVerify is set; kube-apiserver would trust any serving certificate for it",
			Summary: "insecureSkipTLSVerify trusts any serving certificate",
			Hint:    "unset insecureSkipTLSVerify and write the owner's CA into spec.caBundle; skipping verification is a break-glass change",
		})
	}
	return out
}
