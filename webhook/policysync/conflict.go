package policysync

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	admv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ReasonPolicyConflict is the reason of the Event about a server-side apply
// conflict: another field manager changed a field the guard owns.
const ReasonPolicyConflict = "PolicyConflict"

// conflictManagers names the field managers a server-side apply conflict
// is with (sorted, each once); nil when err is no such conflict.
// kube-apiserver names each in a cause's message: `conflict with "kubectl-
// edit" using admissionregistration.k8s.io/v1 at 2026-01-01T00:00:00Z`.
func conflictManagers(err error) []string {
	var status apierrors.APIStatus
	if err == nil || !apierrors.IsConflict(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var out []string
	for _, c := range status.Status().Details.Causes {
		if c.Type != metav1.CauseTypeFieldManagerConflict {
			continue
		}
		m := managerOf(c.Message)
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}

// managerOf is the quoted manager of a conflict cause's message, or the
// message itself when it has none.
func managerOf(msg string) string {
	rest, ok := strings.CutPrefix(msg, "conflict with ")
	if !ok || !strings.HasPrefix(rest, `"`) {
		return msg
	}
	quoted, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return msg
	}
	m, err := strconv.Unquote(quoted)
	if err != nil {
		return msg
	}
	return m
}

// conflictFields are the fields a conflict names, for the Event and the log.
func conflictFields(err error) []string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var out []string
	for _, c := range status.Status().Details.Causes {
		if c.Type == metav1.CauseTypeFieldManagerConflict && !slices.Contains(out, c.Field) {
			out = append(out, c.Field)
		}
	}
	slices.Sort(out)
	return out
}

// reportConflict counts an apply conflict and says who the guard is
// overriding. A conflict with FieldManager itself is with the guard's own
// earlier writes made by update rather than apply (removeForeign's, or an
// object written before the guard applied): taking those fields over is no
// fight and is only logged.
func (s *Syncer) reportConflict(mapping, kind, name string, managers []string, err error) {
	fields := conflictFields(err)
	others := slices.DeleteFunc(slices.Clone(managers), func(m string) bool { return m == FieldManager })
	if len(others) == 0 {
		s.Log.Info("policy shape: taking over fields of a generated object the guard wrote by update", "kind", kind, "name", name, "fields", fields)
		return
	}
	s.reportFight(mapping, kind, name, others, fields, "the guard applied its own again with force")
}

// reportFight counts a fight over a generated object (other managers
// changed or added fields of it) and writes an Event naming them and what
// the guard did about it.
func (s *Syncer) reportFight(mapping, kind, name string, others, fields []string, done string) {
	s.Metrics.Conflicts.WithLabelValues(mapping, kind, name).Inc()
	note := fmt.Sprintf("field manager %s changed %s of the generated %s %q; %s, as it does at every such change",
		quoteAll(others), strings.Join(fields, ", "), kind, name, done)
	if mapping != "" {
		note += fmt.Sprintf(" (mapping %q)", mapping)
	}
	s.Log.Info("policy shape: "+note, "kind", kind, "name", name, "mapping", mapping, "managers", others)
	if s.Events == nil {
		return
	}
	var regarding runtime.Object = &admv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: kindAdmissionPolicy},
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}
	if kind == kindAdmissionPolicyBinding {
		regarding = &admv1.ValidatingAdmissionPolicyBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: kindAdmissionPolicyBinding},
			ObjectMeta: metav1.ObjectMeta{Name: name},
		}
	}
	s.Events.Eventf(regarding, nil, "Warning", ReasonPolicyConflict, "Apply", "%s", note)
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}
