package policy

import (
	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// The annotations cert-manager's cainjector fills a configuration's
// caBundles from, and that the guard can resolve the injected CA from
// (webhook/casource). The generated policy (policy/vap) checks the same
// ones, so both shapes agree on when a fill is coming.
const (
	AnnotationInjectCAFrom       = cmapi.WantInjectAnnotation
	AnnotationInjectCAFromSecret = cmapi.WantInjectFromSecretAnnotation
)

// FillComing reports whether cainjector will fill the empty caBundles of a
// configuration with these annotations under this CA source: only under
// injectedByCertManager (cainjector is then a writer of the mapping, and
// the CA it injects is the one the guard checks), and only while the object
// carries an annotation naming that CA. cert-manager.io/inject-apiserver-ca
// does not count: the guard cannot name kube-apiserver's CA, so it denies
// that fill (ca-unavailable), and an entry allowed empty for it would stay
// empty, trusting the system roots, for good.
func FillComing(ca guardapi.CASource, annotations map[string]string) bool {
	if ca.InjectedByCertManager == nil {
		return false
	}
	return annotations[AnnotationInjectCAFrom] != "" || annotations[AnnotationInjectCAFromSecret] != ""
}

// UnfilledEntries lists the indexes of the entries of the new object that
// have no caBundle (absent or zero-length) and no stored entry of the same
// name: every entry of a CREATE, and each new or renamed entry of an UPDATE.
// An entry that is empty now and was stored empty is no change; one that
// was stored non-empty is an emptied caBundle (ChangedBundles lists it).
func UnfilledEntries(in *Input) []int {
	if in.Operation == OperationDelete {
		return nil
	}
	var out []int
	p := pairOld(in)
	for i, w := range in.Webhooks {
		if len(w.CABundle) == 0 && !p.stored(i) {
			out = append(out, i)
		}
	}
	return out
}

// checkUnfilled decides the entries UnfilledEntries lists. An entry without
// a caBundle is not "no CA": kube-apiserver then verifies the webhook's
// serving certificate against its own system roots, so a URL webhook (or a
// service one, where the API server host's roots hold a private CA) may be
// any host with a publicly trusted certificate. A writer may leave an entry
// empty only while a fill by cainjector is coming (FillComing); the window
// closes at the first fill, because a stored non-empty caBundle may never be
// emptied by a writer (checkBundles).
func checkUnfilled(co *compiledOwner, in *Input) []Violation {
	unfilled := UnfilledEntries(in)
	if len(unfilled) == 0 || FillComing(co.spec.CA, in.Annotations) {
		return nil
	}
	out := make([]Violation, 0, len(unfilled))
	for _, i := range unfilled {
		out = append(out, Violation{
			Rule:    RuleCAMismatch,
			Field:   entryField(in.Kind, i),
			Webhook: in.Webhooks[i].Name,
			Detail:  "the new entry has no caBundle; kube-apiserver would trust its system roots for it, so any host with a publicly trusted certificate could serve it",
			Summary: "the new entry has no caBundle; kube-apiserver would trust its system roots",
			Hint:    UnfilledHint,
		})
	}
	return out
}

// UnfilledHint is the fix for an entry without a caBundle, in both shapes.
const UnfilledHint = "write the owner's CA into the entry; only a mapping with ca.injectedByCertManager may leave it empty, on a configuration with a cert-manager.io/inject-ca-from or inject-ca-from-secret annotation, for cainjector to fill"
