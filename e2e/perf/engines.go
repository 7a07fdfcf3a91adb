package perf

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/open-policy-agent/opa/v1/rego"
	admissionv1 "k8s.io/api/admission/v1"
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	sigsjson "sigs.k8s.io/json"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/vap"
	"github.com/webhook-guard/webhook-guard/policy/vap/vaptest"
)

// CEL is a webhook that evaluates the policy shape's own generated
// ValidatingAdmissionPolicy for GuardConfigYAML (policy/vap.Generate, the
// owner's CA as a literal, no params) with Kubernetes' VAP engine
// (k8s.io/apiserver validating.Validator), compiled once the way the VAP
// plugin's compilePolicy compiles a policy: variables, matchConditions,
// validations and message expressions.
type CEL struct {
	validator *vaptest.Validator
}

// NewCEL generates and compiles the policy. Its CA is the new CA's PEM: the
// policy shape compares a written caBundle with the source's bytes, so the
// rotation the review makes is the source's content.
func NewCEL(f *Fixture) (*CEL, error) {
	p, err := generatedPolicy(f)
	if err != nil {
		return nil, err
	}
	v, err := vaptest.Compile(p)
	if err != nil {
		return nil, err
	}
	return &CEL{validator: v}, nil
}

// newCELFloor is the generated policy with its variables and validations
// replaced by the least a policy of caBundles can check: that every entry's
// caBundle is absent or the owner's CA. It pays what any such policy pays
// (the engine, converting the objects for CEL, one pass over the entries).
func newCELFloor(f *Fixture) (*CEL, error) {
	p, err := generatedPolicy(f)
	if err != nil {
		return nil, err
	}
	p.Spec.Variables = nil
	p.Spec.Validations = []admv1.Validation{{Expression: `object.webhooks.all(w, !has(w.clientConfig.caBundle) || string(w.clientConfig.caBundle) == ` +
		vap.CELString(base64.StdEncoding.EncodeToString(f.New.PEM)) + `)`}}
	v, err := vaptest.Compile(p)
	if err != nil {
		return nil, err
	}
	return &CEL{validator: v}, nil
}

// generatedPolicy is the guard's policy for the fixture's one mapping.
func generatedPolicy(f *Fixture) (*admv1.ValidatingAdmissionPolicy, error) {
	cfg, err := policy.Load([]byte(GuardConfigYAML))
	if err != nil {
		return nil, err
	}
	if len(cfg.Spec.Owners) != 1 {
		return nil, fmt.Errorf("the fixture has %d mappings; want 1", len(cfg.Spec.Owners))
	}
	objs, err := vap.Generate(vap.Input{Config: cfg, CAs: map[string]vap.CA{cfg.Spec.Owners[0].Name: {PEM: f.New.PEM}}})
	if err != nil {
		return nil, err
	}
	if len(objs.Policies) != 1 {
		return nil, fmt.Errorf("generated %d policies; want 1", len(objs.Policies))
	}
	return objs.Policies[0], nil
}

// Review decodes the review (strictly, as the apiserver does), decodes its
// objects into the unstructured form CEL reads, validates and encodes.
func (c *CEL) Review(ctx context.Context, body []byte, out *bytes.Buffer) error {
	var review admissionv1.AdmissionReview
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &review); err != nil {
		return err
	}
	vreq, err := requestOf(review.Request)
	if err != nil {
		return err
	}
	msgs := c.validator.Validate(ctx, vreq)
	req := review.Request
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true, Result: &metav1.Status{Code: 200}}
	if len(msgs) > 0 {
		resp.Allowed, resp.Result.Code, resp.Result.Message = false, 403, strings.Join(msgs, "; ")
	}
	return json.NewEncoder(out).Encode(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
}

// requestOf is req's objects in the unstructured form CEL reads.
func requestOf(req *admissionv1.AdmissionRequest) (vaptest.Request, error) {
	obj, old := &unstructured.Unstructured{}, &unstructured.Unstructured{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(req.Object.Raw, &obj.Object); err != nil {
		return vaptest.Request{}, err
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(req.OldObject.Raw, &old.Object); err != nil {
		return vaptest.Request{}, err
	}
	return vaptest.Request{
		Operation: admission.Operation(req.Operation), Name: req.Name, Object: obj, Old: old,
		User: &user.DefaultInfo{Name: req.UserInfo.Username, Groups: req.UserInfo.Groups},
	}, nil
}

// regoModule is the policy in Rego, as Gatekeeper-style webhooks run it.
const regoModule = `package guard

writers := {%q}
break_glass_groups := {"system:masters"}
owner_bundles := {%q, %q}

break_glass if {
	some g in input.request.userInfo.groups
	g in break_glass_groups
}

deny contains "not-owner: the subject is not a writer" if {
	not input.request.userInfo.username in writers
	not break_glass
}

deny contains sprintf("ca-mismatch: webhooks[%%d].clientConfig.caBundle is not the owner's CA", [i]) if {
	some i, w in input.request.object.webhooks
	b := w.clientConfig.caBundle
	not b in owner_bundles
}
`

// Rego is a webhook that evaluates the policy with OPA (prepared once).
type Rego struct {
	query rego.PreparedEvalQuery
}

// NewRego compiles the policy.
func NewRego(ctx context.Context, f *Fixture) (*Rego, error) {
	enc := base64.StdEncoding
	module := fmt.Sprintf(regoModule, OwnerUser, enc.EncodeToString(f.Old.PEM), enc.EncodeToString(f.New.PEM))
	q, err := rego.New(rego.Query("data.guard.deny"), rego.Module("guard.rego", module)).PrepareForEval(ctx)
	if err != nil {
		return nil, err
	}
	return &Rego{query: q}, nil
}

// Review decodes the review into generic JSON (OPA's input), evaluates the
// deny set, and encodes the response.
func (r *Rego) Review(ctx context.Context, body []byte, out *bytes.Buffer) error {
	var input map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &input); err != nil {
		return err
	}
	rs, err := r.query.Eval(ctx, rego.EvalInput(input))
	if err != nil {
		return err
	}
	req, _ := input["request"].(map[string]any)
	uid, _ := req["uid"].(string)
	resp := &admissionv1.AdmissionResponse{UID: types.UID(uid), Allowed: true, Result: &metav1.Status{Code: 200}}
	if len(rs) == 1 && len(rs[0].Expressions) == 1 {
		if denies, _ := rs[0].Expressions[0].Value.([]any); len(denies) > 0 {
			msgs := make([]string, len(denies))
			for i, d := range denies {
				msgs[i] = fmt.Sprint(d)
			}
			resp.Allowed, resp.Result.Code, resp.Result.Message = false, 403, strings.Join(msgs, "; ")
		}
	}
	return json.NewEncoder(out).Encode(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Response: resp})
}
