package charts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Test_existingConfigMap: with config.existingConfigMap the chart renders no
// ConfigMap of its own and both containers mount the user's.
func Test_existingConfigMap(t *testing.T) {
	values := writeValues(t, "config:\n  existingConfigMap: gitops-guard-config\nstaticManifestSync: {enabled: true}\n")
	var configMaps, mounted []string
	for _, o := range renderObjects(t, values) {
		if o.Kind == "ConfigMap" {
			configMaps = append(configMaps, o.Metadata.Name)
		}
	}
	out, err := helm(t, templateArgs(chartDir, values, "--show-only", "templates/daemonset.yaml")...)
	require.NoError(t, err)
	for line := range strings.SplitSeq(out, "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "name: gitops-guard-config"); ok && name == "" {
			mounted = append(mounted, line)
		}
	}
	assert.Empty(t, configMaps)
	assert.Len(t, mounted, 1, "the pods' config volume names the existing ConfigMap:\n%s", out)
	notes := renderNotes(t, values)
	assert.Contains(t, notes, "The GuardConfig is read from your ConfigMap gitops-guard-config (key guard.yaml)")
	assert.NotContains(t, notes, "config.owners is empty")
}

// Test_openReportsCRDsAreTheModules: the CRDs the chart installs are
// byte-for-byte those of the github.com/openreports/reports-api version in
// go.mod, the types the guard writes its ClusterReports with.
func Test_openReportsCRDsAreTheModules(t *testing.T) {
	dir, err := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Dir}}", "github.com/openreports/reports-api").Output()
	require.NoError(t, err)
	upstream, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(dir)), "config", "crd", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, upstream)
	shipped, err := filepath.Glob(filepath.Join(chartDir, "files", "openreports", "*.yaml"))
	require.NoError(t, err)
	require.Len(t, shipped, len(upstream))
	for _, u := range upstream {
		want, err := os.ReadFile(u)
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(chartDir, "files", "openreports", filepath.Base(u)))
		require.NoError(t, err, "copy %s into charts/webhook-guard/files/openreports/", u)
		assert.Equal(t, string(want), string(got), "%s differs from the module's; copy it again", filepath.Base(u))
	}

	var crds []string
	for _, o := range renderObjects(t, "", "--set", "openReports.installCRDs=true") {
		if o.Kind == "CustomResourceDefinition" {
			crds = append(crds, o.Metadata.Name)
		}
	}
	assert.ElementsMatch(t, []string{"clusterreports.openreports.io", "reports.openreports.io"}, crds)
	for _, o := range renderObjects(t, "") {
		assert.NotEqual(t, "CustomResourceDefinition", o.Kind, "no CRDs unless openReports.installCRDs")
	}
}

// Test_notesPointAtReview: the static shape's NOTES send the user to
// `webhook-guard review`; the policy shape's, where the guard sees no
// request, to review with kube-apiserver's audit log, and neither greps logs.
func Test_notesPointAtReview(t *testing.T) {
	static := renderNotes(t, "")
	assert.Contains(t, static, "webhook-guard review ")
	assert.NotContains(t, static, "--audit-log")
	assert.Contains(t, static, "priorityClassName is \"not set\"")
	policy := renderNotes(t, "", "--set", "shape=policy")
	assert.Contains(t, policy, "webhook-guard review --audit-log ")
	assert.Contains(t, policy, "webhook-guard scan")
	for _, notes := range []string{static, policy} {
		assert.NotContains(t, notes, "grep")
	}
}
