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

// FillComing reports whether cainjector will fill the empty caBundles of an
// object with these annotations (the object's after the request) under this
// CA source: only under injectedByCertManager (cainjector is then a writer
// of the mapping, and the CA it injects is the one the guard checks), only
// while the object carries an annotation naming a CA the guard can read
// (cert-manager.io/inject-apiserver-ca does not count: the guard cannot
// name kube-apiserver's CA, so an entry allowed empty for it would stay
// empty, trusting the system roots, for good), and, under a pin, only while
// that annotation is the pin. The decision also requires the CA to be
// readable now (claimsFill).
func FillComing(ca guardapi.CASource, annotations map[string]string) bool {
	if ca.InjectedByCertManager == nil {
		return false
	}
	p := PointerOf(annotations)
	if pin, ok := PinOf(ca); ok {
		return p == pin
	}
	return p.NamesSource()
}

// claimsFill reports whether the request leaves an entry empty under a
// coming fill, which the decision allows only while the CA the fill will
// bring can be read. needsOwnerCA asks it to know whether to resolve the
// CA; checkUnfilled, which has listed the entries already, asks fillFor.
func claimsFill(co *compiledOwner, in *Input, writer bool) bool {
	return fillFor(co, in, writer) && len(UnfilledEntries(in)) > 0
}

// fillFor reports whether an empty entry of this request may wait for
// cainjector's fill: only a writer's. A subject that may not write the
// trust never gets here with an entry to fill: a new entry of a CRD or an
// APIService names an endpoint (EndpointMoves), which is not-owner, and
// every write of a webhook configuration by it is.
func fillFor(co *compiledOwner, in *Input, writer bool) bool {
	return writer && FillComing(co.spec.CA, in.newAnnotations())
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
	for i, w := range in.Entries {
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
func checkUnfilled(co *compiledOwner, in *Input, writer bool) []Violation {
	unfilled := UnfilledEntries(in)
	if len(unfilled) == 0 {
		return nil
	}
	why := ""
	if fillFor(co, in, writer) {
		// The fill is coming only if cainjector can read the CA it will
		// write: an annotation naming a missing Certificate would leave
		// the entry empty, trusting the system roots, for good.
		_, err := ownerCA(co, in)
		if err == nil {
			return nil
		}
		why = "; the fill cert-manager's cainjector would make cannot come: " + err.Error()
	}
	out := make([]Violation, 0, len(unfilled))
	for _, i := range unfilled {
		out = append(out, Violation{
			Rule:    RuleCAMismatch,
			Field:   entryField(in.Kind, i),
			Webhook: in.Entries[i].Name,
			Detail:  "the new entry has no caBundle; kube-apiserver would trust its system roots for it, so any host with a publicly trusted certificate could serve it" + why,
			Summary: "the new entry has no caBundle; kube-apiserver would trust its system roots",
			Hint:    UnfilledHint,
		})
	}
	return out
}

// UnfilledHint is the fix for an entry without a caBundle, in both shapes.
const UnfilledHint = "write the owner's CA into the entry; only a mapping with ca.injectedByCertManager may leave it empty, on an object whose cert-manager.io/inject-ca-from or inject-ca-from-secret annotation names a CA that can be read (the pin, when the mapping pins one), for cainjector to fill"
