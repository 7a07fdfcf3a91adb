package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// snippetMarker names, on the line before a fenced block of the products
// page, the file whose text the block shows.
var snippetMarker = regexp.MustCompile(`^<!-- snippet: (\S+) -->$`)

// productValues is the part of the chart's values a product snippet holds.
type productValues struct {
	Config struct {
		CertManager guardapi.CertManagerSettings `json:"certManager,omitzero"`
		Owners      []guardapi.Owner             `json:"owners"`
	} `json:"config"`
}

// pageSnippets returns, for each snippet marker of a Markdown page, the
// text of the fenced block that follows it.
func pageSnippets(t *testing.T, page string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, page))
	require.NoError(t, err)
	out := map[string]string{}
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		m := snippetMarker.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		require.Less(t, i+1, len(lines), "%s: a snippet marker ends the page", page)
		require.True(t, strings.HasPrefix(lines[i+1], "```yaml"), "%s:%d: the snippet marker for %s must be followed by a ```yaml block", page, i+1, m[1])
		var body []string
		j := i + 2
		for ; j < len(lines) && !fence.MatchString(lines[j]); j++ {
			body = append(body, lines[j])
		}
		require.Less(t, j, len(lines), "%s:%d: the block for %s is never closed", page, i+2, m[1])
		_, dup := out[m[1]]
		require.False(t, dup, "%s: %s is shown twice", page, m[1])
		out[m[1]] = strings.Join(body, "\n") + "\n"
		i = j
	}
	return out
}

// Test_productSnippets: the products page shows each file of
// config/samples/products exactly, each holds one owner mapping that loads
// as a GuardConfig, and the Koordinator one is the mapping the chart's e2e
// tests install.
func Test_productSnippets(t *testing.T) {
	shown := pageSnippets(t, "docs/products.md")
	files, err := filepath.Glob(filepath.Join(root, "config", "samples", "products", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	owners := map[string]guardapi.Owner{}
	for _, f := range files {
		rel := filepath.ToSlash(strings.TrimPrefix(f, root+string(filepath.Separator)))
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		text, ok := shown[rel]
		if assert.True(t, ok, "docs/products.md does not show %s: add it after a <!-- snippet: %s --> line", rel, rel) {
			assert.Equal(t, string(data), text, "docs/products.md shows %s differently from the file", rel)
		}
		delete(shown, rel)

		var v productValues
		require.NoError(t, yaml.UnmarshalStrict(data, &v), rel)
		require.Len(t, v.Config.Owners, 1, "%s: one owner mapping per product", rel)
		cfg := guardapi.GuardConfig{Owners: v.Config.Owners, CertManager: v.Config.CertManager}
		cfg.APIVersion, cfg.Kind = guardapi.APIVersion, guardapi.Kind
		raw, err := yaml.Marshal(cfg)
		require.NoError(t, err)
		_, err = policy.Load(raw)
		require.NoError(t, err, "%s does not load as a GuardConfig", rel)
		owners[filepath.Base(rel)] = v.Config.Owners[0]
	}
	assert.Empty(t, shown, "docs/products.md shows snippets with no file in config/samples/products")

	// The Koordinator snippet is what the chart's e2e tests install.
	var chart productValues
	data, err := os.ReadFile(filepath.Join(root, "config", "samples", "values-koordinator.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &chart))
	require.Len(t, chart.Config.Owners, 1)
	installed := chart.Config.Owners[0]
	installed.Mode = ""
	assert.Equal(t, installed, owners["koordinator.yaml"], "config/samples/products/koordinator.yaml differs from the mapping of config/samples/values-koordinator.yaml")
}
