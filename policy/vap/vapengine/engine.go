// Package vapengine compiles a ValidatingAdmissionPolicy with Kubernetes'
// own VAP engine (k8s.io/apiserver), the way the VAP plugin's
// compilePolicy compiles one: variables, matchConditions, validations and
// message expressions, in the CEL environment of the kube-apiserver
// version the module is built from. It only computes: the policy shape's
// cost check (policy/vap/cost) runs generated policies with it, and so do
// the tests and benchmarks of policy/vap (through policy/vap/vaptest).
package vapengine

import (
	"math"

	"github.com/google/cel-go/cel"
	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
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

// Env is kube-apiserver's CEL environment, with its per-call cost limit
// (k8s.io/apiserver/pkg/apis/cel PerCallLimit).
func Env() *environment.EnvSet {
	return environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
}

// UnlimitedEnv is Env without the per-call cost limit: an expression that
// kube-apiserver would cancel runs to its end, so that its whole cost can
// be read and compared with the limit.
func UnlimitedEnv() (*environment.EnvSet, error) {
	return Env().Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		ProgramOptions:    []cel.ProgramOption{cel.CostLimit(math.MaxUint64)},
	})
}

// Policy is one compiled policy.
type Policy struct {
	// Compiler holds the policy's variables: a condition it compiles
	// (Condition) reads them as the policy's expressions do.
	Compiler *plugincel.CompositedCompiler
	// Matcher is the policy's matchConditions.
	Matcher matchconditions.Matcher
	// Validations and Messages are the validations' expressions and
	// message expressions, in the policy's order.
	Validations, Messages plugincel.ConditionEvaluator
	// Vars declares what the expressions may read (params, authorizer).
	Vars plugincel.OptionalVariableDeclarations

	failurePolicy *admv1.FailurePolicyType
}

// Compile compiles p in env (Env, or UnlimitedEnv to read costs).
func Compile(p *admv1.ValidatingAdmissionPolicy, env *environment.EnvSet) (*Policy, error) {
	compiler, err := plugincel.NewCompositedCompiler(env)
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
	out := &Policy{
		Compiler:      compiler,
		Matcher:       matchconditions.NewMatcher(compiler.CompileCondition(conds, vars, environment.StoredExpressions), p.Spec.FailurePolicy, "policy", "validate", p.Name),
		Validations:   compiler.CompileCondition(validations, vars, environment.StoredExpressions),
		Messages:      compiler.CompileCondition(messages, msgVars, environment.StoredExpressions),
		Vars:          vars,
		failurePolicy: p.Spec.FailurePolicy,
	}
	if err := out.Validator().CompileError(); err != nil {
		return nil, err
	}
	return out, nil
}

// Validator is the policy as kube-apiserver's VAP plugin runs it.
func (p *Policy) Validator() validating.Validator {
	return validating.NewValidator(p.Validations, p.Matcher,
		p.Compiler.CompileCondition(nil, p.Vars, environment.StoredExpressions),
		p.Messages, p.failurePolicy, nil)
}

// Condition compiles expressions beside the policy's own: they may read
// its variables. Its ConditionEvaluator evaluates them in a composition
// context the caller creates (Compiler.CreateContext), so that the caller
// sees what each expression's variables cost.
func (p *Policy) Condition(expressions []string) *plugincel.CompositedConditionEvaluator {
	acc := make([]plugincel.ExpressionAccessor, len(expressions))
	for i, e := range expressions {
		acc[i] = &validating.ValidationCondition{Expression: e}
	}
	return p.Compiler.CompileCondition(acc, p.Vars, environment.StoredExpressions).(*plugincel.CompositedConditionEvaluator)
}

// Attributes are the admission attributes kube-apiserver hands the VAP
// engine for one request of op on name by u (obj, old: nil when none), and
// the resource it matched. The objects carry the generations kube-apiserver
// sets before validating admission (withGenerations).
func Attributes(op admission.Operation, name string, obj, old runtime.Object, u user.Info) (*admission.VersionedAttributes, schema.GroupVersionResource) {
	gvk, gvr := kindOf(obj, old)
	obj, old = withGenerations(op, obj, old)
	attrs := admission.NewAttributesRecord(obj, old, gvk, "", name, gvr, "", op, nil, false, u)
	return &admission.VersionedAttributes{Attributes: attrs, VersionedKind: gvk, VersionedObject: admission.NewLazyObject(obj), VersionedOldObject: admission.NewLazyObject(old)}, gvr
}
