package static

// Names in the generated manifest. kube-apiserver loads a configuration from
// a file only if its name ends in .static.k8s.io, a suffix the REST API
// refuses, so nothing written through the API can replace it. The entries'
// names prefix the guard's audit annotations, which is how `review
// --audit-log` tells an enforced decision from a break-glass one.
const (
	// ConfigName is the static ValidatingWebhookConfiguration's name.
	ConfigName = "webhook-guard.static.k8s.io"
	// WebhookName is the enforcing entry: every write of a webhook
	// configuration except break-glass subjects'.
	WebhookName = "guard.webhook-guard.io"
	// BreakGlassWebhookName receives only break-glass subjects' writes,
	// with failurePolicy Ignore.
	BreakGlassWebhookName = "break-glass.webhook-guard.io"
	// PolicyObjectsWebhookName receives writes of the policy shape's generated
	// ValidatingAdmissionPolicies and bindings by anyone but the guard and
	// break-glass (Input.GuardServiceAccount).
	PolicyObjectsWebhookName = "policy-objects.webhook-guard.io"
)
