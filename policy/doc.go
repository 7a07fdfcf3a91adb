// Package policy is webhook-guard's ownership decision: given a GuardConfig
// loaded into Mappings (Load) and one write of a guarded object (an
// Input), which owner mapping it falls under, which rules it breaks and
// what happens to it (a Decision) (docs/design.md). Mappings.Evaluate is
// the one entry point: admission and the observer hand it the Input and an
// Env (how to look the owner's CA up, the write budget); Decide is the
// rules alone, with the CA given. Its vocabulary is the owner, the mapping
// and the rule; the rule table (rules.go) lists every rule, in priority
// order. It also decides writes of the objects the policy shape generates
// (DecideAdmissionPolicyObject).
//
// The GuardConfig API is package policy/api/v1alpha1 (guardapi), caBundle
// parsing package policy/cabundle, flapping detection package
// policy/flapping, and the names of the generated policies package
// policy/vap/vapname.
//
// Everything here is pure: no Kubernetes client, no HTTP, no files, no clock.
// What needs I/O (reading a CA source, the time) comes in through Env and
// Input, so every rule can be table-tested in isolation.
package policy
