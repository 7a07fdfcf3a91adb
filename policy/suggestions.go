package policy

import (
	"fmt"
	"strings"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// FindingFacts are what a report or an audit log holds about a finding: the
// facts a rule's suggestion is filled in with.
type FindingFacts struct {
	// Mapping is the owner mapping; several, comma-separated, for
	// ambiguous-owner.
	Mapping string
	// Subject is who wrote: a username, or for an observed change
	// ObservedSubjectPrefix and the field managers.
	Subject string
	// Configuration is the written object as "Kind/name".
	Configuration string
	// ExpectedCA and FoundCA are short fingerprints of the owner's CA and of
	// the written one; FoundCA is empty when the bundle held no usable
	// certificate.
	ExpectedCA string
	FoundCA    string
	// Observed marks a change the guard's observer saw in a watch, after the
	// fact, rather than a request it decided.
	Observed bool
	// FieldManagers own the changed caBundles (observed findings).
	FieldManagers string
	// Writers wrote the distinct caBundles of a flapping finding.
	Writers string
}

// The suggestions of the rule table, in its order. Each names the config
// change, or the fix in the cluster, that makes the finding go away.

func suggestNotOwner(f FindingFacts) string {
	writers := "owners[" + f.Mapping + "].writers"
	if ns, name, ok := guardapi.ServiceAccountOf(f.Subject); ok {
		return fmt.Sprintf("add %s/%s to %s.serviceAccounts (if %s owns %s), or stop it writing the configuration", ns, name, writers, f.Subject, f.Configuration)
	}
	return fmt.Sprintf("add %q to %s.users (if %s owns %s), or stop it writing the configuration", f.Subject, writers, f.Subject, f.Configuration)
}

func suggestAmbiguousOwner(f FindingFacts) string {
	return fmt.Sprintf("the label selectors of mappings %s all match %s: narrow all but one", f.Mapping, f.Configuration)
}

func suggestCAUnavailable(f FindingFacts) string {
	return fmt.Sprintf("the owner's CA source could not be read when %s wrote caBundle: fix owners[%s].ca or the guard's RBAC to read it", f.Subject, f.Mapping)
}

// suggestCAMismatch tells an observed change apart: the observer knows the
// field managers but not the user, which only the audit log names.
func suggestCAMismatch(f FindingFacts) string {
	if f.Observed {
		return fmt.Sprintf("a caBundle not matching the owner's CA (%s) was observed on %s, written by %s (found CA %s; managedFields: %s): make that client use the owner's CA (owners[%s].ca) or stop it writing caBundle; review --audit-log names the user",
			orDash(f.ExpectedCA), f.Configuration, strings.TrimPrefix(f.Subject, ObservedSubjectPrefix), orDash(f.FoundCA), orDash(f.FieldManagers), f.Mapping)
	}
	found := f.FoundCA
	if found == "" {
		found = "none: empty or invalid PEM"
	}
	// Only a writer of the mapping (or break-glass) gets this far: the
	// suggestion never proposes removing it from the writers, which would
	// lock out the controller that applies the configuration.
	return fmt.Sprintf("the caBundle written by %s (CA %s) is neither the owner's CA (%s) nor already in that entry; if that CA is the right one, point owners[%s].ca at the source %s writes from; if %s is a second CA writer, make it use the owner's CA or stop it writing caBundle (it stays a writer of the rest of the configuration)",
		f.Subject, found, orDash(f.ExpectedCA), f.Mapping, f.Subject, f.Subject)
}

func suggestAdmissionPolicyObject(f FindingFacts) string {
	return fmt.Sprintf("%s changed %s, which the policy shape generates: change the owner mappings in the GuardConfig instead, the guard regenerates it", f.Subject, f.Configuration)
}

func suggestUnmanaged(f FindingFacts) string {
	return fmt.Sprintf("no mapping covers %s: add it to the match of the mapping of the controller that owns it", f.Configuration)
}

func suggestWriteBudget(f FindingFacts) string {
	return fmt.Sprintf("%s changed the caBundle of %s beyond owners[%s].writeBudget: find why the owner's controller rewrites it in a loop; raise the budget only if the rate is legitimate", f.Subject, f.Configuration, f.Mapping)
}

func suggestServingUnverified(f FindingFacts) string {
	return fmt.Sprintf("%s wrote a caBundle to %s that its endpoint's certificate does not chain to: serve a leaf under the new CA before publishing a CA without the old one, or set owners[%s].verifyServing: warn if this writer publishes first by design", f.Subject, f.Configuration, f.Mapping)
}

func suggestBreakGlass(f FindingFacts) string {
	return fmt.Sprintf("break-glass write by %s: confirm it was intended; break-glass is always allowed", f.Subject)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
