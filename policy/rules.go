package policy

import "sort"

// RuleInfo is what the guard says about one rule wherever it reports it:
// one entry per rule in ruleTable, so adding a rule is one entry (and its
// decision), and Test_ruleTable fails when a Rule constant has none.
type RuleInfo struct {
	// Priority orders a decision's violations: the one with the lowest
	// priority is the rule the decision is counted and annotated under.
	// Every rule has its own, starting at 1, so a forgotten entry cannot
	// silently win with 0.
	Priority int
	// Summary says in a few words what breaking the rule means (review
	// output, docs, metrics).
	Summary string
	// Hint is the rule's fix where its violations carry a fixed one; ""
	// where each violation words its own (not-owner names the subject,
	// ca-mismatch says what was wrong with the bundle).
	Hint string
	// Category groups the rule's results in ClusterReports (Policy
	// Reporter filters and charts by it).
	Category string
	// EventReason is the reason of the Kubernetes Events recorded for this
	// rule; "" where the outcome names it (Denied, WouldDeny, BreakGlass).
	EventReason string
	// Suggest words what `webhook-guard review` suggests for a finding of
	// this rule, filled in with the finding's facts: the config change, or
	// the fix in the cluster, that makes it go away. nil only for RuleNone,
	// which nothing breaks.
	Suggest func(FindingFacts) string
}

// ruleTable is every rule the decision can name.
var ruleTable = map[Rule]RuleInfo{
	RuleNotOwner: {
		Priority: 1,
		Summary:  "the subject is neither a writer of the owning mapping nor break-glass",
		Category: "Ownership",
		Suggest:  suggestNotOwner,
	},
	RuleAmbiguousOwner: {
		Priority: 2,
		Summary:  "the label selectors of several mappings match the configuration",
		Category: "Configuration",
		Hint:     "narrow the labelSelector of all but one of these mappings",
		Suggest:  suggestAmbiguousOwner,
	},
	RuleCAUnavailable: {
		Priority: 3,
		Summary:  "a caBundle was written but the owner's CA source could not be read",
		Category: "CA bundle",
		Hint:     "fix the CA source named above; updates that leave caBundle alone are not affected",
		Suggest:  suggestCAUnavailable,
	},
	RuleCAMismatch: {
		Priority: 4,
		Summary:  "a caBundle is invalid, emptied, missing, or not the owner's CA",
		Category: "CA bundle",
		Suggest:  suggestCAMismatch,
	},
	RuleAdmissionPolicyObject: {
		Priority: 5,
		Summary:  "someone other than the guard and break-glass wrote an object policy mode generates",
		Category: "Policy objects",
		Hint:     "change the owner mappings in the GuardConfig instead, the guard regenerates them",
		Suggest:  suggestAdmissionPolicyObject,
	},
	RuleUnmanaged: {
		Priority:    6,
		Summary:     "no owner mapping covers the configuration",
		Category:    "Unmanaged",
		Hint:        "add it to the match of the mapping of the controller that owns it",
		EventReason: "UnmanagedWrite",
		Suggest:     suggestUnmanaged,
	},
	RuleBreakGlass: {
		Priority: 7,
		Summary:  "a break-glass subject wrote a guarded configuration",
		Category: "Break-glass",
		Suggest:  suggestBreakGlass,
	},
	RuleNone: {
		Priority: 8,
		Summary:  "no rule was broken",
		Category: "Other",
	},
}

// Info is the rule's entry in the rule table; the zero RuleInfo for a
// string that is no rule.
func (r Rule) Info() RuleInfo { return ruleTable[r] }

// Rules lists every rule, in priority order.
func Rules() []Rule {
	out := make([]Rule, 0, len(ruleTable))
	for r := range ruleTable {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return ruleTable[out[i]].Priority < ruleTable[out[j]].Priority })
	return out
}
