// Package casource resolves an owner mapping's CA source (Secret, ConfigMap,
// cert-manager Certificate or Issuer, the configuration's own cainjector
// annotation, inline PEM) into a cabundle.CASet.
//
// Objects are read by name through a controller-runtime client.Reader: for
// admissions a WatchReader, which watches each source object by name (field
// selector metadata.name), so the guard's RBAC can still name exactly the
// objects it may read (resourceNames) and an admission costs no API call.
// A second look is available for the moment before a ca-mismatch denial,
// and a last good result keeps serving for a bounded time while the API
// server is unreachable.
package casource
