package framework

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// ProductValues is what a product's values snippet in
// config/samples/products holds: the part of the chart's config the
// products page tells users to add for that product.
type ProductValues struct {
	Config struct {
		CertManager guardapi.CertManagerSettings `json:"certManager,omitzero"`
		Owners      []guardapi.Owner             `json:"owners"`
	} `json:"config"`
}

// ProductMapping reads config/samples/products/<product>.yaml, the values
// snippet docs/products.md shows for the product, and returns its one owner
// mapping in mode, with the snippet's cert-manager settings applied to cfg.
// A real-writer test builds its GuardConfig from it, so that the page
// cannot drift from what the suite runs.
func ProductMapping(t testing.TB, product string, mode guardapi.Mode, cfg *guardapi.GuardConfig) guardapi.Owner {
	t.Helper()
	path := filepath.Join(RepoRoot(), "config", "samples", "products", product+".yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the %s values snippet: %v", product, err)
	}
	var v ProductValues
	if err := yaml.UnmarshalStrict(data, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(v.Config.Owners) != 1 {
		t.Fatalf("%s: want exactly one owner mapping, found %d", path, len(v.Config.Owners))
	}
	if cm := v.Config.CertManager; cm != (guardapi.CertManagerSettings{}) && cfg != nil {
		cfg.CertManager = cm
	}
	o := v.Config.Owners[0]
	o.Mode = mode
	return o
}
