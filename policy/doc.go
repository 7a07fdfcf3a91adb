// Package policy is webhook-guard's ownership decision: given a GuardConfig
// loaded into Mappings (Load) and one write of a webhook configuration (an
// Input), which owner mapping it falls under, which rules it breaks and
// what happens to it (a Decision) (docs/design.md). Its vocabulary is the
// owner, the mapping and the rule; the rule table (rules.go) lists every
// rule, in priority order. It also decides writes of the objects policy
// mode generates (DecideAdmissionPolicyObject).
//
// The GuardConfig API is package policy/api/v1alpha1 (guardapi), caBundle
// parsing package policy/cabundle, flapping detection package
// policy/flapping, and the names of the generated policies package
// policy/vap/vapname.
//
// Everything here is pure: no Kubernetes client, no HTTP, no files, no clock.
// Callers (the admission handler, the check CLI, benchmarks) resolve CA
// sources and read files themselves and hand the results in, so every rule
// can be table-tested in isolation.
package policy
