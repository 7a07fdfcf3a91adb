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
// 2 or 1 bytes. The shifted CA texts (caShift1, caShift2) are literals when
// the CA is (the generator encodes the CA's bytes without the first one or
// two); for a CA read from a param they are computed in CEL from its base64
// text, one character from two neighbours. VAP variables are evaluated
// lazily and once per request, so a write that is not a merge never pays
// for them.
//
// The mixed group is a constant, "\n--" ("Ci0t") or "-\n-" ("LQot"): it
// takes K's last bytes to be the end of a PEM footer and the CA's first to
// be a BEGIN line. Both are checked (endsWithFooter, caStartsWithHeader),
// so a merge is accepted only when the new bytes are exactly K followed by
// the CA, K ends with a whole footer line "\n-----END CERTIFICATE-----\n"
// and the CA starts with "-----BEGIN CERTIFICATE-----". Without the checks
// the constant rewrites K's last bytes: a foreign block stored behind a
// broken END line ("-----END CERTIFICATE-----x", which kube-apiserver's PEM
// parser skips) would come back whole in the "merge" and be trusted. With
// them, Go's encoding/pem (kube-apiserver reads a caBundle with
// x509.CertPool.AppendCertsFromPEM) parses the new bundle to exactly K's
// certificates followed by the CA's: every block that starts in K finds its
// END line in K (at the latest K's own last line, which no header or type
// line can span), so nothing in K is decided differently, and the first
// block after K is the CA's (Test_rotation_mergeActivatesNothing).
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
	return r.caExpressionOr(part, CELString(r.literal()))
}

// caExpressionOr is caExpression whose literal is the CEL expression lit:
// the variable syncedCA in the variables, which hold the literal once.
func (r rotation) caExpressionOr(part policyPart, lit string) string {
	if part != partCA {
		return lit
	}
	key := CELString(r.ca.Param.Key)
	return fmt.Sprintf(`params != null && has(params.data) && %s in params.data ? string(params.data[%s]) : %s`, key, key, lit)
}

// synced is CEL, for the variables and validations, for the base64 text
// of the CA the guard last synced: the variable ca where that is the CA
// (a literal), else the variable syncedCA, which holds the literal once
// (under a param the CA is the param's). Only when the literal is known.
func (r rotation) synced(part policyPart) string {
	if part == partCA {
		return `variables.syncedCA`
	}
	return `variables.ca`
}

// variables are the rotation rule's variables. The CA of a param is known
// only to kube-apiserver, which derives the shifted texts from it in CEL: a
// pass over every character of the CA, on each request that checks a merge
// (the bulk of what a merge costs). A literal CA is known here, and so are
// its shifted texts: the base64 text of its bytes without the first one, or
// the first two, which is exactly what caShift1 and caShift2 compute.
func (r rotation) variables(part policyPart) []admv1.Variable {
	if part == partCA {
		return r.paramVariables()
	}
	return []admv1.Variable{
		{Name: "ca", Expression: r.caExpression(part)},
		{Name: "caIsPEM", Expression: caIsPEM},
		{Name: "caShift1", Expression: CELString(shiftedText(r.ca.PEM, 1))},
		{Name: "caShift2", Expression: CELString(shiftedText(r.ca.PEM, 2))},
	}
}

// shiftedText is the base64 text of pem without its first n bytes; "" when
// fewer than n+1 bytes remain, as caShift1 and caShift2 answer.
func shiftedText(pem []byte, n int) string {
	if len(pem) < n+1 {
		return ""
	}
	return base64.StdEncoding.EncodeToString(pem[n:])
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
	merged := `(variables.ca != "" && ((` + oldHasBundle + ` && [variables.oldBundles[w.name]].all(k, ` +
		mergedAfter(`k`) + `))` + r.mergedAfterLiteral(part) + `))`
	return current + ` || ` + oldHasSameBundle + ` || ` + merged
}

// orLiteral also accepts the literal when the param is the current CA: the CA
// the guard last synced, which a writer may still be writing.
func (r rotation) orLiteral(part policyPart) string {
	if part != partCA || len(r.ca.PEM) == 0 {
		return ""
	}
	return ` || ` + newBundle + ` == ` + r.synced(part)
}

// mergedAfter is CEL that is true when entry w's caBundle is the PEM bytes
// whose base64 text is the CEL expression k, followed by the current CA.
func mergedAfter(k string) string { return mergedAfterOf(k, newBundle) }

// mergedAfterOf is mergedAfter for the caBundle whose base64 text is the
// CEL expression nb. The footer and header checks come first: they look at
// a few characters, and fail at once for a K a merge cannot follow.
//
// K's length in bytes is bound once, to q, by a macro over the one-element
// list [byteLength(k)] (CEL has no let; a matchCondition cannot read
// variables), so that the formula is spelled once.
func mergedAfterOf(k, nb string) string {
	return fmt.Sprintf(`(%[1]s != "" && %[4]s && %[5]s && [%[3]s].all(q, %[2]s.startsWith(%[1]s.substring(0, q / 3 * 4)) && %[2]s.substring(q / 3 * 4) == %[6]s))`,
		k, nb, byteLength(k), endsWithFooter(k), caStartsWithHeader,
		mergedTail("q", `variables.ca`, `"Ci0t" + variables.caShift2`, `"LQot" + variables.caShift1`))
}

// byteLength is CEL for the length in bytes of the bytes whose base64
// text is the CEL expression k.
func byteLength(k string) string {
	return fmt.Sprintf(`(size(%[1]s) / 4 * 3 - (%[1]s.endsWith("==") ? 2 : %[1]s.endsWith("=") ? 1 : 0))`, k)
}

// mergedTail is CEL for the base64 text a merge appends after the whole
// groups of a stored bundle of q bytes (a CEL expression): the CA's text
// when q is a multiple of 3, else the mixed group followed by the CA
// shifted by two bytes (afterOne, for q%3 = 1) or by one (afterTwo).
func mergedTail(q, ca, afterOne, afterTwo string) string {
	return fmt.Sprintf(`(%[1]s %% 3 == 0 ? %[2]s : %[1]s %% 3 == 1 ? %[3]s : %[4]s)`, q, ca, afterOne, afterTwo)
}

// pemFooter ends every bundle a merge may follow, and pemHeader starts every
// CA a merge may append: the forms Go's encoding/pem writes, and the only
// ones for which the merge parses to the stored certificates plus the CA.
const (
	pemFooter = "\n-----END CERTIFICATE-----\n"
	pemHeader = "-----BEGIN CERTIFICATE-----"
)

// caIsPEM is the policy variable that is true when the owner's CA starts
// with pemHeader. pemHeader is 27 bytes, whole base64 groups: its text is
// a prefix of the CA's. Every merge check reads it (caStartsWithHeader).
var caIsPEM = `variables.ca.startsWith(` + CELString(base64.StdEncoding.EncodeToString([]byte(pemHeader))) + `)`

// caStartsWithHeader reads caIsPEM.
const caStartsWithHeader = `variables.caIsPEM`

// endsWithFooter is CEL that is true when the bytes whose base64 text is
// the CEL expression k end with pemFooter. Where the footer starts depends
// on k's length modulo 3 (told apart by the padding: none, "==" or "="):
// its bytes from the first group boundary on are a fixed text, the
// characters of the group before it that hold only footer bits are fixed
// too, and one character holds both a byte before the footer and the
// footer's first bits: its value modulo 2^bits must be theirs.
func endsWithFooter(k string) string {
	alts := make([]string, 0, 3)
	for r := range 3 {
		alts = append(alts, footerAt(k, r))
	}
	return `(size(` + k + `) >= 40 && (` + strings.Join(alts, " || ") + `))`
}

// footerAt is endsWithFooter for bytes whose length modulo 3 is r.
func footerAt(k string, r int) string {
	skip := (3 - r) % 3 // footer bytes before the first group boundary
	tail := base64.StdEncoding.EncodeToString([]byte(pemFooter[skip:]))
	if r == 0 {
		return k + `.endsWith(` + CELString(tail) + `)`
	}
	// The group before tail: r bytes of k's own, then the footer's first
	// skip bytes. Its characters from index 8r/6 + 1 on hold footer bits
	// only; character 8r/6 holds its low 6(8r/6 + 1) - 8r bits from the
	// footer.
	group := base64.StdEncoding.EncodeToString(append(make([]byte, r), pemFooter[:skip]...))
	mixed := 8 * r / 6
	known := group[mixed+1:] + tail
	mod := 1 << (6*(mixed+1) - 8*r)
	want := strings.IndexByte(base64Alphabet, group[mixed]) % mod
	var chars []string
	for i, c := range base64Alphabet {
		if i%mod == want {
			chars = append(chars, string(c))
		}
	}
	return fmt.Sprintf(`(%[1]s.endsWith(%[2]s) && %[1]s.substring(size(%[1]s) - %[3]d, size(%[1]s) - %[4]d) in %[5]s)`,
		k, CELString(known), len(known)+1, len(known), celList(chars))
}

// mergedAfterLiteral accepts the CA the guard last synced followed by the
// current one in an entry that held a caBundle: a merge that dropped the
// stored bundle's expired certificates.
// The literal's groups are cut in Go, not in CEL.
func (r rotation) mergedAfterLiteral(part policyPart) string {
	if len(r.ca.PEM) == 0 || !strings.HasSuffix(string(r.ca.PEM), pemFooter) {
		// A literal that does not end with a whole footer line cannot be
		// followed by a merge (see endsWithFooter).
		return ""
	}
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
	return fmt.Sprintf(` || (%[6]s && %[1]s.startsWith(%[2]s.substring(0, %[3]d)) && %[1]s.substring(%[3]d) == %[4]s && %[5]s)`, newBundle, r.synced(part), cut, tail, oldHasBundle, caStartsWithHeader)
}

// newHasBundle says entry w of the request's object carries a caBundle;
// oldHasSameBundle and oldHasBundle look up entry w in the stored object by
// name (names are unique within a configuration), in the map oldBundles
// builds once per request: a lookup costs the same whatever the number of
// entries, so that checking every entry costs a pass over the object, not
// a scan of the stored object per entry (which grew with the square of the
// entries and put a writer's large configuration past kube-apiserver's
// cost limit). Every optional field is read after has().
const (
	newHasBundle     = `(has(w.clientConfig) && has(w.clientConfig.caBundle))`
	oldHasSameBundle = `(w.name in variables.oldBundles && variables.oldBundles[w.name] == string(w.clientConfig.caBundle))`
	oldHasBundle     = `(w.name in variables.oldBundles)`
)

// oldBundles is the policy variable mapping each entry of the stored object
// that holds a caBundle to that caBundle's base64 text; empty unless the
// request is an UPDATE.
const oldBundles = `request.operation == "UPDATE" && oldObject != null && has(oldObject.webhooks) ? ` +
	`oldObject.webhooks.filter(o, has(o.clientConfig) && has(o.clientConfig.caBundle)).transformMapEntry(i, o, {o.name: string(o.clientConfig.caBundle)}) : {}`
