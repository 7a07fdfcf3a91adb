// Package casource resolves an owner mapping's CA source (Secret, ConfigMap,
// cert-manager Certificate or Issuer, the configuration's own cainjector
// annotation, inline PEM) into a policy.CASet.
//
// Reads are single GETs through a controller-runtime client.Reader, never
// list/watch, so the guard's RBAC can name exactly the objects it may read
// (resourceNames). Results are cached for a short TTL; a live re-read is
// available for the moment before a ca-mismatch denial, and a cached result
// keeps serving for a bounded time while the API server is unreachable.
package casource
