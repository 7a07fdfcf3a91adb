// Package policy holds webhook-guard's decision logic: the GuardConfig owner
// mappings, their loading and validation, subject matching, CA bundle parsing
// and fingerprints, and the single-ownership decision (docs/design.md).
//
// Everything here is pure: no Kubernetes client, no HTTP, no files, no clock.
// Callers (the admission handler, the check CLI, benchmarks) resolve CA
// sources and read files themselves and hand the results in, so every rule
// can be table-tested in isolation.
package policy
