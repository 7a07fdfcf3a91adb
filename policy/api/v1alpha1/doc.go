// Package v1alpha1 is the GuardConfig API, webhook-guard.io/v1alpha1: the
// owner-mapping file's types, their defaults (SetDefaults), their
// validation (Validate) and its strict decoding (Decode), and the kinds of
// CA source an owner mapping can name.
//
// It is pure: no client, no files, no clock. The decision that applies a
// GuardConfig is package policy; importers name this package guardapi.
package v1alpha1
