// Package charts holds the webhook-guard Helm chart (charts/webhook-guard) and
// its tests. The tests run the helm binary built from the Go module proxy by
// hack/build-helm.sh (bin/helm): `helm lint --strict`, golden `helm template`
// outputs (regenerate with `make update-golden`), the values schema's
// rejections, and the values -> ConfigMap -> policy.Load round trip. The
// package is its own module, so that `go test ./...` at the root runs without
// bin/; `make test` and `make test-charts` run it.
package charts
