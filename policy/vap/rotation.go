package vap

import (
	"encoding/base64"
	"fmt"
	"strings"

	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"
)

// The rotation rule in CEL.
//
// The webhook allows a changed caBundle whose certificates are each in the
// owner's current CA set or already in the stored caBundle of the same entry,
// as long as one is current. CEL in kube-apiserver 1.37 cannot parse PEM,
// and it cannot even decode base64 (the Kubernetes CEL environment has no
// encoders library), while a caBundle reaches CEL as the base64 text of its
// bytes: at runtime kube-apiserver hands CEL the object as JSON converts it.
// The type checker calls caBundle bytes; string() of the runtime string is
// the string itself and type-checks as string(bytes), so comparing
// string(caBundle) with base64 text works at runtime and passes the checker
// (TestPolicyModeEnforces shows it on the real kube-apiserver; a bytes
// literal would type-check and then fail every request).
//
// So the policy allows, in base64 text, exactly the bundles the two kinds of
// real writers produce:
//
//   - a replacing writer (Gatekeeper's cert-controller, Kyverno, Koordinator)
//     writes the owner's CA exactly as its source holds it;
//   - a merging writer (cert-manager's cainjector with CAInjectorMerging, on
//     by default since v1.21) writes the stored bundle's unexpired
//     certificates followed by the new CA, each PEM-encoded by Go's
//     encoding/pem. When nothing expired that is the stored bundle followed
//     by the CA; when the stored bundle's older certificates expired it is
//     the CA the guard last saw (the previous one) followed by the new one.
//
// Where the CA lives decides whether kube-apiserver knows the new CA when the
// writer writes it. A CA literal in the policy is only as new as the guard's
// last sync, and the guard learns of a rotation no sooner than the writer
// does, so every rotation raced the guard and lost (about 17 denied writes
// per rotation of a replacing writer). When the owner's CA is a Secret key,
// the mapping gets a second policy that names that Secret as its param:
// kube-apiserver's own informer delivers the rotated Secret to the policy as
// it delivers it to the writer. Its binding's parameterNotFoundAction is
// Allow: with Deny a missing Secret would fail every request the policy
// matches, break-glass and unrelated writes included (see policyPart for
// what Allow costs and how the main policy covers it).
//
// The stored bundle followed by the CA is not the concatenation of their
// base64 texts: base64 encodes groups of three bytes, so the CA's text
// depends on the stored bundle's length modulo 3. With the stored bundle K of
// q bytes, the new text is K's first q/3 groups, then (for q%3 = 1 or 2) one
// group mixing K's last bytes with the CA's first, then the CA shifted by
// 2 or 1 bytes. K ends with Go's PEM footer ("-----\n") and the CA starts
// with "-----BEGIN", so the mixed group is always "\n--" ("Ci0t") or "-\n-"
// ("LQot"). The shifted CA texts (caShift1, caShift2) are computed in CEL from
// the CA's base64 text, one character from two neighbours; VAP variables are
// evaluated lazily and once per request, so a write that is not a merge
// never pays for them.
//
// Limits, documented in docs/policy-shape.md: other orders, other encodings
// (CRLF, extra text), a CA source holding a certificate already in the stored
// bundle, and a merge that drops an expired certificate from a stored bundle
// the guard's literal does not start with are denied here, though the webhook
// allows them.
type rotation struct{ ca CA }

// policyPart is what one generated policy of a mapping decides.
//
// kube-apiserver skips a binding whose param object does not exist when its
// parameterNotFoundAction is Allow (it never evaluates the policy: params is
// null only for a binding without a paramRef), and with Deny it fails every
// request the policy matches, break-glass included. So the param cannot sit
// in the policy that decides not-owner: a deleted CA Secret would switch
// ownership off. A mapping whose CA is a Secret key gets two policies
// instead: partOwner decides not-owner and never reads a param; partCA
// checks caBundles against the Secret, read as its param. While the guard
// sees the Secret missing, partAll takes partOwner's place and checks
// caBundles against the literal too (fail closed with none), so that the
// only gap is the guard's own delay in seeing a Secret deleted (see
// docs/rotation.md).
type policyPart int

const (
	partAll   policyPart = iota // not-owner and caBundles against the literal
	partOwner                   // not-owner only
	partCA                      // caBundles against the CA Secret, a param
)

// suffix is appended to the policy's name.
func (p policyPart) suffix() string {
	if p == partCA {
		return caSuffix
	}
	return ""
}

// parts are the policies a mapping with this CA generates per target.
func (m mappingPolicy) parts() []policyPart {
	switch {
	case m.ca.Param == nil:
		return []policyPart{partAll}
	case m.ca.ParamMissing:
		return []policyPart{partAll, partCA}
	}
	return []policyPart{partOwner, partCA}
}

// base64Values maps each base64 character (and the padding "=") to its
// 6-bit value.
var base64Values = func() string {
	var b strings.Builder
	b.WriteString("{")
	for i, c := range base64Alphabet {
		fmt.Fprintf(&b, "%q: %d, ", string(c), i)
	}
	b.WriteString(`"=": 0}`)
	return b.String()
}()

// base64Chars lists the base64 characters by value.
var base64Chars = func() string {
	parts := make([]string, len(base64Alphabet))
	for i, c := range base64Alphabet {
		parts[i] = fmt.Sprintf("%q", string(c))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}()

const base64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

const (
	// caValues are the 6-bit values of the CA's base64 text, with two
	// zero values appended so that the shifts may read one past the end.
	caValues = `(variables.ca + "==").split("").map(c, variables.b64[c])`
	// caLen is the CA's length in bytes.
	caLen = `size(variables.ca) / 4 * 3 - (variables.ca.endsWith("==") ? 2 : variables.ca.endsWith("=") ? 1 : 0)`
	// caShift1 is the base64 text of the CA without its first byte: output
	// character m is bits 8+6m..13+6m of the CA, the low 4 bits of input
	// character m+1 and the high 2 of m+2. caShift2 drops two bytes: bits
	// 16+6m.., the low 2 bits of m+2 and the high 4 of m+3. Each is padded
	// with "=" to whole groups as the encoder pads.
	caShift1 = `variables.caLen < 2 ? "" : lists.range(((variables.caLen - 1) * 4 + 2) / 3).map(m, ` +
		`variables.b64chars[(variables.caValues[m + 1] % 16) * 4 + variables.caValues[m + 2] / 16]).join("") + ` +
		`"==".substring(0, (variables.caLen + 1) / 3 * 4 - ((variables.caLen - 1) * 4 + 2) / 3)`
	caShift2 = `variables.caLen < 3 ? "" : lists.range(((variables.caLen - 2) * 4 + 2) / 3).map(m, ` +
		`variables.b64chars[(variables.caValues[m + 2] % 4) * 16 + variables.caValues[m + 3] / 4]).join("") + ` +
		`"==".substring(0, variables.caLen / 3 * 4 - ((variables.caLen - 2) * 4 + 2) / 3)`
	// newBundle is entry w's caBundle as base64 text.
	newBundle = `string(w.clientConfig.caBundle)`
)

// literal is the base64 text of the CA the guard resolved; "" when none.
func (r rotation) literal() string {
	return base64.StdEncoding.EncodeToString(r.ca.PEM)
}

// caExpression is the owner's current CA as base64 text: for partCA the
// param's key (the literal while the key is absent), else the literal.
func (r rotation) caExpression(part policyPart) string {
	lit := CELString(r.literal())
	if part != partCA {
		return lit
	}
	key := CELString(r.ca.Param.Key)
	return fmt.Sprintf(`params != null && has(params.data) && %s in params.data ? string(params.data[%s]) : %s`, key, key, lit)
}

// paramKind is the param kind of a partCA policy: a Secret.
func (r rotation) paramKind(part policyPart) *admv1.ParamKind {
	if part != partCA {
		return nil
	}
	return &admv1.ParamKind{APIVersion: "v1", Kind: "Secret"}
}

// paramRef names the CA's Secret; a missing Secret leaves params null
// (Allow) rather than failing the binding for every request (Deny).
func (r rotation) paramRef(part policyPart) *admv1.ParamRef {
	if part != partCA {
		return nil
	}
	return &admv1.ParamRef{
		Name:                    r.ca.Param.Name,
		Namespace:               r.ca.Param.Namespace,
		ParameterNotFoundAction: ptr.To(admv1.AllowAction),
	}
}

// allowed is CEL that is true when entry w's changed caBundle passes the
// rotation rule.
func (r rotation) allowed(part policyPart) string {
	current := `(variables.ca != "" && (` + newBundle + ` == variables.ca` + r.orLiteral(part) + `))`
	merged := `(variables.ca != "" && ((request.operation == "UPDATE" && oldObject != null && has(oldObject.webhooks) && ` +
		`oldObject.webhooks.exists(o, o.name == w.name && has(o.clientConfig) && has(o.clientConfig.caBundle) && ` +
		mergedAfter(`string(o.clientConfig.caBundle)`) + `))` + r.mergedAfterLiteral() + `))`
	return current + ` || ` + oldHasSameBundle + ` || ` + merged
}

// orLiteral also accepts the literal when the param is the current CA: the CA
// the guard last synced, which a writer may still be writing.
func (r rotation) orLiteral(part policyPart) string {
	if part != partCA || len(r.ca.PEM) == 0 {
		return ""
	}
	return ` || ` + newBundle + ` == ` + CELString(r.literal())
}

// mergedAfter is CEL that is true when entry w's caBundle is the PEM bytes
// whose base64 text is the CEL expression k, followed by the current CA.
func mergedAfter(k string) string { return mergedAfterOf(k, newBundle) }

// mergedAfterOf is mergedAfter for the caBundle whose base64 text is the
// CEL expression nb.
func mergedAfterOf(k, nb string) string {
	q := fmt.Sprintf(`(size(%[1]s) / 4 * 3 - (%[1]s.endsWith("==") ? 2 : %[1]s.endsWith("=") ? 1 : 0))`, k)
	cut := q + ` / 3 * 4`
	return fmt.Sprintf(`(%[1]s != "" && %[2]s.startsWith(%[1]s.substring(0, %[3]s)) && %[2]s.substring(%[3]s) == `+
		`(%[4]s %% 3 == 0 ? variables.ca : %[4]s %% 3 == 1 ? "Ci0t" + variables.caShift2 : "LQot" + variables.caShift1))`,
		k, nb, cut, q)
}

// mergedAfterLiteral accepts the CA the guard last synced followed by the
// current one in an entry that held a caBundle: a merge that dropped the
// stored bundle's expired certificates.
// The literal's groups are cut in Go, not in CEL.
func (r rotation) mergedAfterLiteral() string {
	if len(r.ca.PEM) == 0 {
		return ""
	}
	lit := r.literal()
	n := len(r.ca.PEM)
	cut := n / 3 * 4
	var tail string
	switch n % 3 {
	case 0:
		tail = `variables.ca`
	case 1:
		tail = `"Ci0t" + variables.caShift2`
	default:
		tail = `"LQot" + variables.caShift1`
	}
	// Only an entry that held a caBundle may keep older certificates: a new
	// or renamed entry, and every entry of a CREATE, has nothing stored and
	// may hold only the current CA, as in the static shape.
	return fmt.Sprintf(` || (%[1]s.startsWith(%[2]s) && %[1]s.substring(%[3]d) == %[4]s && %[5]s)`, newBundle, CELString(lit[:cut]), cut, tail, oldHasBundle)
}
