// Package vaptest evaluates a generated ValidatingAdmissionPolicy with
// Kubernetes' own VAP engine (k8s.io/apiserver validating.Validator),
// compiled the way the VAP plugin's compilePolicy compiles a policy:
// variables, matchConditions, validations and message expressions, in the
// CEL environment of the kube-apiserver version the module is built from.
// Unit tests and benchmarks use it to run the policy shape without a
// control plane; the e2e suite proves the same on a real kube-apiserver.
package vaptest

import (
	"context"
	"strings"

	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
)

// ValidatingGVK and ValidatingGVR name ValidatingWebhookConfigurations.
var (
	ValidatingGVK = schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"}
	ValidatingGVR = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
)

// resources are the guarded kinds' resources, by kind.
var resources = map[string]string{
	"ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
	"MutatingWebhookConfiguration":   "mutatingwebhookconfigurations",
	"CustomResourceDefinition":       "customresourcedefinitions",
	"APIService":                     "apiservices",
}

// kindOf is the request's kind and resource, as kube-apiserver hands them
// to CEL (request.kind): the objects' own (the new one, else the old one),
// a ValidatingWebhookConfiguration's when they name none. Generated
// policies match names per kind, so a mutating configuration must be
// evaluated as one.
func kindOf(objs ...runtime.Object) (schema.GroupVersionKind, schema.GroupVersionResource) {
	for _, o := range objs {
		if o == nil {
			continue
		}
		gvk := o.GetObjectKind().GroupVersionKind()
		if _, typed := o.(*admv1.MutatingWebhookConfiguration); typed && gvk.Kind == "" {
			gvk = admv1.SchemeGroupVersion.WithKind("MutatingWebhookConfiguration")
		}
		if res, ok := resources[gvk.Kind]; ok {
			return gvk, gvk.GroupVersion().WithResource(res)
		}
	}
	return ValidatingGVK, ValidatingGVR
}

// Validator is one compiled policy.
type Validator struct {
	v validating.Validator
}

// Compile compiles p.
func Compile(p *admv1.ValidatingAdmissionPolicy) (*Validator, error) {
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return nil, err
	}
	vars := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
	msgVars := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil}
	variables := make([]plugincel.NamedExpressionAccessor, len(p.Spec.Variables))
	for i, v := range p.Spec.Variables {
		variables[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	compiler.CompileAndStoreVariables(variables, vars, environment.StoredExpressions)
	conds := make([]plugincel.ExpressionAccessor, len(p.Spec.MatchConditions))
	for i := range p.Spec.MatchConditions {
		conds[i] = (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
	}
	validations := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	for i, v := range p.Spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	matcher := matchconditions.NewMatcher(compiler.CompileCondition(conds, vars, environment.StoredExpressions), p.Spec.FailurePolicy, "policy", "validate", p.Name)
	v := validating.NewValidator(
		compiler.CompileCondition(validations, vars, environment.StoredExpressions),
		matcher,
		compiler.CompileCondition(nil, vars, environment.StoredExpressions),
		compiler.CompileCondition(messages, msgVars, environment.StoredExpressions),
		p.Spec.FailurePolicy, nil)
	if err := v.CompileError(); err != nil {
		return nil, err
	}
	return &Validator{v: v}, nil
}

// Request is one admission request, with its objects in the unstructured
// form kube-apiserver hands CEL (a caBundle is its base64 text).
type Request struct {
	Operation   admission.Operation
	Name        string
	Object, Old *unstructured.Unstructured
	User        user.Info
	// Params is the binding's param object; nil when there is none.
	Params runtime.Object
}

// Validate evaluates the policy and returns the messages of its denials
// (none: the request is admitted).
func (v *Validator) Validate(ctx context.Context, r Request) []string {
	var obj, old runtime.Object
	if r.Object != nil {
		obj = r.Object
	}
	if r.Old != nil {
		old = r.Old
	}
	return v.ValidateObjects(ctx, r.Operation, r.Name, obj, old, r.User, r.Params)
}

// ValidateObjects is Validate for objects of any form: kube-apiserver hands
// the VAP engine the typed objects it decoded for the write, which CEL
// converts on first access, so a benchmark of what a policy costs
// kube-apiserver passes typed objects here (nil: none).
func (v *Validator) ValidateObjects(ctx context.Context, op admission.Operation, name string, obj, old runtime.Object, u user.Info, params runtime.Object) []string {
	r := Request{Operation: op, Name: name, User: u, Params: params}
	gvk, gvr := kindOf(obj, old)
	attrs := admission.NewAttributesRecord(obj, old, gvk, "", r.Name, gvr, "", r.Operation, nil, false, r.User)
	va := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: gvk, VersionedObject: admission.NewLazyObject(obj), VersionedOldObject: admission.NewLazyObject(old)}
	res := v.v.Validate(ctx, gvr, va, r.Params, nil, celconfig.RuntimeCELCostBudget, nil)
	var msgs []string
	for _, d := range res.Decisions {
		if d.Action != validating.ActionAdmit {
			msgs = append(msgs, strings.TrimSpace(d.Message))
		}
	}
	return msgs
}
