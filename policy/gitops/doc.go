// Package gitops generates the ignore rules that keep a GitOps tool from
// fighting the controllers that write a webhook configuration's caBundle.
// Argo CD, Flux and Helm's server-side apply compare what they applied with
// the cluster and write their own value back; a caBundle that cert-manager's
// cainjector, or the owner's own controller, writes at run time is then
// reverted on every sync, rewritten by its writer, and reverted again.
//
// The GuardConfig already says which configurations' caBundles another
// writer injects (see Owned), so the rules are derived from it rather than
// written by hand: Argo CD's ignoreDifferences entries (Application spec)
// and Flux's ignore rules (Kustomization spec.ignore).
//
// The generator is pure: a GuardConfig in, typed rules and YAML out.
// Reading the GuardConfig and printing is `webhook-guard render gitops`'s.
package gitops
