package tooltypes

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	argocd "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	fluxks "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// goldens is where `render gitops`'s golden files are.
const goldens = "../../../cmd/webhook-guard/render/testdata/render-gitops"

const (
	group      = "admissionregistration.k8s.io"
	syncOption = "RespectIgnoreDifferences=true"
)

var (
	// header is the first line of every output: the tool it is for.
	header = regexp.MustCompile(`^# webhook-guard gitops rules for (argocd|flux), generated from `)
	// named is the comment naming a configuration and its writer.
	named = regexp.MustCompile(`(?m)^# (ValidatingWebhookConfiguration|MutatingWebhookConfiguration) ([^ ]+): caBundle written by `)
	// pointer is the caBundle of one entry.
	pointer = regexp.MustCompile(`^/webhooks/[0-9]+/clientConfig/caBundle$`)
)

// output is one golden file: the tool, whether it is a whole object, the
// configurations its comments name (kind/name), and its bytes.
type output struct {
	tool   string
	object bool
	names  map[string]bool
	data   []byte
}

func readGoldens(t *testing.T) map[string]output {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(goldens, "*.golden"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no goldens in %s", goldens)
	out := map[string]output{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		m := header.FindSubmatch(data)
		require.NotNil(t, m, "%s: no header line", f)
		o := output{tool: string(m[1]), object: strings.Contains(string(data), "\nkind: "), names: map[string]bool{}, data: data}
		for _, n := range named.FindAllSubmatch(data, -1) {
			o.names[string(n[1])+"/"+string(n[2])] = true
		}
		out[filepath.Base(f)] = o
	}
	return out
}

// Test_argoCD decodes the Argo CD outputs as an Application or its spec,
// strictly, and checks each entry names a configuration the comments name,
// in the webhook configurations' group, with the caBundle of every entry.
func Test_argoCD(t *testing.T) {
	forTool(t, "argocd", func(t *testing.T, o output) {
		var spec argocd.ApplicationSpec
		if o.object {
			var app argocd.Application
			require.NoError(t, yaml.UnmarshalStrict(o.data, &app))
			assert.Equal(t, "Application", app.Kind)
			assert.Equal(t, "argoproj.io/v1alpha1", app.APIVersion)
			require.NotNil(t, app.Spec.SyncPolicy)
			assert.True(t, app.Spec.SyncPolicy.SyncOptions.HasOption(syncOption))
			spec = app.Spec
		} else {
			require.NoError(t, yaml.UnmarshalStrict(o.data, &spec))
		}
		for _, d := range spec.IgnoreDifferences {
			assert.Equal(t, group, d.Group)
			assert.True(t, o.names[d.Kind+"/"+d.Name], "%s/%s is not named in the comments", d.Kind, d.Name)
			assert.Equal(t, []string{".webhooks[]?.clientConfig.caBundle"}, d.JQPathExpressions)
			assert.Empty(t, d.JSONPointers)
		}
		assert.Len(t, spec.IgnoreDifferences, len(o.names))
	})
}

// Test_flux decodes the Flux outputs as a Kustomization or its spec,
// strictly, and checks each rule's target selects what the comments name:
// its anchored regular expressions match the group and the name, and its
// label selector parses.
func Test_flux(t *testing.T) {
	forTool(t, "flux", func(t *testing.T, o output) {
		var spec fluxks.KustomizationSpec
		if o.object {
			var ks fluxks.Kustomization
			require.NoError(t, yaml.UnmarshalStrict(o.data, &ks))
			assert.Equal(t, "Kustomization", ks.Kind)
			assert.Equal(t, fluxks.GroupVersion.String(), ks.APIVersion)
			spec = ks.Spec
		} else {
			require.NoError(t, yaml.UnmarshalStrict(o.data, &spec))
		}
		require.NotEmpty(t, spec.Ignore)
		for _, r := range spec.Ignore {
			require.NotNil(t, r.Target)
			assert.True(t, anchored(t, r.Target.Group, group))
			assert.False(t, anchored(t, r.Target.Group, "admissionregistrationxk8s.io"), "the group's dots are quoted")
			assert.True(t, anchored(t, r.Target.Version, "v1"))
			for _, p := range r.Paths {
				assert.Regexp(t, pointer, p)
			}
			if r.Target.LabelSelector != "" {
				_, err := labels.Parse(r.Target.LabelSelector)
				require.NoError(t, err)
				continue
			}
			matched := 0
			for n := range o.names {
				kind, cfg, _ := strings.Cut(n, "/")
				if kind == r.Target.Kind && anchored(t, r.Target.Name, cfg) {
					matched++
				}
			}
			assert.Equal(t, 1, matched, "target %+v selects exactly one named configuration", r.Target)
		}
	})
}

// forTool runs test on every golden of tool, one subtest each, and fails
// when there is none.
func forTool(t *testing.T, tool string, test func(*testing.T, output)) {
	t.Helper()
	seen := 0
	for name, o := range readGoldens(t) {
		if o.tool == tool {
			seen++
			t.Run(name, func(t *testing.T) { test(t, o) })
		}
	}
	assert.NotZero(t, seen, "no golden for %s", tool)
}

// anchored matches s as Flux matches a target's fields: the whole string.
func anchored(t *testing.T, pattern, s string) bool {
	t.Helper()
	re, err := regexp.Compile("^(?:" + pattern + ")$")
	require.NoError(t, err)
	return re.MatchString(s)
}
