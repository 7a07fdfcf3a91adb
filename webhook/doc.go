// Package webhook is webhook-guard's admission plumbing: it decodes an
// AdmissionReview into a policy.Input, resolves the owner's CA through a
// CAResolver, asks policy for the decision, and turns it into the
// AdmissionResponse, metrics, logs and records. The server wiring (TLS with
// certificate hot reload, health, metrics, config reload) lives here too.
// No decision is made in this package.
package webhook
