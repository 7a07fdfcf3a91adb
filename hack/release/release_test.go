package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	return dir
}

func Test_Checksums(t *testing.T) {
	t.Run("if the directory holds artifacts and an old SHA256SUMS, list every artifact sorted and skip the old list", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{"b.tgz": "b", "a": "", ChecksumsFile: "stale"})
		got, err := Checksums(dir)
		require.NoError(t, err)
		assert.Equal(t, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  a\n"+
			"3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d  b.tgz\n", string(got))
	})
}

func Test_KrewManifest(t *testing.T) {
	t.Run("if plugin archives are present, give each platform its selector, download URI and sha256", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{
			"kubectl-webhook_guard_darwin_arm64.tar.gz": "d",
			"kubectl-webhook_guard_linux_amd64.tar.gz":  "l",
			"webhook-guard_linux_amd64":                 "not an archive",
		})
		got, err := KrewManifest(dir, "1.2.3", "o/r")
		require.NoError(t, err)
		var m struct {
			Kind string `json:"kind"`
			Spec struct {
				Version   string `json:"version"`
				Platforms []struct {
					Selector struct {
						MatchLabels map[string]string `json:"matchLabels"`
					} `json:"selector"`
					URI, SHA256, Bin string
				} `json:"platforms"`
			} `json:"spec"`
		}
		require.NoError(t, yaml.Unmarshal(got, &m))
		assert.Equal(t, "Plugin", m.Kind)
		assert.Equal(t, "v1.2.3", m.Spec.Version)
		require.Len(t, m.Spec.Platforms, 2)
		p := m.Spec.Platforms[1]
		assert.Equal(t, map[string]string{"os": "linux", "arch": "amd64"}, p.Selector.MatchLabels)
		assert.Equal(t, "https://github.com/o/r/releases/download/v1.2.3/kubectl-webhook_guard_linux_amd64.tar.gz", p.URI)
		assert.Equal(t, "acac86c0e609ca906f632b0e2dacccb2b77d22b0621f20ebece1a4835b93f6f0", p.SHA256) // sha256("l")
		assert.Equal(t, "kubectl-webhook_guard", p.Bin)
	})
	t.Run("if there is no plugin archive, refuse", func(t *testing.T) {
		_, err := KrewManifest(t.TempDir(), "1.2.3", "o/r")
		assert.ErrorContains(t, err, "no kubectl-webhook_guard_<os>_<arch>.tar.gz archive")
	})
}

func Test_SBOM(t *testing.T) {
	t.Run("if given a Go binary, list its main module and every linked module, the same bytes twice", func(t *testing.T) {
		self, err := os.Executable() // this test binary: a Go binary with a module graph
		require.NoError(t, err)
		created := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		got, err := SBOM(self, "1.2.3", created)
		require.NoError(t, err)
		again, err := SBOM(self, "1.2.3", created)
		require.NoError(t, err)
		assert.Equal(t, string(got), string(again))

		var doc struct {
			SPDXVersion  string `json:"spdxVersion"`
			CreationInfo struct {
				Created string `json:"created"`
			} `json:"creationInfo"`
			Packages []struct {
				Name         string `json:"name"`
				ExternalRefs []struct {
					Locator string `json:"referenceLocator"`
				} `json:"externalRefs"`
			} `json:"packages"`
		}
		require.NoError(t, json.Unmarshal(got, &doc))
		assert.Equal(t, "SPDX-2.3", doc.SPDXVersion)
		assert.Equal(t, "2026-12-01T00:00:00Z", doc.CreationInfo.Created)
		var names []string
		for _, p := range doc.Packages {
			names = append(names, p.Name)
		}
		assert.Contains(t, names, "sigs.k8s.io/yaml")
		assert.True(t, strings.HasPrefix(doc.Packages[0].ExternalRefs[0].Locator, "pkg:golang/"), doc.Packages[0].ExternalRefs[0].Locator)
	})
}
