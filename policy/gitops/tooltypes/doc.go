// Package tooltypes holds no code: its test decodes what `webhook-guard
// render gitops` prints (the goldens of cmd/webhook-guard/render) with Argo
// CD's and Flux's own API types, strictly, so that a field the tools do not
// know, or a value of the wrong shape, fails here rather than in a user's
// cluster. It is a module of its own because Argo CD's module pins the
// k8s.io modules to its own versions; it imports nothing of webhook-guard.
package tooltypes
