// Package vapname names the ValidatingAdmissionPolicies (and bindings) the
// policy shape generates for an owner mapping. The names live here, not in
// policy/vap, so that loading a GuardConfig (policy.Load) can refuse one
// whose mappings would generate one name: the syncer would otherwise write
// that object for each in turn. policy/vap builds every name with these
// functions; nothing else spells them.
package vapname
