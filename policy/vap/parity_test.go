package vap

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
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

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/policy/vap/vaptest"
)

// parityConfig has one enforced mapping per kind of CA that changes the
// policy: a Secret (which may also be the policy's param),
// injectedByCertManager (whose empty entries may wait for cainjector), and
// the same pinned; the last two also own CRDs and APIServices.
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
    writers: {serviceAccounts: [app-system/controller]}
    ca: {injectedByCertManager: {}}
  - name: pinned
    mode: enforce
    match: {validating: [pinned], customResourceDefinitions: [widgets.example.com], apiServices: [v1.widgets.example.com]}
    writers: {serviceAccounts: [app-system/controller]}
    ca: {injectedByCertManager: {certificate: {namespace: app-system, name: serving}}}
  - name: objects
    mode: enforce
    match: {customResourceDefinitions: [gadgets.example.com], apiServices: [v1.gadgets.example.com]}
    writers: {serviceAccounts: [app-system/controller]}
    ca: {secret: {namespace: app-system, name: app-ca}}
`

// paritySource is where both shapes are told the owner's CA comes from.
const paritySource = "Secret app-system/app-ca (key ca.crt)"

// entry is one webhooks[] entry of a parity case, or the one entry of a
// CRD (its conversion webhook) or an APIService (its service).
type entry struct {
	name   string
	bundle []byte
}

// parityCase is one request, decided by both shapes.
type parityCase struct {
	op          policy.Operation
	kind        policy.GuardedKind // "": a ValidatingWebhookConfiguration
	config      string             // the object's name
	user        user.Info
	annotations map[string]string // of the stored object on UPDATE, of the created one on CREATE
	// written are the annotations an UPDATE writes; nil: the stored ones.
	written   map[string]string
	old, next []entry
	// oldEndpoint and endpoint are where a CRD's or APIService's entry
	// sends its traffic, before and after.
	oldEndpoint, endpoint policy.Endpoint
	// staticCAErr is why the static shape cannot read the owner's CA (the
	// object's annotation names a source that does not exist); "": it can.
	staticCAErr string
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
	inject := map[string]string{policy.AnnotationInjectCAFrom: parityInject}
	cat := slices.Concat[[]byte]
	upd := func(u user.Info, old, next []entry) parityCase {
		return parityCase{op: policy.OperationUpdate, config: "app", user: u, old: old, next: next}
	}
	a, b := "a.app.io", "b.app.io"

	cases := trustParityCases(writer, intruder, cur, foreign)
	maps.Copy(cases, map[string]parityCase{
		"writer writes the owner's CA":                    upd(writer, []entry{{a, prev.PEM}}, []entry{{a, cur.PEM}}),
		"writer writes a foreign CA":                      upd(writer, []entry{{a, cur.PEM}}, []entry{{a, foreign.PEM}}),
		"writer writes garbage":                           upd(writer, []entry{{a, cur.PEM}}, []entry{{a, []byte("not a certificate")}}),
		"writer appends the owner's CA to the stored one": upd(writer, []entry{{a, prev.PEM}}, []entry{{a, cat(prev.PEM, cur.PEM)}}),
		"writer keeps a stored bundle unchanged":          upd(writer, []entry{{a, prev.PEM}, {b, cur.PEM}}, []entry{{a, prev.PEM}, {b, cur.PEM}}),
		"writer reorders the entries":                     upd(writer, []entry{{a, cur.PEM}, {b, cur.PEM}}, []entry{{b, cur.PEM}, {a, cur.PEM}}),
		"writer empties a caBundle":                       upd(writer, []entry{{a, cur.PEM}}, []entry{{a, nil}}),
		"writer removes an entry that carried a caBundle": upd(writer, []entry{{a, cur.PEM}, {b, cur.PEM}}, []entry{{a, cur.PEM}}),
		"writer removes every entry":                      upd(writer, []entry{{a, cur.PEM}}, nil),
		"writer removes the first entry of a merged pair": upd(writer, []entry{{a, cur.PEM}, {b, cat(prev.PEM, cur.PEM)}}, []entry{{b, cat(prev.PEM, cur.PEM)}}),
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

		// A foreign block kube-apiserver skips while stored (its END line
		// ends in "x"), whose line a merge's mixed base64 group would end
		// with a newline: the static shape parses the new bundle to the
		// foreign certificate, and the policy shape accepts only exact
		// merges after a whole footer line.
		"writer merges after a foreign block whose END line is broken": upd(writer,
			[]entry{{a, withResidue(prev.PEM, brokenEnd(foreign.PEM), 1)}},
			[]entry{{a, cat(bytes.TrimSuffix(withResidue(prev.PEM, brokenEnd(foreign.PEM), 1), []byte("x")), []byte("\n"), cur.PEM)}}),

		// Where CEL, which cannot parse PEM, compares bytes.
		"writer puts the owner's CA before the stored certificates": upd(writer, []entry{{a, prev.PEM}}, []entry{{a, cat(cur.PEM, prev.PEM)}}),
		"writer writes the owner's CA with a trailing newline":      upd(writer, []entry{{a, prev.PEM}}, []entry{{a, cat(cur.PEM, []byte("\n"))}}),
		"writer drops a certificate from a merged bundle":           upd(writer, []entry{{a, cat(prev.PEM, foreign.PEM, cur.PEM)}}, []entry{{a, cat(prev.PEM, cur.PEM)}}),
	})
	return cases, cur
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
		injected := CA{PEM: cur.PEM, Source: paritySource, Fingerprints: set.Short(), Pointers: []policy.Pointer{{CAFrom: parityInject}}}
		pinned := CA{PEM: cur.PEM, Source: paritySource, Fingerprints: set.Short()}
		objs, err := Generate(Input{Config: cfg, CAs: map[string]CA{"app": ca, "objects": ca, "injected": injected, "pinned": pinned}})
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
		Operation: c.op, Kind: c.configKind(), Name: c.config, Annotations: c.annotations,
		User:       policy.User{Username: c.user.GetName(), Groups: c.user.GetGroups()},
		Entries:    policyWebhooks(c.next, c.endpoint),
		OldEntries: policyWebhooks(c.old, c.oldEndpoint),
		CA:         policy.CAResult{Set: set, Resolved: true},
	}
	if c.staticCAErr != "" {
		in.CA = policy.CAResult{Err: errors.New(c.staticCAErr), Resolved: true}
	}
	switch c.op {
	case policy.OperationDelete:
		in.Entries = nil
	case policy.OperationUpdate:
		// The decoder sets the written annotations on every UPDATE.
		in.UpdatedAnnotations = c.newAnnotations()
		if in.UpdatedAnnotations == nil {
			in.UpdatedAnnotations = map[string]string{}
		}
	case policy.OperationCreate:
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
			if strings.Contains(m, "policy shape); "+string(r)+":") {
				rules = append(rules, r)
			}
		}
	}
	slices.Sort(rules)
	return verdict{Denied: len(msgs) > 0, Rules: slices.Compact(rules)}
}

// policyWebhooks are the entries as the static shape decodes them; the
// endpoint is decoded for CRDs and APIServices only (zero otherwise).
func policyWebhooks(es []entry, endpoint policy.Endpoint) []policy.Entry {
	var out []policy.Entry
	for _, e := range es {
		out = append(out, policy.Entry{Name: e.name, CABundle: e.bundle, Endpoint: endpoint})
	}
	return out
}

// configKind is the kind of the case's object.
func (c parityCase) configKind() policy.GuardedKind { return cmp.Or(c.kind, policy.KindValidating) }

// newAnnotations are the annotations of the object after an UPDATE.
func (c parityCase) newAnnotations() map[string]string {
	if c.written != nil {
		return c.written
	}
	return c.annotations
}

// request is the case as kube-apiserver hands it to CEL.
func (c parityCase) request() vaptest.Request {
	r := vaptest.Request{Operation: admission.Operation(c.op), Name: c.config, User: c.user}
	obj := func(ann map[string]string, es []entry, e policy.Endpoint) *unstructured.Unstructured {
		return parityObjectOf(c.configKind(), c.config, ann, es, e)
	}
	switch c.op {
	case policy.OperationCreate:
		r.Object = obj(c.annotations, c.next, c.endpoint)
	case policy.OperationUpdate:
		r.Object, r.Old = obj(c.newAnnotations(), c.next, c.endpoint), obj(c.annotations, c.old, c.oldEndpoint)
	case policy.OperationDelete:
		r.Old = obj(c.annotations, c.old, c.oldEndpoint)
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
