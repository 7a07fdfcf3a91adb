package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// ChecksumsFile lists "<sha256>  <name>" for every other file, as
// sha256sum -c reads it.
const ChecksumsFile = "SHA256SUMS"

// Checksums hashes every regular file in dir except ChecksumsFile, sorted
// by name.
func Checksums(dir string) ([]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, e := range entries { // ReadDir sorts by name
		if !e.Type().IsRegular() || e.Name() == ChecksumsFile {
			continue
		}
		sum, err := fileSHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, e.Name())
	}
	return []byte(b.String()), nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// pluginArchive is the name of a kubectl plugin archive:
// kubectl-webhook_guard_<os>_<arch>.tar.gz holding kubectl-webhook_guard.
var pluginArchive = regexp.MustCompile(`^kubectl-webhook_guard_([a-z0-9]+)_([a-z0-9]+)\.tar\.gz$`)

// KrewManifest is the krew index manifest (krew.googlecontainertools.github.com/v1alpha2
// Plugin) for the plugin archives in dir, downloaded from the GitHub
// release v<version> of repo.
func KrewManifest(dir, version, repo string) ([]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	}
	type platform struct {
		Selector selector `json:"selector"`
		URI      string   `json:"uri"`
		SHA256   string   `json:"sha256"`
		Bin      string   `json:"bin"`
	}
	var platforms []platform
	for _, e := range entries {
		m := pluginArchive.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		sum, err := fileSHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		platforms = append(platforms, platform{
			Selector: selector{MatchLabels: map[string]string{"os": m[1], "arch": m[2]}},
			URI:      fmt.Sprintf("https://github.com/%s/releases/download/v%s/%s", repo, version, e.Name()),
			SHA256:   sum,
			Bin:      "kubectl-webhook_guard",
		})
	}
	if len(platforms) == 0 {
		return nil, fmt.Errorf("no kubectl-webhook_guard_<os>_<arch>.tar.gz archive in %s", dir)
	}
	manifest := map[string]any{
		"apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
		"kind":       "Plugin",
		"metadata":   map[string]any{"name": "webhook-guard"},
		"spec": map[string]any{
			"version":          "v" + version,
			"homepage":         "https://github.com/" + repo,
			"shortDescription": "Review and test single ownership of webhook configurations",
			"description": "Reads webhook-guard's reports (review), checks the cluster's webhooks (scan),\n" +
				"proposes owner mappings (discover) and runs test suites offline (test).\n",
			"platforms": platforms,
		},
	}
	return yaml.Marshal(manifest)
}

// SBOM is an SPDX 2.3 JSON document of the binary's module graph, as the Go
// linker recorded it (main module and every linked dependency with its
// version and go.sum hash).
func SBOM(binary, version string, created time.Time) ([]byte, error) {
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("read the module graph of %s: %w", binary, err)
	}
	type extRef struct {
		Category string `json:"referenceCategory"`
		Type     string `json:"referenceType"`
		Locator  string `json:"referenceLocator"`
	}
	type pkg struct {
		SPDXID           string   `json:"SPDXID"`
		Name             string   `json:"name"`
		Version          string   `json:"versionInfo"`
		DownloadLocation string   `json:"downloadLocation"`
		FilesAnalyzed    bool     `json:"filesAnalyzed"`
		ExternalRefs     []extRef `json:"externalRefs"`
		Comment          string   `json:"comment,omitempty"`
	}
	type rel struct {
		Element string `json:"spdxElementId"`
		Type    string `json:"relationshipType"`
		Related string `json:"relatedSpdxElement"`
	}
	purl := func(path, v string) extRef {
		return extRef{Category: "PACKAGE-MANAGER", Type: "purl", Locator: "pkg:golang/" + path + "@" + v}
	}
	mainID := "SPDXRef-Package-" + spdxID(info.Main.Path)
	pkgs := []pkg{{SPDXID: mainID, Name: info.Main.Path, Version: "v" + version, DownloadLocation: "NOASSERTION",
		ExternalRefs: []extRef{purl(info.Main.Path, "v"+version)}, Comment: "built with " + info.GoVersion}}
	rels := []rel{{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: mainID}}
	deps := slices.Clone(info.Deps)
	slices.SortFunc(deps, func(a, b *debug.Module) int { return strings.Compare(a.Path, b.Path) })
	for _, d := range deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		id := "SPDXRef-Package-" + spdxID(m.Path+"-"+m.Version)
		p := pkg{SPDXID: id, Name: m.Path, Version: m.Version, DownloadLocation: "NOASSERTION", ExternalRefs: []extRef{purl(m.Path, m.Version)}}
		if m.Sum != "" {
			p.Comment = "go.sum " + m.Sum
		}
		pkgs = append(pkgs, p)
		rels = append(rels, rel{Element: mainID, Type: "DEPENDS_ON", Related: id})
	}
	doc := map[string]any{
		"spdxVersion":       "SPDX-2.3",
		"dataLicense":       "CC0-1.0",
		"SPDXID":            "SPDXRef-DOCUMENT",
		"name":              "webhook-guard-v" + version,
		"documentNamespace": "https://github.com/webhook-guard/webhook-guard/spdx/v" + version,
		"creationInfo":      map[string]any{"created": created.Format(time.RFC3339), "creators": []string{"Tool: webhook-guard hack/release"}},
		"packages":          pkgs,
		"relationships":     rels,
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	return append(b, '\n'), err
}

// spdxID keeps the characters an SPDX identifier allows.
func spdxID(s string) string {
	return regexp.MustCompile(`[^A-Za-z0-9.-]`).ReplaceAllString(s, "-")
}
