// Package cost runs a mapping's generated policies, in kube-apiserver's own
// VAP engine, on the costliest writes its owner makes to a guarded object,
// and compares what they cost with kube-apiserver's runtime CEL limits.
//
// kube-apiserver has no static cost estimate for a ValidatingAdmissionPolicy:
// it compiles the expressions without a cost check, and only the runtime
// limits apply, per expression (PerCallLimit: an expression past it is
// cancelled with "operation cancelled: actual cost limit exceeded") and per
// evaluation of a binding (RuntimeCELCostBudget). A generated policy's cost
// grows with the number of entries and the length of their caBundles, so
// a configuration that is large enough gets its owner's rotation refused
// (HTTP 422), which is the outage the guard exists to prevent. The only
// way to know beforehand is to run the policy, which this package does.
//
// It lives under policy/ because it only computes: no client, no file, no
// socket (the package map's rule for policy/...); its callers (render
// policy, the policy syncer) hand it the configuration, the CA and the
// stored object.
package cost

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap"
	"github.com/webhook-guard/webhook-guard/policy/vap/vapengine"
	"github.com/webhook-guard/webhook-guard/policy/vap/vapname"
)

// kube-apiserver's runtime limits for a ValidatingAdmissionPolicy
// (k8s.io/apiserver/pkg/apis/cel).
const (
	// PerCallLimit is the cost one expression (a variable or a validation)
	// may reach; past it kube-apiserver cancels it ("operation cancelled:
	// actual cost limit exceeded") and the write is refused under
	// failurePolicy Fail. This is the limit the generated policies meet
	// first: their cost is in one variable (badWebhooks).
	PerCallLimit = int64(celconfig.PerCallLimit)
	// Budget is the cost all of one binding's expressions may reach for one
	// write ("running out of cost budget").
	Budget = int64(celconfig.RuntimeCELCostBudget)
)

// Write names one of the owner's costliest writes.
type Write string

const (
	// Merge is cert-manager cainjector's rotation: every entry's caBundle
	// becomes the stored bundle followed by a new CA.
	Merge Write = "merge"
	// Merged is an ordinary write while every entry holds the stored
	// bundle and the new CA, the state of most of a CA's life under
	// cainjector: one that changes an entry (its timeout) and no caBundle,
	// as a chart upgrade does. A write that changes no entry at all costs
	// less: the policies skip it on its generation.
	Merged Write = "ordinary write on merged bundles"
)

// Writes are the writes Check runs, in its order.
var Writes = []Write{Merge, Merged}

// Result is what one write costs.
type Result struct {
	Write Write
	// Entries is the number of entries of the object.
	Entries int
	// Policy is the generated policy whose expression costs most, and
	// Expression that expression (variables.<name>, or "validations" for
	// the validation expressions themselves, together).
	Policy, Expression string
	// Cost is that expression's cost; kube-apiserver cancels it past
	// PerCallLimit.
	Cost int64
	// Total is what one binding's variables and validations cost for the
	// write, at most (every variable is evaluated, as the worst case);
	// kube-apiserver stops past Budget. The matchConditions have a budget
	// of their own, which their per-call limit reaches first for the
	// generated policies' two.
	Total int64
}

// Limit is the limit Cost is held to.
func (r Result) Limit() int64 { return PerCallLimit }

// Ratio is the larger of Cost/PerCallLimit and Total/Budget: at 1 or more
// kube-apiserver refuses the write.
func (r Result) Ratio() float64 {
	return max(float64(r.Cost)/float64(PerCallLimit), float64(r.Total)/float64(Budget))
}

// Refused says kube-apiserver would refuse the write for its cost.
func (r Result) Refused() bool { return r.Cost > PerCallLimit || r.Total > Budget }

// String is "cost N of kube-apiserver's limit M (P%)".
func (r Result) String() string {
	return fmt.Sprintf("cost %d of kube-apiserver's limit %d (%.0f%%)", r.Cost, PerCallLimit, 100*float64(r.Cost)/float64(PerCallLimit))
}

// Describe is the line that says what write r costs on obj of mapping.
func Describe(mapping string, obj *unstructured.Unstructured, r Result) string {
	return fmt.Sprintf("owners[%s]: %s %s (%d entries): the owner's %s: %s", mapping, obj.GetKind(), obj.GetName(), r.Entries, r.Write, r)
}

// Refusal is the error that says kube-apiserver would refuse the write r
// on obj of mapping for its cost, and what to do.
func Refusal(mapping string, obj *unstructured.Unstructured, r Result) string {
	over := fmt.Sprintf("%s in %s costs %d, over kube-apiserver's limit of %d per CEL expression", r.Expression, r.Policy, r.Cost, PerCallLimit)
	if r.Cost <= PerCallLimit {
		over = fmt.Sprintf("the policy %s costs %d, over kube-apiserver's budget of %d per evaluation", r.Policy, r.Total, Budget)
	}
	return fmt.Sprintf("owners[%s]: %s %s has %d entries: kube-apiserver would refuse the owner's %s for its CEL cost (%s); "+
		"split the configuration into smaller ones, or guard it with the static shape", mapping, obj.GetKind(), obj.GetName(), r.Entries, r.Write, over)
}

// Checker runs one mapping's policies, generated with a new CA of the size
// of the owner's, on the worst writes of its owner.
type Checker struct {
	mapping  string
	writer   user.Info
	newCA    []byte
	params   runtime.Object
	policies []compiled
}

type compiled struct {
	name            string
	withParams      bool
	policy          *vapengine.Policy
	matchConditions []admv1.MatchCondition
	variables       []string
}

// New generates the policies of mapping as they will be once the owner's
// CA (ca, as the guard resolved it) rotates to a new one of its size, and
// compiles them in kube-apiserver's environment without the per-call limit,
// so that an expression past it still reports its whole cost.
func New(cfg *policy.Mappings, mapping string, ca vap.CA) (*Checker, error) {
	var owner *guardapi.Owner
	for i := range cfg.Spec.Owners {
		if cfg.Spec.Owners[i].Name == mapping {
			owner = &cfg.Spec.Owners[i]
		}
	}
	if owner == nil {
		return nil, fmt.Errorf("no mapping %q", mapping)
	}
	newCA, err := NewCA(len(ca.PEM))
	if err != nil {
		return nil, err
	}
	rotated := ca
	rotated.PEM, rotated.Err, rotated.ParamMissing = newCA, "", false
	objs, err := vap.Generate(vap.Input{Config: cfg, CAs: map[string]vap.CA{mapping: rotated}})
	if err != nil {
		return nil, err
	}
	env, err := vapengine.UnlimitedEnv()
	if err != nil {
		return nil, err
	}
	c := &Checker{mapping: mapping, writer: writer(owner.Writers), newCA: newCA}
	if p := ca.Param; p != nil {
		c.params = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}, Data: map[string][]byte{p.Key: newCA}}
	}
	names := vap.PolicyNames(mapping)
	for _, p := range objs.Policies {
		if !slices.Contains(names, p.Name) && !slices.Contains(names, strings.TrimSuffix(p.Name, vapname.CASuffix)) {
			continue
		}
		cp, err := vapengine.Compile(p, env)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", p.Name, err)
		}
		c.policies = append(c.policies, compiled{name: p.Name, withParams: p.Spec.ParamKind != nil, policy: cp, matchConditions: p.Spec.MatchConditions, variables: variableNames(p)})
	}
	return c, nil
}

func variableNames(p *admv1.ValidatingAdmissionPolicy) []string {
	out := make([]string, len(p.Spec.Variables))
	for i, v := range p.Spec.Variables {
		out[i] = v.Name
	}
	return out
}

// writer is a subject the mapping's policies take for a writer: the
// caBundle rules apply to writers only.
func writer(s guardapi.Subjects) user.Info {
	switch {
	case len(s.ServiceAccounts) > 0:
		ns, name, _ := strings.Cut(s.ServiceAccounts[0], "/")
		return &user.DefaultInfo{Name: "system:serviceaccount:" + ns + ":" + name}
	case len(s.Users) > 0:
		return &user.DefaultInfo{Name: s.Users[0]}
	case len(s.Groups) > 0:
		return &user.DefaultInfo{Name: "webhook-guard:cost-check", Groups: []string{s.Groups[0]}}
	}
	return &user.DefaultInfo{Name: "webhook-guard:cost-check"}
}

// Check runs the owner's worst writes to obj (a guarded object as stored)
// through the policies: one Result per Write, each the costliest policy's.
// An object without webhook entries has no such write: nil.
func (c *Checker) Check(ctx context.Context, obj *unstructured.Unstructured) ([]Result, error) {
	hooks, found, err := unstructured.NestedSlice(obj.Object, "webhooks")
	if err != nil || !found || len(hooks) == 0 {
		return nil, err
	}
	merged, err := merge(obj, c.newCA)
	if err != nil {
		return nil, err
	}
	retimed, err := retime(merged)
	if err != nil {
		return nil, err
	}
	writes := map[Write][2]*unstructured.Unstructured{Merge: {merged, obj}, Merged: {retimed, merged}}
	out := make([]Result, 0, len(Writes))
	for _, w := range Writes {
		r := Result{Write: w, Entries: len(hooks)}
		for _, p := range c.policies {
			pr, err := c.measure(ctx, p, writes[w][0], writes[w][1])
			if err != nil {
				return nil, fmt.Errorf("policy %s: %w", p.name, err)
			}
			if pr.Cost > r.Cost || (pr.Cost == r.Cost && r.Policy == "") {
				r.Policy, r.Expression, r.Cost = pr.Policy, pr.Expression, pr.Cost
			}
			r.Total = max(r.Total, pr.Total)
		}
		out = append(out, r)
	}
	return out, nil
}

// merge is obj with every entry's caBundle followed by ca, as cainjector
// merges.
func merge(obj *unstructured.Unstructured, ca []byte) (*unstructured.Unstructured, error) {
	out := obj.DeepCopy()
	hooks, _, _ := unstructured.NestedSlice(out.Object, "webhooks")
	for i, h := range hooks {
		entry, ok := h.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("webhooks[%d] is not an object", i)
		}
		stored, _, _ := unstructured.NestedString(entry, "clientConfig", "caBundle")
		old, err := base64.StdEncoding.DecodeString(stored)
		if err != nil {
			return nil, fmt.Errorf("webhooks[%d].clientConfig.caBundle: %w", i, err)
		}
		if err := unstructured.SetNestedField(entry, base64.StdEncoding.EncodeToString(slices.Concat(old, ca)), "clientConfig", "caBundle"); err != nil {
			return nil, err
		}
	}
	return out, unstructured.SetNestedSlice(out.Object, hooks, "webhooks")
}

// recorder is a composition context that keeps what each expression's
// variables cost: kube-apiserver's evaluator reads and resets that cost
// after every expression.
type recorder struct {
	plugincel.CompositionContext
	costs []int64
}

func (r *recorder) GetAndResetCost() int64 {
	c := r.CompositionContext.GetAndResetCost()
	r.costs = append(r.costs, c)
	return c
}

// measure evaluates, for the UPDATE of old to obj by the writer, each of
// p's matchConditions alone, then (when they match) every variable of p
// in order, each one's cost then its own (the earlier ones it reads are
// already evaluated), then its validations.
func (c *Checker) measure(ctx context.Context, p compiled, obj, old *unstructured.Unstructured) (Result, error) {
	var params runtime.Object
	if p.withParams {
		params = c.params
	}
	va, gvr := vapengine.Attributes(admission.Update, obj.GetName(), obj, old, c.writer)
	in := input{va: va, vars: plugincel.OptionalVariableBindings{VersionedParams: params}, ns: plugincel.CreateNamespaceObject(nil),
		request: plugincel.CreateAdmissionRequest(va.Attributes, metav1.GroupVersionResource(gvr), metav1.GroupVersionKind(va.VersionedKind))}
	r := Result{Policy: p.name}
	take := func(expression string, cost int64) {
		if cost > r.Cost {
			r.Expression, r.Cost = expression, cost
		}
	}
	for _, mc := range p.matchConditions {
		own, _, err := evaluate(ctx, p.policy, p.policy.Condition([]string{mc.Expression}), in)
		if err != nil {
			return Result{}, err
		}
		take("matchConditions["+mc.Name+"]", own)
	}
	if m := p.policy.Matcher.Match(ctx, va, params, nil); m.Error != nil || !m.Matches {
		return r, m.Error
	}
	exprs := make([]string, 0, len(p.variables))
	for _, v := range p.variables {
		// A condition must be a bool; reading the variable inside a list
		// literal costs a constant beside it.
		exprs = append(exprs, "[variables."+v+"].size() == 1")
	}
	own, costs, err := evaluate(ctx, p.policy, p.policy.Condition(exprs), in)
	if err != nil {
		return Result{}, err
	}
	r.Total = own
	for i, cost := range costs {
		take("variables."+p.variables[i], cost)
		r.Total += cost
	}
	// The validations, in a context of their own: what is left beside
	// the variables they read is their own cost, together.
	own, costs, err = evaluate(ctx, p.policy, p.policy.Validations.(*plugincel.CompositedConditionEvaluator), in)
	if err != nil {
		return Result{}, err
	}
	take("validations", own)
	for _, cost := range costs {
		own += cost
	}
	r.Total = max(r.Total, own)
	return r, nil
}

// input is one request as the VAP engine hands it to an evaluator.
type input struct {
	va      *admission.VersionedAttributes
	request *admissionv1.AdmissionRequest
	vars    plugincel.OptionalVariableBindings
	ns      *corev1.Namespace
}

// evaluate runs cond in a composition context of its own and returns what
// its expressions cost themselves, together, and what the variables cost
// that each one read first.
func evaluate(ctx context.Context, p *vapengine.Policy, cond *plugincel.CompositedConditionEvaluator, in input) (int64, []int64, error) {
	rec := &recorder{CompositionContext: p.Compiler.CreateContext(ctx)}
	_, remaining, err := cond.ConditionEvaluator.ForInput(rec, in.va, in.request, in.vars, in.ns, math.MaxInt64) //nolint:contextcheck // rec is ctx, as a composition context (CreateContext(ctx))
	if err != nil {
		return 0, nil, err
	}
	own := math.MaxInt64 - remaining
	for _, c := range rec.costs {
		own -= c
	}
	return own, rec.costs, nil
}

// NewCA is a fresh self-signed CA certificate, PEM encoded, of at least
// size bytes (padded in its subject): a stand-in for the owner's next CA,
// whose length is what a merge costs by. Its key is Ed25519, whose
// signatures have one length, so that the length, and so the costs Check
// reports, depend on size alone.
func NewCA(size int) ([]byte, error) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC().Truncate(time.Second)
	pad := 0
	for {
		tmpl := &x509.Certificate{
			SerialNumber:          big.NewInt(1),
			Subject:               pkix.Name{CommonName: "webhook-guard cost check"},
			NotBefore:             now,
			NotAfter:              now.Add(24 * time.Hour),
			IsCA:                  true,
			BasicConstraintsValid: true,
			KeyUsage:              x509.KeyUsageCertSign,
		}
		if pad > 0 {
			tmpl.Subject.Organization = []string{strings.Repeat("x", pad)}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
		if err != nil {
			return nil, err
		}
		out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		if len(out) >= size || pad > size {
			return bytes.Clone(out), nil
		}
		// The subject is the issuer too: a byte of padding is two of DER,
		// and base64 makes three of those four.
		pad += (size-len(out))*3/8 + 1
	}
}

// retime is obj with its first entry's timeoutSeconds changed: a write
// that changes an entry and no caBundle.
func retime(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	out := obj.DeepCopy()
	hooks, _, err := unstructured.NestedSlice(out.Object, "webhooks")
	if err != nil {
		return nil, err
	}
	first, ok := hooks[0].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("webhooks[0] of %s is not an object", obj.GetName())
	}
	timeout, _, _ := unstructured.NestedInt64(first, "timeoutSeconds")
	first["timeoutSeconds"] = timeout%30 + 1
	if err := unstructured.SetNestedSlice(out.Object, hooks, "webhooks"); err != nil {
		return nil, err
	}
	return out, nil
}
