// Package observe watches Validating- and MutatingWebhookConfigurations and
// judges every change of a guarded configuration, old object against new,
// with the decision code admission uses: caBundles against the owner's CA,
// flapping from the stream of changes, and who changed it as far as the
// object tells (the field managers that own the changed caBundles in
// managedFields).
//
// It exists because kube-apiserver does not always ask the guard: in the
// policy shape it never does (a ValidatingAdmissionPolicy decides inside
// kube-apiserver and keeps no state across requests), and in the static
// shape writes made while the guard was down, or through the break-glass
// entry, never reach it. The watch sees them all.
//
// The observer runs on the leader only, so each change is recorded once
// however many replicas run. A watch costs nothing while nothing changes:
// no polling, no writes, and work proportional to the changes. The informer
// keeps only what the decision and the health series read (names, labels,
// annotations, caBundles, failure policies, timeouts, the Services called,
// the managedFields entries that own a caBundle); the objects at startup
// are the baseline, not changes.
//
// The leader also exports, computed from the watch at each scrape, one
// series per webhook entry of every configuration, guarded or not: its
// failure policy, timeout, owner mapping and caBundle expiry (health.go),
// and the ready endpoints of the Service it calls, from a watch of
// EndpointSlices that keeps a count per slice (endpoints.go). It exports
// the same series for the one entry of each CustomResourceDefinition with
// a conversion webhook and each APIService with a service, from watches
// that keep of each object its name, Service and caBundle
// (trustobjects.go); it does not judge their changes.
package observe
