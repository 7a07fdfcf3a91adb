// Package vaptest evaluates a generated ValidatingAdmissionPolicy with
// Kubernetes' own VAP engine (k8s.io/apiserver validating.Validator),
// compiled by policy/vap/vapengine the way the VAP plugin compiles a
// policy, in the CEL environment of the kube-apiserver version the module
// is built from.
// Unit tests and benchmarks use it to run the policy shape without a
// control plane; the e2e suite proves the same on a real kube-apiserver.
package vaptest

import (
	"context"
	"strings"

	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/webhook-guard/webhook-guard/policy/vap/vapengine"
)

// ValidatingGVK and ValidatingGVR name ValidatingWebhookConfigurations.
var (
	ValidatingGVK = vapengine.ValidatingGVK
	ValidatingGVR = vapengine.ValidatingGVR
)

// Validator is one compiled policy.
type Validator struct {
	v validating.Validator
}

// Compile compiles p, with kube-apiserver's per-call cost limit.
func Compile(p *admv1.ValidatingAdmissionPolicy) (*Validator, error) {
	c, err := vapengine.Compile(p, vapengine.Env())
	if err != nil {
		return nil, err
	}
	return &Validator{v: c.Validator()}, nil
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
	va, gvr := vapengine.Attributes(op, name, obj, old, u)
	res := v.v.Validate(ctx, gvr, va, params, nil, celconfig.RuntimeCELCostBudget, nil)
	var msgs []string
	for _, d := range res.Decisions {
		if d.Action != validating.ActionAdmit {
			msgs = append(msgs, strings.TrimSpace(d.Message))
		}
	}
	return msgs
}
