//go:build tools

// Package tools pins the helm CLI for hack/build-helm.sh. It is a module of its
// own so that helm's large dependency graph never enters the product's go.mod.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
