// Package webhook is webhook-guard's admission plumbing. Handler is the one
// request path, served over HTTP by `serve` and called directly by `check`:
// it decodes an AdmissionReview in one pass (decode.go) into a policy input,
// resolves the owner's CA through a CAResolver, asks policy for the
// decision, and turns it into the AdmissionResponse, metrics, logs and
// records. The pieces `serve` runs (the TLS server with certificate hot
// reload, metrics, config reload, the CA expiry gauge) live here too; its
// flags and the controller-runtime manager that wires them together live in
// cmd/webhook-guard/serve, so this package can be reused without a command's
// choices. No decision is made in this package.
package webhook
