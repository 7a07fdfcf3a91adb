// Package discover turns what a cluster holds about its webhook
// configurations (the evidence, gathered read-only by the command line) into
// a proposal of owner mappings and into health findings. It does no I/O, so
// every inference is table-tested without a cluster.
//
// The evidence chain for an owner is: a webhook's clientConfig.service →
// the Service's selector → the Deployment, StatefulSet or DaemonSet whose pod
// template it selects → that template's serviceAccountName (the writer) and
// the Secrets and ConfigMaps it mounts (the CA candidates, matched to the
// caBundle by certificate fingerprint). A cert-manager.io/inject-ca-from(-secret)
// annotation decides the CA source on its own. Whatever the chain cannot
// settle is reported as undecided, with the reason, and never guessed.
package discover
