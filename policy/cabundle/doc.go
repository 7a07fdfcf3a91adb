// Package cabundle reads caBundles as kube-apiserver does: it parses PEM
// bundles into the SHA-256 fingerprints of the certificates kube-apiserver
// would trust, holds an owner's CA certificates as a CASet, and memoizes
// parsing in a bounded FingerprintCache.
//
// It is pure: no client, no files, no clock.
package cabundle
