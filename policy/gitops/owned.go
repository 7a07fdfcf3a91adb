package gitops

import (
	"cmp"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// cainjectorDescription names cainjector in the comments of the output.
const cainjectorDescription = "cert-manager's cainjector"

// writtenAtRunTime says, per CA source kind, whether a controller writes
// the caBundle at run time, so that the value in Git is not the one the
// cluster must keep:
//   - injectedByCertManager: cainjector writes it (the GuardConfig makes
//     cainjector a writer of the mapping);
//   - secret, configMap: the CA lives in a cluster object, which the
//     owner's controller fills (self-signed webhooks: koordinator, Kyverno,
//     Istio) and copies into the caBundle itself;
//   - certificate, issuer: cert-manager makes the CA at run time; its bytes
//     are not in Git, so cainjector or the owner's controller writes them.
//
// pem is the one kind whose CA is fixed when the GuardConfig is written:
// Git can carry the caBundle, the GitOps tool applies it, and the guard
// checks it against the same inline CA. Ignoring it would only hide a
// caBundle that Git changed.
//
//exhaustive:enforce
var writtenAtRunTime = map[guardapi.CASourceKind]bool{
	guardapi.CASourceSecret:                true,
	guardapi.CASourceConfigMap:             true,
	guardapi.CASourceCertificate:           true,
	guardapi.CASourceIssuer:                true,
	guardapi.CASourceInjectedByCertManager: true,
	guardapi.CASourcePEM:                   false,
}

// WrittenAtRunTime is true when a controller writes the caBundle of a
// mapping whose CA source is of kind k (see writtenAtRunTime).
func WrittenAtRunTime(k guardapi.CASourceKind) bool { return writtenAtRunTime[k] }

// Owned is one webhook configuration (or, for a label selector, every one
// the selector matches) whose caBundles a writer other than the GitOps tool
// writes: the caBundle of each of its webhook entries.
type Owned struct {
	// Mapping is the owner mapping's name.
	Mapping string
	// Group is the kind's API group.
	Group string
	// Kind is a kind of guardapi.Kinds: where its caBundles are is its
	// row's Entries.
	Kind string
	// Name is the configuration's name; empty when LabelSelector selects.
	Name string
	// LabelSelector is the mapping's selector in kubectl's syntax.
	LabelSelector string
	// Writer says who writes the caBundle, for the comments of the output.
	Writer string
}

// Kept is a mapping whose caBundle is left to the GitOps tool, and why.
type Kept struct {
	Mapping string
	Reason  string
}

// OwnedFields lists what each mapping of cfg gives to another writer,
// sorted by kind, name and selector, and the mappings it gives nothing,
// in the GuardConfig's order. A selector that does not convert is an
// error naming the mapping (a loaded GuardConfig has none).
func OwnedFields(cfg *guardapi.GuardConfig) ([]Owned, []Kept, error) {
	var owned []Owned
	var kept []Kept
	for i := range cfg.Owners {
		o := &cfg.Owners[i]
		kind := o.CA.Kind()
		if !WrittenAtRunTime(kind) {
			kept = append(kept, Kept{Mapping: o.Name, Reason: "its CA is inline (" + string(kind) + "), so Git can carry the caBundle"})
			continue
		}
		writer := writerOf(cfg, o)
		for _, named := range o.Match.Named() {
			for _, n := range named.Names {
				owned = append(owned, Owned{Mapping: o.Name, Group: named.Group, Kind: named.Kind, Name: n, Writer: writer})
			}
		}
		if o.Match.LabelSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(o.Match.LabelSelector)
			if err != nil {
				return nil, nil, fmt.Errorf("owners[%s].match.labelSelector: %w", o.Name, err)
			}
			for _, k := range guardapi.Kinds {
				if !k.OwnsTrustOnly { // a selector selects the objects a mapping owns whole
					owned = append(owned, Owned{Mapping: o.Name, Group: k.Group, Kind: k.Kind, LabelSelector: sel.String(), Writer: writer})
				}
			}
		}
	}
	slices.SortFunc(owned, func(a, b Owned) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name), cmp.Compare(a.LabelSelector, b.LabelSelector))
	})
	return owned, kept, nil
}

// writerOf names who writes o's caBundles: cainjector for an injected CA,
// else the mapping's writers.
func writerOf(cfg *guardapi.GuardConfig, o *guardapi.Owner) string {
	if o.CA.InjectedByCertManager != nil {
		return cainjectorDescription + " (" + cfg.CertManager.CAInjectorServiceAccount + ")"
	}
	return "the writers of mapping " + o.Name + " (CA source " + string(o.CA.Kind()) + ")"
}
