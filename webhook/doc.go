// Package webhook is webhook-guard's admission plumbing. Handler is the one
// request path, served over HTTP by `serve` and called directly by `check`:
// it decodes an AdmissionReview in one pass (decode.go) into a policy input,
// resolves the owner's CA through a CAResolver, asks policy for the
// decision, and turns it into the AdmissionResponse, metrics, logs and
// records. The server wiring (TLS with
// certificate hot reload, health, metrics, config reload) lives here too.
// No decision is made in this package.
package webhook
