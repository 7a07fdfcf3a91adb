package policy

import (
	"slices"
	"strings"
	"time"
)

// FieldManager is one managedFields entry that owns a caBundle of a
// configuration. managedFields names the client that wrote (its field
// manager, e.g. "kubectl-patch" or a controller's name), never the user:
// the user is in kube-apiserver's audit log.
type FieldManager struct {
	Name string `json:"name"`
	// Operation is Update or Apply.
	Operation string `json:"operation"`
	// Time is when the manager last changed a field it owns (second precision).
	Time time.Time `json:"time"`
}

// String is "name (Operation time)".
func (m FieldManager) String() string {
	s := m.Name + " (" + m.Operation
	if !m.Time.IsZero() {
		s += " " + m.Time.UTC().Format(time.RFC3339)
	}
	return s + ")"
}

// ObservedSubjectPrefix starts the subject of an observed change: the
// field managers of the changed caBundles, because the user is unknown.
const ObservedSubjectPrefix = "fieldManager:"

// ObservedSubject is who an observed change is attributed to: the names of
// the field managers, sorted, after ObservedSubjectPrefix;
// "fieldManager:unknown" when the object names none.
func ObservedSubject(ms []FieldManager) string {
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		if !slices.Contains(names, m.Name) {
			names = append(names, m.Name)
		}
	}
	if len(names) == 0 {
		return ObservedSubjectPrefix + "unknown"
	}
	slices.Sort(names)
	return ObservedSubjectPrefix + strings.Join(names, ",")
}

// decideObserved judges a change seen after the fact: the old and new
// object of a watch event. Without a request there is no user, so not-owner
// cannot be decided and break-glass cannot be recognized; what the object
// shows can: every caBundle the change added, changed or emptied is checked
// against the owner's CA exactly as for a request (ca-mismatch,
// ca-unavailable). Configurations no single mapping owns are not judged.
// The outcome is what the mapping's mode says about the change (deny in
// enforce, audit in audit); the change has happened either way.
func (c *Mappings) decideObserved(m MatchResult, in *Input) Decision {
	d := Decision{
		Operation: in.Operation,
		Kind:      in.Kind,
		Name:      in.Name,
		Subject:   in.User.Username,
		Observed:  true,
		Changes:   ChangedBundles(in),
		Outcome:   OutcomeAllow,
		Rule:      RuleNone,
	}
	if m.Owner == nil || len(m.Conflicting) > 0 {
		return d
	}
	d.Mapping, d.Mode = m.Owner.Name, m.Mode
	if in.Operation != OperationDelete {
		d.Violations = c.checkBundles(&c.owners[m.index], in, d.Changes)
	}
	d.finish(d.Mode, false)
	return d
}
