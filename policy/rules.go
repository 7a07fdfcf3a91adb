package policy

// RuleInfo is what the guard says about one rule wherever it reports it:
// one entry per rule in ruleTable, so adding a rule is one entry (and its
// decision).
type RuleInfo struct {
	// Rule is the rule the entry is about.
	Rule Rule
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

// ruleTable is every rule the decision can name, in priority order: a
// decision that breaks several rules is counted, logged and annotated under
// the one listed first. The position is the priority; nothing else orders
// the rules.
var ruleTable = []RuleInfo{
	{
		Rule:     RuleNotOwner,
		Summary:  "the subject is neither a writer of the owning mapping nor break-glass",
		Category: "Ownership",
		Suggest:  suggestNotOwner,
	},
	{
		Rule:     RuleAmbiguousOwner,
		Summary:  "the label selectors of several mappings match the configuration",
		Category: "Configuration",
		Hint:     "narrow the labelSelector of all but one of these mappings",
		Suggest:  suggestAmbiguousOwner,
	},
	{
		Rule:     RuleCAUnavailable,
		Summary:  "a caBundle was written but the owner's CA source could not be read",
		Category: "CA bundle",
		Hint:     "fix the CA source named above; updates that leave caBundle alone are not affected",
		Suggest:  suggestCAUnavailable,
	},
	{
		Rule:     RuleCAMismatch,
		Summary:  "a caBundle is invalid, emptied, missing, or not the owner's CA",
		Category: "CA bundle",
		Suggest:  suggestCAMismatch,
	},
	{
		Rule:     RuleAdmissionPolicyObject,
		Summary:  "someone other than the guard and break-glass wrote an object the policy shape generates",
		Category: "Policy objects",
		Hint:     "change the owner mappings in the GuardConfig instead, the guard regenerates them",
		Suggest:  suggestAdmissionPolicyObject,
	},
	{
		Rule:        RuleUnmanaged,
		Summary:     "no owner mapping covers the configuration",
		Category:    "Unmanaged",
		Hint:        "add it to the match of the mapping of the controller that owns it",
		EventReason: "UnmanagedWrite",
		Suggest:     suggestUnmanaged,
	},
	{
		Rule:     RuleWriteBudget,
		Summary:  "a writer changed a caBundle more often than the mapping's write budget allows",
		Category: "Write budget",
		Suggest:  suggestWriteBudget,
	},
	{
		Rule:     RuleServingUnverified,
		Summary:  "a writer's caBundle does not verify the certificate its endpoint served at the last probe",
		Category: "Trust path",
		Suggest:  suggestServingUnverified,
	},
	{
		Rule:     RuleBreakGlass,
		Summary:  "a break-glass subject wrote a guarded configuration",
		Category: "Break-glass",
		Suggest:  suggestBreakGlass,
	},
	{
		Rule:     RuleNone,
		Summary:  "no rule was broken",
		Category: "Other",
	},
}

// Info is the rule's entry in the rule table; the zero RuleInfo for a
// string that is no rule.
func (r Rule) Info() RuleInfo {
	if i := r.priority(); i < len(ruleTable) {
		return ruleTable[i]
	}
	return RuleInfo{}
}

// priority is the rule's position in the table; past its end for a string
// that is no rule, so that any rule of the table comes first.
func (r Rule) priority() int {
	for i := range ruleTable {
		if ruleTable[i].Rule == r {
			return i
		}
	}
	return len(ruleTable)
}

// Rules lists every rule, in priority order.
func Rules() []Rule {
	out := make([]Rule, len(ruleTable))
	for i := range ruleTable {
		out[i] = ruleTable[i].Rule
	}
	return out
}
