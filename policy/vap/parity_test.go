package vap

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/webhook-guard/webhook-guard/internal/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/policy/vap/vaptest"
)

// parityConfig has one enforced mapping per kind of CA that changes the
// policy: a Secret (which may also be the policy's param) and
// injectedByCertManager (whose empty entries may wait for cainjector).
const parityConfig = `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
breakGlass: {groups: [system:masters]}
owners:
  - name: app
    mode: enforce
    match: {validating: [app]}
    writers: {serviceAccounts: [app-system/controller]}
    ca: {secret: {namespace: app-system, name: app-ca}}
  - name: injected
    mode: enforce
    match: {validating: [injected]}
    ca: {injectedByCertManager: {}}
`

// paritySource is where both shapes are told the owner's CA comes from.
const paritySource = "Secret app-system/app-ca (key ca.crt)"

// entry is one webhooks[] entry of a parity case.
type entry struct {
	name   string
	bundle []byte
}

// parityCase is one request, decided by both shapes.
type parityCase struct {
	op          policy.Operation
	config      string // the configuration's name: app or injected
	user        user.Info
	annotations map[string]string // of the stored object on UPDATE, of the created one on CREATE
	old, next   []entry
}

// verdict is what a shape did with a request: denied or not, and the rules
// it named (in a denial, a warning or a record).
type verdict struct {
	Denied bool
	Rules  []policy.Rule
}

func (v verdict) String() string { return fmt.Sprintf("denied=%t rules=%v", v.Denied, v.Rules) }

// parityCases are the requests both shapes must agree on, and those listed
// in the table of docs/policy-shape.md on which they still differ. The names
// are the table's first column.
func parityCases(t *testing.T) (map[string]parityCase, *testpki.CA) {
	t.Helper()
	mk := func(cn string) *testpki.CA {
		ca, err := testpki.NewCA(cn)
		require.NoError(t, err)
		return ca
	}
	cur, prev, foreign := mk("parity-owner-ca"), mk("parity-owner-previous-ca"), mk("parity-foreign-ca")
	writer := &user.DefaultInfo{Name: "system:serviceaccount:app-system:controller"}
	cainjector := &user.DefaultInfo{Name: "system:serviceaccount:cert-manager:cert-manager-cainjector"}
	intruder := &user.DefaultInfo{Name: "system:serviceaccount:other:intruder"}
	admin := &user.DefaultInfo{Name: "admin", Groups: []string{"system:masters"}}
	inject := map[string]string{policy.AnnotationInjectCAFrom: "app-system/serving"}
	cat := slices.Concat[[]byte]
	upd := func(u user.Info, old, next []entry) parityCase {
		return parityCase{op: policy.OperationUpdate, config: "app", user: u, old: old, next: next}
	}
	a, b := "a.app.io", "b.app.io"

	return map[string]parityCase{
		"writer writes the owner's CA":                    upd(writer, []entry{{a, prev.PEM}}, []entry{{a, cur.PEM}}),
		"writer writes a foreign CA":                      upd(writer, []entry{{a, cur.PEM}}, []entry{{a, foreign.PEM}}),
		"writer writes garbage":                           upd(writer, []entry{{a, cur.PEM}}, []entry{{a, []byte("not a certificate")}}),
		"writer appends the owner's CA to the stored one": upd(writer, []entry{{a, prev.PEM}}, []entry{{a, cat(prev.PEM, cur.PEM)}}),
		"writer keeps a stored bundle unchanged":          upd(writer, []entry{{a, prev.PEM}, {b, cur.PEM}}, []entry{{a, prev.PEM}, {b, cur.PEM}}),
		"writer reorders the entries":                     upd(writer, []entry{{a, cur.PEM}, {b, cur.PEM}}, []entry{{b, cur.PEM}, {a, cur.PEM}}),
		"writer empties a caBundle":                       upd(writer, []entry{{a, cur.PEM}}, []entry{{a, nil}}),
		"writer removes an entry that carried a caBundle": upd(writer, []entry{{a, cur.PEM}, {b, cur.PEM}}, []entry{{a, cur.PEM}}),
		"writer removes every entry":                      upd(writer, []entry{{a, cur.PEM}}, nil),
		"writer removes an entry that carried none":       upd(writer, []entry{{a, cur.PEM}, {b, nil}}, []entry{{a, cur.PEM}}),
		"writer renames an entry keeping the owner's CA":  upd(writer, []entry{{a, cur.PEM}}, []entry{{b, cur.PEM}}),
		"writer renames an entry keeping a merged bundle": upd(writer, []entry{{a, prev.PEM}}, []entry{{b, cat(prev.PEM, cur.PEM)}}),
		"writer renames an empty entry":                   upd(writer, []entry{{a, nil}}, []entry{{b, nil}}),
		"writer adds an entry without a caBundle":         upd(writer, []entry{{a, cur.PEM}}, []entry{{a, cur.PEM}, {b, nil}}),
		"writer leaves a stored empty entry empty":        upd(writer, []entry{{a, nil}}, []entry{{a, nil}}),
		"writer creates a configuration with its CA":      {op: policy.OperationCreate, config: "app", user: writer, next: []entry{{a, cur.PEM}}},
		"writer creates a configuration with no caBundle": {op: policy.OperationCreate, config: "app", user: writer, next: []entry{{a, nil}}},
		"writer creates an entry with the previous CA":    {op: policy.OperationCreate, config: "app", user: writer, next: []entry{{a, prev.PEM}}},
		"writer creates with an inject annotation but a CA that is not injected": {
			op: policy.OperationCreate, config: "app", user: writer, annotations: inject, next: []entry{{a, nil}},
		},
		"writer deletes the configuration": {op: policy.OperationDelete, config: "app", user: writer, old: []entry{{a, cur.PEM}}},
		"cainjector creates empty entries it will fill": {
			op: policy.OperationCreate, config: "injected", user: cainjector, annotations: inject, next: []entry{{a, nil}, {b, nil}},
		},
		"cainjector creates empty entries with no inject annotation": {
			op: policy.OperationCreate, config: "injected", user: cainjector, next: []entry{{a, nil}},
		},
		"cainjector creates empty entries under inject-apiserver-ca alone": {
			op: policy.OperationCreate, config: "injected", user: cainjector, annotations: map[string]string{"cert-manager.io/inject-apiserver-ca": "true"}, next: []entry{{a, nil}},
		},
		"cainjector adds an empty entry it will fill": {
			op: policy.OperationUpdate, config: "injected", user: cainjector, annotations: inject, old: []entry{{a, cur.PEM}}, next: []entry{{a, cur.PEM}, {b, nil}},
		},
		"cainjector fills an entry": {
			op: policy.OperationUpdate, config: "injected", user: cainjector, annotations: inject, old: []entry{{a, nil}}, next: []entry{{a, cur.PEM}},
		},
		"cainjector empties an entry it filled": {
			op: policy.OperationUpdate, config: "injected", user: cainjector, annotations: inject, old: []entry{{a, cur.PEM}}, next: []entry{{a, nil}},
		},
		"non-writer writes a foreign CA":                       upd(intruder, []entry{{a, cur.PEM}}, []entry{{a, foreign.PEM}}),
		"non-writer removes an entry":                          upd(intruder, []entry{{a, cur.PEM}, {b, cur.PEM}}, []entry{{a, cur.PEM}}),
		"non-writer creates a configuration":                   {op: policy.OperationCreate, config: "app", user: intruder, next: []entry{{a, nil}}},
		"non-writer deletes the configuration":                 {op: policy.OperationDelete, config: "app", user: intruder, old: []entry{{a, cur.PEM}}},
		"break-glass writes a foreign CA":                      upd(admin, []entry{{a, cur.PEM}}, []entry{{a, foreign.PEM}}),
		"break-glass creates a configuration with no caBundle": {op: policy.OperationCreate, config: "app", user: admin, next: []entry{{a, nil}}},

		// Where CEL, which cannot parse PEM, compares bytes.
		"writer puts the owner's CA before the stored certificates": upd(writer, []entry{{a, prev.PEM}}, []entry{{a, cat(cur.PEM, prev.PEM)}}),
		"writer writes the owner's CA with a trailing newline":      upd(writer, []entry{{a, prev.PEM}}, []entry{{a, cat(cur.PEM, []byte("\n"))}}),
		"writer drops a certificate from a merged bundle":           upd(writer, []entry{{a, cat(prev.PEM, foreign.PEM, cur.PEM)}}, []entry{{a, cat(prev.PEM, cur.PEM)}}),
	}, cur
}

// Test_shapeParity walks every parity case through the static decision
// (policy.Mappings.Decide) and the generated policies in Kubernetes' VAP
// engine, in both layouts of a Secret CA (the CA literal alone, and the
// owner policy beside the one reading the Secret as its param), and
// asserts that they differ exactly where the table of docs/policy-shape.md
// says they do: a new difference, or a documented one that went away,
// fails the test.
func Test_shapeParity(t *testing.T) {
	cfg := load(t, parityConfig)
	cases, cur := parityCases(t)
	documented := documentedDifferences(t)
	for name := range documented {
		_, walked := cases[name]
		require.True(t, walked, "docs/policy-shape.md lists the difference %q, which no parity case walks", name)
	}
	set, err := cabundle.NewCASet(paritySource, cur.PEM)
	require.NoError(t, err)
	param := &guardapi.KeyRef{Namespace: "app-system", Name: "app-ca", Key: "ca.crt"}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app-system", Name: "app-ca"}, Data: map[string][]byte{"ca.crt": cur.PEM}}

	for _, layout := range []struct {
		name  string
		param *guardapi.KeyRef
	}{{"CA literal", nil}, {"CA Secret as param", param}} {
		ca := CA{PEM: cur.PEM, Source: paritySource, Fingerprints: set.Short(), Param: layout.param}
		objs, err := Generate(Input{Config: cfg, CAs: map[string]CA{"app": ca, "injected": {PEM: cur.PEM, Source: paritySource, Fingerprints: set.Short()}}})
		require.NoError(t, err)
		ps := compileAll(t, objs)
		for name, c := range cases {
			t.Run(layout.name+"/"+name, func(t *testing.T) {
				static := staticVerdict(cfg, c, set)
				r := c.request()
				if layout.param != nil {
					r.Params = secret
				}
				cel := celVerdict(ps.validate(t, r, true))
				if _, differs := documented[name]; differs {
					assert.NotEqual(t, static, cel, "docs/policy-shape.md lists this case as a difference, but both shapes now agree: remove its row")
					return
				}
				assert.Equal(t, static, cel, "the shapes differ (static: %s, policy: %s): make them agree, or add the case to the table in docs/policy-shape.md", static, cel)
			})
		}
	}
}

// staticVerdict is the static shape's verdict, with the owner's CA resolved
// as the webhook resolves it.
func staticVerdict(cfg *policy.Mappings, c parityCase, set cabundle.CASet) verdict {
	in := &policy.Input{
		Operation: c.op, Kind: policy.KindValidating, Name: c.config, Annotations: c.annotations,
		User:        policy.User{Username: c.user.GetName(), Groups: c.user.GetGroups()},
		Webhooks:    policyWebhooks(c.next),
		OldWebhooks: policyWebhooks(c.old),
		CA:          policy.CAResult{Set: set, Resolved: true},
	}
	if c.op == policy.OperationDelete {
		in.Webhooks = nil
	}
	d := cfg.Decide(in)
	var rules []policy.Rule
	for _, v := range d.Violations {
		rules = append(rules, v.Rule)
	}
	slices.Sort(rules)
	return verdict{Denied: d.Outcome == policy.OutcomeDeny, Rules: slices.Compact(rules)}
}

// celVerdict is the policy shape's verdict from the messages of its denials
// (every mapping here enforces), each of which names its rule after the
// mapping.
func celVerdict(msgs []string) verdict {
	var rules []policy.Rule
	for _, m := range msgs {
		for _, r := range policy.Rules() {
			if strings.Contains(m, "policy mode); "+string(r)+":") {
				rules = append(rules, r)
			}
		}
	}
	slices.Sort(rules)
	return verdict{Denied: len(msgs) > 0, Rules: slices.Compact(rules)}
}

func policyWebhooks(es []entry) []policy.Webhook {
	var out []policy.Webhook
	for _, e := range es {
		out = append(out, policy.Webhook{Name: e.name, CABundle: e.bundle})
	}
	return out
}

// request is the case as kube-apiserver hands it to CEL.
func (c parityCase) request() vaptest.Request {
	r := vaptest.Request{Operation: admission.Operation(c.op), Name: c.config, User: c.user}
	switch c.op {
	case policy.OperationCreate:
		r.Object = parityObject(c.config, c.annotations, c.next)
	case policy.OperationUpdate:
		r.Object, r.Old = parityObject(c.config, c.annotations, c.next), parityObject(c.config, c.annotations, c.old)
	case policy.OperationDelete:
		r.Old = parityObject(c.config, c.annotations, c.old)
	}
	return r
}

// parityObject is a ValidatingWebhookConfiguration as CEL sees it: an empty
// caBundle is omitted, a set one is its base64 text.
func parityObject(name string, annotations map[string]string, es []entry) *unstructured.Unstructured {
	meta := map[string]any{"name": name}
	if len(annotations) > 0 {
		a := map[string]any{}
		for k, v := range annotations {
			a[k] = v
		}
		meta["annotations"] = a
	}
	obj := map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": meta}
	if len(es) > 0 {
		hooks := make([]any, len(es))
		for i, e := range es {
			cc := map[string]any{"url": "https://app.example/" + e.name}
			if len(e.bundle) > 0 {
				cc["caBundle"] = base64.StdEncoding.EncodeToString(e.bundle)
			}
			hooks[i] = map[string]any{"name": e.name, "clientConfig": cc}
		}
		obj["webhooks"] = hooks
	}
	return &unstructured.Unstructured{Object: obj}
}

// documentedDifferences reads the parity table of docs/policy-shape.md:
// the rows under the heading below whose first cell is a case name in
// backquotes.
func documentedDifferences(t *testing.T) map[string]bool {
	t.Helper()
	const heading = "## Where the two shapes differ"
	f, err := os.Open("../../docs/policy-shape.md")
	require.NoError(t, err)
	defer f.Close()
	out := map[string]bool{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == heading
		case in && strings.HasPrefix(line, "| `"):
			name, _, ok := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
			require.True(t, ok, "a row of the parity table does not close its case name: %s", line)
			out[name] = true
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out, "docs/policy-shape.md has no %q table", heading)
	return out
}
