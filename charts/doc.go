// Package charts holds the webhook-guard Helm chart (charts/webhook-guard) and
// its tests. The tests run the helm binary built from the Go module proxy by
// hack/build-helm.sh (bin/helm): `helm lint --strict`, golden `helm template`
// outputs (regenerate with `go test ./charts/ -update`), the values schema's
// rejections, and the values -> ConfigMap -> policy.Load round trip.
package charts
