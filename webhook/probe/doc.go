// Package probe checks, from the guard, each trust path kube-apiserver
// relies on: it dials the endpoint kube-apiserver would call for a guarded
// webhook entry, a CustomResourceDefinition's conversion webhook or an
// APIService, completes a TLS handshake without sending a request, and
// verifies the served chain against the stored caBundle for the server name
// kube-apiserver uses. A caBundle that does not verify what the endpoint
// serves fails every call kube-apiserver makes; kube-apiserver reports it
// only after the fact, in its own metrics and log.
//
// A Service is dialled at the endpoints the endpointslice controller lists
// for its ready pods (IPv4 and IPv6 addresses only), never at an address a
// hand-made EndpointSlice names, and admission refuses a caBundle for the
// served chain only when it verifies what no endpoint served, so that an
// endpoint a non-writer gets in cannot block the owner's writes.
//
// A probe is bounded in time (a deadline per endpoint), in parallelism (a
// fixed number of lookups and dials at once), in dials (one per address
// and server name per round, whatever number of entries call it) and in
// memory (a chain is kept once per round, capped in certificates and
// bytes, within a byte budget per round; errors are kept as bounded text),
// so a hanging or hostile endpoint cannot stall the others or grow the
// guard.
package probe
