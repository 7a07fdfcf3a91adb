package static

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// Deciding in kube-apiserver the writes whose answer is always "allowed".
//
// Most writes of a guarded object cannot be denied: a writer's write to a
// webhook configuration its mapping owns that leaves the trust alone (a
// label, an annotation, a timeout, a rule, a no-op sync), and anyone's
// write to a named CRD or APIService that leaves its trust alone. Sending
// them to the guard costs each a TLS round trip and two serialised
// objects, and while the guard is down (failurePolicy Fail) it refuses
// them. The skip condition lets kube-apiserver decide them in-process:
// the enforcing entry is not called for them. What still reaches the
// guard: every CREATE and DELETE, every write by a subject that is not a
// writer of the object's only owner, every write of an object no mapping
// or two mappings claim, and every write that changes a caBundle, an
// endpoint, the entries, the CA pointer or, under a label-selected
// mapping, the labels it selects on (the owner is computed from the old
// and the new labels, as the guard computes it). None of the guard's
// state is fed by the skipped writes: the write budget, flapping
// detection and records count caBundle changes and decisions that can
// deny; break-glass writes keep their own entry, always called.
//
// The writer lists live in the GuardConfig. A manifest rendered from an
// older GuardConfig could skip a subject that is no longer a writer, so
// the condition also asks kube-apiserver's authorizer whether the guard's
// service account holds the grant for this very GuardConfig: verb "skip"
// on webhook-guard.io/staticmanifests named by the GuardConfig's
// fingerprint. The chart grants the fingerprint of the GuardConfig it
// installs; a manifest rendered from any other GuardConfig names a
// fingerprint nobody granted, so its condition never skips: an outdated
// manifest sends more writes to the guard, never fewer, until it is
// rendered again.

// Skip is what the skip condition is generated from.
type Skip struct {
	// Config is the GuardConfig the mappings and writers come from.
	Config *guardapi.GuardConfig
	// Fingerprint is Config's (Fingerprint of the file it was read from).
	Fingerprint string
	// GrantServiceAccount ("namespace/name") is the account whose grant
	// for Fingerprint switches the condition on: the guard's.
	GrantServiceAccount string
}

// The grant the skip condition asks the authorizer about.
const (
	GrantGroup    = "webhook-guard.io"
	GrantResource = "staticmanifests"
	GrantVerb     = "skip"
	// SkipConditionName is the enforcing entry's matchCondition.
	SkipConditionName = "guard-decides"
)

// Fingerprint is the fingerprint of a GuardConfig file: the first 128
// bits of the SHA-256 of its bytes, in hex. The chart computes the same
// from the guard.yaml it renders (sha256sum, first 32 characters).
func Fingerprint(config []byte) string {
	sum := sha256.Sum256(config)
	return hex.EncodeToString(sum[:16])
}

// validate names what is missing or malformed.
func (s *Skip) validate() error {
	if s.Config == nil {
		return fmt.Errorf("Skip.Config: a GuardConfig is required")
	}
	if len(s.Fingerprint) != 32 || strings.Trim(s.Fingerprint, "0123456789abcdef") != "" {
		return fmt.Errorf("Skip.Fingerprint %q: must be 32 lowercase hex digits (Fingerprint)", s.Fingerprint)
	}
	if _, _, ok := guardapi.SplitServiceAccount(s.GrantServiceAccount); !ok {
		return fmt.Errorf("Skip.GrantServiceAccount %q: must be \"namespace/name\"", s.GrantServiceAccount)
	}
	return nil
}

// condition is the matchCondition: false (skip) for the writes whose answer
// is always "allowed", while the grant holds.
func (s *Skip) condition() (string, error) {
	var skips []string
	owned, err := s.writerOfOnlyOwner()
	if err != nil {
		return "", err
	}
	if owned != "" {
		skips = append(skips, `(request.resource.group == "admissionregistration.k8s.io" && `+vap.WebhooksKeepTrust()+` && `+owned+`)`)
	}
	for _, info := range s.namedTrustKinds() {
		keeps, _ := vap.TrustObjectKeepsTrust(info.Kind)
		skips = append(skips, `(request.resource.group == `+vap.CELString(info.Group)+` && `+keeps+`)`)
	}
	if len(skips) == 0 {
		return "", nil
	}
	// The grant last: the authorizer is asked only about a write the rest
	// would skip.
	return `!(request.operation == "UPDATE" && (` + strings.Join(skips, " || ") + `) && ` + s.Grant() + `)`, nil
}

// Grant is CEL that is true while GrantServiceAccount holds the grant for
// Fingerprint. kube-apiserver answers it with its authorizer (RBAC walks
// the cluster's ClusterRoleBindings), once per write the rest of the
// condition would skip.
func (s *Skip) Grant() string {
	ns, name, _ := guardapi.SplitServiceAccount(s.GrantServiceAccount)
	return fmt.Sprintf(`authorizer.serviceAccount(%s, %s).group(%s).resource(%s).name(%s).check(%s).allowed()`,
		vap.CELString(ns), vap.CELString(name), vap.CELString(GrantGroup), vap.CELString(GrantResource), vap.CELString(s.Fingerprint), vap.CELString(GrantVerb))
}

// namedTrustKinds are the kinds whose trust alone a mapping owns (CRDs,
// APIServices) that some mapping names, in Match.Named's order.
func (s *Skip) namedTrustKinds() []guardapi.KindInfo {
	var out []guardapi.KindInfo
	for _, info := range guardapi.Kinds {
		if !info.OwnsTrustOnly {
			continue
		}
		for i := range s.Config.Owners {
			if slices.ContainsFunc(s.Config.Owners[i].Match.Named(), func(n guardapi.NamedObjects) bool { return n.Kind == info.Kind && len(n.Names) > 0 }) {
				out = append(out, info)
				break
			}
		}
	}
	return out
}

// writerOfOnlyOwner is CEL that is true when exactly one mapping claims the
// webhook configuration (by name, or by a selector matching its labels:
// policy.Mappings.MatchInput), the subject is one of that mapping's
// writers, and no selector's verdict changes with the write; "" when no
// mapping can claim one. It is read only for an UPDATE, where the request
// names the object.
//
// kube-apiserver evaluates it for every write it decides alone, so each
// piece is evaluated once. Webhook matchConditions have no variables: the
// pieces are the elements of one list, bound to c by all() over a list
// of that one list, and the rest reads them by index. A mapping's pieces
// are its names (one element) and its selector's verdicts on the new and
// the stored object (two). The verdicts must be equal (a relabel that
// moves the object between mappings goes to the guard), so a mapping
// claims by its names or its verdict on the new object. Exactly one
// mapping may claim, and the writer test is that claimant's.
func (s *Skip) writerOfOnlyOwner() (string, error) {
	var pieces, stable, claims, writers []string
	piece := func(expr string) string {
		pieces = append(pieces, expr)
		return fmt.Sprintf("c[%d]", len(pieces)-1)
	}
	for i := range s.Config.Owners {
		o := &s.Config.Owners[i]
		var byName, claim []string
		for _, n := range o.Match.Named() {
			if len(n.Names) > 0 && !n.OwnsTrustOnly {
				byName = append(byName, `request.resource.resource == `+vap.CELString(n.Resource)+` && request.name in `+celList(n.Names))
			}
		}
		if len(byName) > 0 {
			claim = append(claim, piece(strings.Join(byName, " || ")))
		}
		if sel := o.Match.LabelSelector; sel != nil {
			now, err := vap.LabelSelectorExpression(sel, "object")
			if err != nil {
				return "", fmt.Errorf("owners[%s].match.labelSelector: %w", o.Name, err)
			}
			was, _ := vap.LabelSelectorExpression(sel, "oldObject")
			claim = append(claim, piece(now))
			stable = append(stable, claim[len(claim)-1]+` == `+piece(was))
		}
		if len(claim) == 0 {
			continue
		}
		writer, ok := vap.SubjectsExpression(s.Config.OwnerWriters(o))
		if !ok {
			writer = "false"
		}
		claims = append(claims, strings.Join(claim, " || "))
		writers = append(writers, writer)
	}
	if len(claims) == 0 {
		return "", nil
	}
	if len(pieces) == 1 {
		// One mapping, by name alone: nothing to bind.
		return `(` + pieces[0] + `) && ` + writers[0], nil
	}
	return `[[` + strings.Join(pieces, ", ") + `]].all(c, ` + strings.Join(append(stable, onlyClaimantsWriter(claims, writers)), " && ") + `)`, nil
}

// onlyClaimantsWriter is CEL that is true when exactly one of claims holds
// and so does the writer test of the same index.
func onlyClaimantsWriter(claims, writers []string) string {
	count := make([]string, len(claims))
	for i, c := range claims {
		count[i] = `(` + c + ` ? 1 : 0)`
	}
	// Exactly one claim holds, so the first that holds is the claimant's;
	// mappings with the same writers need no choice between them.
	writer := writers[len(writers)-1]
	for i := len(writers) - 2; i >= 0; i-- {
		if writers[i] != writer {
			writer = `(` + claims[i] + ` ? ` + writers[i] + ` : ` + writer + `)`
		}
	}
	return strings.Join(count, " + ") + ` == 1 && ` + writer
}

// SkipGrantName names the grant's ClusterRole and ClusterRoleBinding.
const SkipGrantName = "webhook-guard-static-manifest-skip"

// SkipGrant is the ClusterRole and ClusterRoleBinding that switch on the
// skip condition of manifests rendered from the GuardConfig whose
// fingerprint is fingerprint, for the guard's service account sa. They
// grant a verb on a resource no API serves: nothing but the condition
// reads them.
func SkipGrant(sa, fingerprint string) (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	ns, name, _ := guardapi.SplitServiceAccount(sa)
	labels := map[string]string{"app.kubernetes.io/name": "webhook-guard", "app.kubernetes.io/managed-by": "webhook-guard-render"}
	role := &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: SkipGrantName, Labels: labels},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{GrantGroup}, Resources: []string{GrantResource}, ResourceNames: []string{fingerprint}, Verbs: []string{GrantVerb},
		}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: SkipGrantName, Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: SkipGrantName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	return role, binding
}

func celList(ss []string) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = vap.CELString(s)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
