package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	cabundle "github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// Decide applies the single-ownership rules (docs/design.md) to one
// request whose owner's CA, if the decision needs it, is already in in.CA:
// the rules alone, for tables of cases and for generators that compare
// their output with them. Callers that serve requests use Evaluate, which
// looks the CA up.
func (c *Mappings) Decide(in *Input) Decision {
	return c.decideMatched(c.MatchInput(in), in)
}

// decideMatched is Decide for an input already matched (Evaluate matches
// once to know whose CA to look up). m must come from c.MatchInput for the
// same input.
func (c *Mappings) decideMatched(m MatchResult, in *Input) Decision {
	if in.Observed {
		return c.decideObserved(m, in)
	}
	d := newDecision(in.Operation, in.Kind, in.Name, in.User, in.DryRun)
	d.Changes = ChangedBundles(in)
	breakGlass := c.IsBreakGlass(in.User)

	switch {
	case len(m.Conflicting) > 0:
		d.Mode = m.Mode
		d.Mapping = strings.Join(m.Conflicting, ",")
		d.Violations = append(d.Violations, Violation{
			Rule:   RuleAmbiguousOwner,
			Field:  "metadata.labels",
			Detail: fmt.Sprintf("the label selectors of mappings %s all match this configuration; single ownership cannot be decided", strings.Join(quoteAll(m.Conflicting), ", ")),
			Hint:   RuleAmbiguousOwner.Info().Hint,
		})
		d.finish(d.Mode, breakGlass)
		return d
	case m.Owner == nil:
		d.Outcome, d.Rule = OutcomeAllow, RuleNone
		if breakGlass {
			// Break-glass writes are always recorded, even to unmanaged configurations.
			d.Outcome, d.Rule, d.Record = OutcomeBreakGlass, RuleBreakGlass, !in.DryRun
		} else if c.Spec.Unmanaged == guardapi.UnmanagedAudit {
			d.Outcome, d.Rule, d.Record = OutcomeAudit, RuleUnmanaged, !in.DryRun
			d.Violations = []Violation{{
				Rule:   RuleUnmanaged,
				Detail: "no owner mapping covers this configuration",
				Hint:   RuleUnmanaged.Info().Hint,
			}}
		}
		return d
	}

	d.Mapping, d.Mode = m.Owner.Name, m.Mode
	co := &c.owners[m.index]
	if !breakGlass && !co.writers.matches(in.User) {
		if in.Kind.OwnsTrustOnly() && !ChangesTrust(co.spec.CA, in, d.Changes) {
			// The object's installer writing what is not the mapping's
			// (a CRD's schema): only the entry rules apply, so that it
			// cannot add an entry trusting the system roots either.
			d.Violations = append(d.Violations, checkUnfilled(co, in, false)...)
			d.finish(d.Mode, false)
			return d
		}
		// Who the subject is decides it: the owner's CA is neither read nor
		// shown for a subject that may not write, whatever its request
		// names, so a request can make the guard read nothing on its behalf.
		d.Violations = append(d.Violations, notOwner(co, in))
		d.finish(d.Mode, false)
		return d
	}
	if in.Operation != OperationDelete {
		d.Violations = append(d.Violations, c.checkBundles(co, in, d.Changes)...)
		if !breakGlass {
			// Break-glass may leave entries empty as before (an
			// administrator creating a configuration ahead of its
			// controller); a writer may not, unless a fill is coming.
			d.Violations = append(d.Violations, checkUnfilled(co, in, true)...)
			d.Violations = append(d.Violations, checkInsecure(in)...)
			d.Violations = append(d.Violations, checkPointer(co, in)...)
		}
	}
	// Break-glass subjects are always allowed, writers or not (the static
	// webhook sends their writes to an entry that fails open);
	// what they broke is still listed, warned about and recorded.
	d.finish(d.Mode, breakGlass)
	return d
}

// needsOwnerCA reports whether deciding the matched input needs the owner's
// CA from its source, which is not inline: for a writer or break-glass
// subject whose request sets a caBundle to something non-empty, and for a
// request that leaves an entry empty for cainjector to fill (the fill is
// allowed only while the CA it will bring can be read). The caller resolves
// the CA only then.
func (c *Mappings) needsOwnerCA(m MatchResult, in *Input) bool {
	if m.index < 0 || c.owners[m.index].inlineCA != nil {
		return false
	}
	co := &c.owners[m.index]
	if in.Observed {
		// An observed change has no user to rule out: its caBundles are
		// always checked against the owner's CA.
		return NeedsCA(in)
	}
	if c.IsBreakGlass(in.User) {
		return NeedsCA(in)
	}
	writer := co.writers.matches(in.User)
	return writer && NeedsCA(in) || claimsFill(co, in, writer)
}

func notOwner(co *compiledOwner, in *Input) Violation {
	v := Violation{
		Rule:   RuleNotOwner,
		Field:  "userInfo",
		Detail: fmt.Sprintf("%q is not a writer", in.User.Username),
	}
	if ns, name, ok := guardapi.ServiceAccountOf(in.User.Username); ok {
		v.Hint = fmt.Sprintf("if it should own this configuration, add %s/%s to owners[%s].writers.serviceAccounts", ns, name, co.spec.Name)
	} else {
		v.Hint = fmt.Sprintf("if it should own this configuration, add %q to owners[%s].writers.users", in.User.Username, co.spec.Name)
	}
	if in.Operation == OperationDelete {
		v.Detail = fmt.Sprintf("%q is not a writer; deleting it (and recreating it) is a takeover", in.User.Username)
	}
	return v
}

// checkBundles applies ca-mismatch and ca-unavailable to every caBundle the
// request writes.
func (c *Mappings) checkBundles(co *compiledOwner, in *Input, changes []BundleChange) []Violation {
	var out []Violation
	for _, ch := range changes {
		// The field path is formatted only for a violation: the common
		// write, the owner's own CA, builds no strings.
		mismatch := func() Violation { return Violation{Rule: RuleCAMismatch, Field: ch.Field(), Webhook: ch.Webhook} }
		if ch.Removed {
			// An entry gone from the object takes its trust with it:
			// kube-apiserver no longer calls that endpoint at all. Writers
			// drop entries in normal operation (Kyverno removes a webhook
			// when the last policy that uses it goes). A rename is a
			// removal plus a new entry, and the new entry is held to the
			// rules of new entries: the current CA, or an empty caBundle
			// only while cainjector will fill it.
			continue
		}
		if ch.Emptied() {
			v := mismatch()
			v.Detail = "a non-empty caBundle was emptied; kube-apiserver would trust its system roots for the webhook instead of the owner's CA"
			v.Hint = "write the owner's CA instead of removing it"
			out = append(out, v)
			continue
		}
		fps, err := in.Fingerprints.Parse(ch.New)
		if err != nil {
			v := mismatch()
			v.Detail = "the caBundle " + err.Error()
			v.Hint = "caBundle must hold the owner's CA certificates in PEM"
			out = append(out, v)
			continue
		}
		set, caErr := ownerCA(co, in)
		if caErr != nil {
			out = append(out, Violation{
				Rule:    RuleCAUnavailable,
				Field:   ch.Field(),
				Webhook: ch.Webhook,
				Detail:  "cannot verify the new caBundle: " + caErr.Error() + "; caBundle changes fail closed until the source can be read",
				Hint:    RuleCAUnavailable.Info().Hint,
			})
			continue
		}
		if v, ok := rotationViolation(set, fps, ch, in); !ok {
			v.Field, v.Webhook = ch.Field(), ch.Webhook
			out = append(out, v)
		}
	}
	return out
}

// rotationViolation applies the rotation rule to one changed caBundle whose
// certificates are fps: every certificate must be in the owner's current CA
// set or already in the stored caBundle of the same entry (a merging writer
// such as cert-manager's cainjector keeps the old CA beside the new one until
// it expires), and at least one must be in the current set (the bundle still
// trusts the owner's current CA). A kept certificate is allowed whether or
// not it has expired: kube-apiserver's verifier never trusts an expired CA,
// so keeping one grants nothing. "Stored" means the entry of the same name in
// the object before the request: a new or renamed entry, and every entry of a
// CREATE, has nothing stored and may hold only the current CA.
func rotationViolation(set cabundle.CASet, fps []cabundle.Fingerprint, ch BundleChange, in *Input) (Violation, bool) {
	current := false
	var foreign []cabundle.Fingerprint
	for _, fp := range fps {
		if set.Contains(fp) {
			current = true
		} else {
			foreign = append(foreign, fp)
		}
	}
	if len(foreign) > 0 && len(ch.Old) > 0 {
		// Only a bundle with certificates beyond the current set pays for
		// parsing the stored one. A stored bundle that does not parse
		// trusts nothing the guard can name.
		if stored, err := in.Fingerprints.Parse(ch.Old); err == nil {
			kept := cabundle.NewCASetFromFingerprints("", stored...)
			foreign = slices.DeleteFunc(foreign, kept.Contains)
		}
	}
	switch {
	case len(foreign) > 0:
		return Violation{
			Rule:     RuleCAMismatch,
			Detail:   fmt.Sprintf("%d certificate(s) neither in the owner's CA set from %s nor already in this entry's stored caBundle", len(foreign), set.Source),
			Summary:  "certificate(s) not in the owner's CA set",
			Hint:     "write the owner's CA (a rotation may keep the certificates the entry already holds); if the owner's CA changed, update its source first",
			Expected: set.Short(),
			Found:    cabundle.ShortAll(foreign),
		}, false
	case !current:
		return Violation{
			Rule:     RuleCAMismatch,
			Detail:   fmt.Sprintf("the caBundle keeps only certificates of the stored caBundle and none of the owner's CA set from %s", set.Source),
			Summary:  "the caBundle no longer holds the owner's current CA",
			Hint:     "add the owner's current CA to the bundle; a rotation may keep old certificates but must carry the current one",
			Expected: set.Short(),
			Found:    cabundle.ShortAll(fps),
		}, false
	}
	return Violation{}, true
}

func ownerCA(co *compiledOwner, in *Input) (cabundle.CASet, error) {
	if co.inlineCA != nil {
		return *co.inlineCA, nil
	}
	switch {
	case !in.CA.Resolved:
		return cabundle.CASet{}, errors.New("the owner's CA was not resolved")
	case in.CA.Err != nil:
		return cabundle.CASet{}, in.CA.Err
	case in.CA.Set.Len() == 0:
		return cabundle.CASet{}, fmt.Errorf("%s holds no CA certificate", in.CA.Set.Source)
	}
	return in.CA.Set, nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
