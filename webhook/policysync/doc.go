// Package policysync keeps the policy shape's generated objects (policy/vap) in
// step with the owner mappings and the owners' CA sources.
//
// Syncer is a controller-runtime reconciler that runs on the leader only.
// Every event becomes the same request, so events coalesce into passes and
// a pass covers every mapping (orphans, the anchor and refusals concern
// them all):
//
//   - the generated ValidatingAdmissionPolicies and bindings, watched by
//     their managed-by label in a cache of their own (NewObjectCache): a
//     deleted or edited object is restored as soon as the watch delivers
//     the change;
//   - the objects the CA sources are read from, watched one by one by name
//     (a casource.WatchReader, as admissions read them: Secrets,
//     ConfigMaps, cert-manager objects, the configurations an
//     injectedByCertManager mapping names);
//   - Trigger (a configuration reload), and a resync every Interval that
//     repairs whatever a missed event left behind and keeps the
//     webhook_guard_policy_syncs_total count of passes.
//
// Writes are server-side applies under one field manager (FieldManager):
// the fields the guard sets are the guard's. A pass applies an object only
// when the fields kube-apiserver records as the guard's (client-go's
// Extract of its managed fields) differ from the generated ones, so an
// unchanged cluster costs neither a write nor a write request, and
// defaults kube-apiserver adds belong to no manager and never make the
// guard rewrite anything. Another manager changing a field the guard owns
// makes the guard's next apply, sent without force, a conflict: the guard
// counts it (webhook_guard_policy_apply_conflicts_total by mapping, kind
// and name), logs it and writes a PolicyConflict Event naming that manager,
// then applies with force, so it always wins on its own objects and every
// round of a fight is visible. Server-side apply never removes a field
// another manager added beside the guard's (a matchCondition, a selector
// narrowing a binding), so a field of the spec owned by another manager
// and not by the guard is a fight too: counted and reported the same way,
// and removed by an update of the spec.
//
// What the pass writes, and what it does when kube-apiserver refuses an
// object (the mapping is generated again as a ca-unavailable policy:
// refusal.go), is decided here; how a mapping becomes objects is
// policy/vap's.
package policysync
