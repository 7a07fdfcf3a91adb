package vap

import (
	"fmt"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap/vapname"
)

// generateMapping builds the objects of one mapping: per target (names,
// selector) and policy part, then one per kind of its CRDs and
// APIServices. generatedBy remembers which mapping generated each object
// name, so that two mappings can never share one.
func generateMapping(spec *guardapi.GuardConfig, o *guardapi.Owner, cas map[string]CA, generatedBy map[string]string) (*Objects, error) {
	ca, ok := cas[o.Name]
	if !ok {
		ca = CA{Err: "the guard has not resolved the owner's CA"}
	}
	m := mappingPolicy{spec: spec, owner: o, mode: spec.OwnerMode(o), ca: ca, rotation: rotation{ca: ca}}
	out := &Objects{}
	add := func(p *admv1.ValidatingAdmissionPolicy, b *admv1.ValidatingAdmissionPolicyBinding) error {
		for _, obj := range []metav1.Object{p, b} {
			key := obj.GetName() + "/" + fmt.Sprintf("%T", obj)
			if other, dup := generatedBy[key]; dup && other != o.Name {
				return fmt.Errorf("owners[%s] and owners[%s] both generate the policy %q: rename one of them", other, o.Name, obj.GetName())
			}
			generatedBy[key] = o.Name
		}
		out.Policies, out.Bindings = append(out.Policies, p), append(out.Bindings, b)
		return nil
	}
	for _, tg := range vapname.Targets(o) {
		selector := (*metav1.LabelSelector)(nil)
		if tg.BySelector {
			selector = o.Match.LabelSelector
		}
		for _, part := range m.parts() {
			if err := add(m.build(tg.Name+part.suffix(), selector, part)); err != nil {
				return nil, err
			}
		}
	}
	for _, k := range trustKinds {
		if len(k.names(m)) == 0 {
			continue
		}
		for _, part := range m.parts() {
			if err := add(m.buildTrust(k, part)); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
