package policysync

import (
	"errors"
	"fmt"
	"maps"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// Reasons of the syncer's Events.
const (
	ReasonAnchorMissing  = "PolicyAnchorMissing"
	ReasonPolicyRefused  = "PolicyRefused"
	ReasonPolicyAccepted = "PolicyAccepted"
)

// lastRefused is a copy of reported.
func (s *Syncer) lastRefused() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.reported)
}

// reportRefusals sets each mapping's refusal gauge and logs (and writes an
// Event about) a refusal when it starts and when it ends: not once per pass.
func (s *Syncer) reportRefusals(cfg *policy.Mappings, objs *vap.Objects, refusals map[string]error) {
	s.Metrics.Refused.Reset()
	for i := range cfg.Spec.Owners {
		name := cfg.Spec.Owners[i].Name
		err := refusals[name]
		v := 0.0
		if err != nil {
			v = 1
		}
		s.Metrics.Refused.WithLabelValues(name).Set(v)
		s.mu.Lock()
		_, was := s.reported[name]
		if err != nil {
			s.reported[name] = refusedObject(err)
		} else {
			delete(s.reported, name)
		}
		s.mu.Unlock()
		switch {
		case err != nil && !was:
			s.Log.Error(errors.New(trimReason(err.Error())), "policy shape: kube-apiserver refused a generated object; the mapping's caBundle changes fail closed (ca-unavailable) until it accepts them", "mapping", name)
			s.event(objs, name, "Warning", ReasonPolicyRefused, fmt.Sprintf("kube-apiserver refused a generated object of mapping %q; its caBundle changes fail closed (ca-unavailable): %s", name, trimReason(err.Error())))
		case err == nil && was:
			s.Log.Info("policy shape: kube-apiserver accepts the mapping's generated objects again", "mapping", name)
			s.event(objs, name, "Normal", ReasonPolicyAccepted, fmt.Sprintf("kube-apiserver accepts the generated objects of mapping %q again", name))
		}
	}
}

// event writes an Event about the mapping's main policy.
func (s *Syncer) event(objs *vap.Objects, mapping, eventType, reason, note string) {
	if s.Events == nil {
		return
	}
	regarding := &admv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: vap.PolicyName(mapping)},
	}
	for _, p := range objs.Policies {
		if p.Labels[vap.LabelMapping] == vap.Labels(mapping)[vap.LabelMapping] {
			regarding.Name = p.Name
			break
		}
	}
	s.Events.Eventf(regarding, nil, eventType, reason, "Sync", "%s", note)
}
