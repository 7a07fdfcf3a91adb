// Package probe checks, from the guard, each trust path kube-apiserver
// relies on: it dials the endpoint kube-apiserver would call for a guarded
// webhook entry, a CustomResourceDefinition's conversion webhook or an
// APIService, completes a TLS handshake without sending a request, and
// verifies the served chain against the stored caBundle for the server name
// kube-apiserver uses. A caBundle that does not verify what the endpoint
// serves fails every call kube-apiserver makes; kube-apiserver reports it
// only after the fact, in its own metrics and log.
//
// A probe is bounded in time (a deadline per endpoint), in parallelism (a
// fixed number of probes at once) and in memory (the served chain kept is
// capped in certificates and bytes), so a hanging or hostile endpoint
// cannot stall the others or grow the guard.
package probe
