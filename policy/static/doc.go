// Package static generates the static shape: the ValidatingWebhookConfiguration
// kube-apiserver loads from its staticManifestsDir, and the
// AdmissionConfiguration that points the ValidatingAdmissionWebhook plugin
// at that directory. kube-apiserver never calls API-registered webhooks for
// webhook configuration objects, but it does call webhooks it loads from
// files (docs/concepts.md, the two shapes).
//
// The generator is pure: typed inputs in, typed objects or YAML bytes out,
// and an error naming the input field when an input would give a manifest
// kube-apiserver rejects or cannot use. Reading the CA file and the
// GuardConfig, and writing the files, is the caller's:
// `webhook-guard render static-manifest` and `render admission-config` do
// it; the e2e suite and the chart's staticManifestSync sidecar run that
// command.
package static
