package recipetest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	webhookadmissionv1 "k8s.io/apiserver/pkg/admission/plugin/webhook/config/apis/webhookadmission/v1"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	kubeadmv1beta4 "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/v1beta4"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
)

// These tests are structural: kind, Docker and machines for kubeadm or
// Cluster API are not available where they run. They decode each recipe
// strictly with the tool's own config types (an unknown or misspelled field
// fails) and check that the kube-apiserver flag, the volume that carries the
// directory into the kube-apiserver static pod, and the files on the node
// agree with what `webhook-guard render admission-config` writes and with
// where the chart's staticManifestSync sidecar writes the static manifest.

const flagName = "admission-control-config-file"

// apiServerWiring is the part of a kubeadm ClusterConfiguration every
// recipe must get right, in one shape for kubeadm's and Cluster API's types.
type apiServerWiring struct {
	args    map[string][]string
	volumes []volume
}

type volume struct {
	name, hostPath, mountPath, pathType string
	readOnly                            bool
}

// rendered is what `webhook-guard render admission-config` prints, and the
// staticManifestsDir in it, read with kube-apiserver's own types. The
// command runs from the repository's own module (go run), so this module
// does not depend on the product's and its dependencies.
func rendered(t *testing.T) (out []byte, staticManifestsDir string) {
	t.Helper()
	out, err := renderAdmissionConfig()
	require.NoError(t, err)
	var cfg apiserverv1.AdmissionConfiguration
	require.NoError(t, yaml.UnmarshalStrict(out, &cfg))
	require.Len(t, cfg.Plugins, 1)
	require.Equal(t, "ValidatingAdmissionWebhook", cfg.Plugins[0].Name)
	var wh webhookadmissionv1.WebhookAdmission
	require.NoError(t, yaml.UnmarshalStrict(cfg.Plugins[0].Configuration.Raw, &wh))
	return out, wh.StaticManifestsDir
}

// renderAdmissionConfig runs the command once for all tests.
var renderAdmissionConfig = sync.OnceValues(func() ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("go", "run", "./cmd/webhook-guard", "render", "admission-config")
	cmd.Dir = filepath.Join("..", "..", "..")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("webhook-guard render admission-config: %w\n%s", err, stderr.String())
	}
	return stdout.Bytes(), nil
})

// chartHostPath is staticManifestSync.hostPath in the chart's values.
func chartHostPath(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../../charts/webhook-guard/values.yaml")
	require.NoError(t, err)
	var values struct {
		StaticManifestSync struct {
			HostPath string `json:"hostPath"`
		} `json:"staticManifestSync"`
	}
	require.NoError(t, yaml.Unmarshal(data, &values))
	return values.StaticManifestSync.HostPath
}

func within(dir, p string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// checkWiring checks the flag and the volume; it returns the directory on
// the node that the recipe must provide.
func checkWiring(t *testing.T, w apiServerWiring) string {
	t.Helper()
	out, staticDir := rendered(t)
	require.NotEmpty(t, out)
	hostPath := chartHostPath(t)

	require.Len(t, w.args[flagName], 1, "exactly one --%s", flagName)
	file := w.args[flagName][0]
	assert.Equal(t, path.Join(hostPath, "admission-configuration.yaml"), file,
		"the file staticManifestSync keeps current is the one kube-apiserver reads")
	assert.Equal(t, path.Join(hostPath, "static"), staticDir,
		"render admission-config points where staticManifestSync writes the manifest")

	var mounted []volume
	for _, v := range w.volumes {
		if within(v.mountPath, file) {
			mounted = append(mounted, v)
		}
	}
	require.Len(t, mounted, 1, "one extraVolume carries %s into the kube-apiserver pod", file)
	v := mounted[0]
	assert.True(t, within(v.mountPath, staticDir), "the same volume carries the staticManifestsDir %s", staticDir)
	assert.Equal(t, v.mountPath, v.hostPath, "paths in the pod are the node's paths, which render and the sidecar use")
	assert.Equal(t, hostPath, v.hostPath)
	assert.True(t, v.readOnly, "kube-apiserver only reads the directory")
	assert.Equal(t, "Directory", v.pathType, "a missing directory fails the pod instead of kubelet creating a root-owned one")
	return v.hostPath
}

func kubeadmWiring(api kubeadmv1beta4.APIServer) apiServerWiring {
	w := apiServerWiring{args: map[string][]string{}}
	for _, a := range api.ExtraArgs {
		w.args[a.Name] = append(w.args[a.Name], a.Value)
	}
	for _, v := range api.ExtraVolumes {
		w.volumes = append(w.volumes, volume{name: v.Name, hostPath: v.HostPath, mountPath: v.MountPath, pathType: string(v.PathType), readOnly: v.ReadOnly})
	}
	return w
}

func decodeStrict(t *testing.T, data []byte, into any) {
	t.Helper()
	require.NoError(t, yaml.UnmarshalStrict(data, into))
}

func readRecipe(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", name))
	require.NoError(t, err)
	return data
}

func TestKind(t *testing.T) {
	var cluster kindv1alpha4.Cluster
	decodeStrict(t, readRecipe(t, "kind.yaml"), &cluster)
	assert.Equal(t, "Cluster", cluster.Kind)
	assert.Equal(t, "kind.x-k8s.io/v1alpha4", cluster.APIVersion)

	var controlPlanes []kindv1alpha4.Node
	for _, n := range cluster.Nodes {
		if n.Role == kindv1alpha4.ControlPlaneRole {
			controlPlanes = append(controlPlanes, n)
		}
	}
	require.NotEmpty(t, controlPlanes)
	for _, n := range controlPlanes {
		var configs []kubeadmv1beta4.ClusterConfiguration
		for _, p := range append(cluster.KubeadmConfigPatches, n.KubeadmConfigPatches...) {
			var meta struct {
				Kind       string `json:"kind"`
				APIVersion string `json:"apiVersion"`
			}
			require.NoError(t, yaml.Unmarshal([]byte(p), &meta))
			if meta.Kind != "ClusterConfiguration" {
				continue
			}
			require.Equal(t, kubeadmv1beta4.SchemeGroupVersion.String(), meta.APIVersion)
			var cc kubeadmv1beta4.ClusterConfiguration
			decodeStrict(t, []byte(p), &cc)
			configs = append(configs, cc)
		}
		require.Len(t, configs, 1, "one ClusterConfiguration patch")
		dir := checkWiring(t, kubeadmWiring(configs[0].APIServer))

		var mounts []kindv1alpha4.Mount
		for _, m := range n.ExtraMounts {
			if m.ContainerPath == dir {
				mounts = append(mounts, m)
			}
		}
		require.Len(t, mounts, 1, "one extraMount puts a host directory at %s on the node", dir)
		assert.False(t, mounts[0].Readonly, "the staticManifestSync sidecar writes into it on the node")
		assert.True(t, filepath.IsAbs(mounts[0].HostPath), "kind needs an absolute host path here, got %q", mounts[0].HostPath)
	}
}

func TestKubeadm(t *testing.T) {
	var cc kubeadmv1beta4.ClusterConfiguration
	decodeStrict(t, readRecipe(t, "kubeadm-clusterconfiguration.yaml"), &cc)
	assert.Equal(t, "ClusterConfiguration", cc.Kind)
	assert.Equal(t, kubeadmv1beta4.SchemeGroupVersion.String(), cc.APIVersion)
	checkWiring(t, kubeadmWiring(cc.APIServer))
}

func TestClusterAPI(t *testing.T) {
	var kcp controlplanev1.KubeadmControlPlane
	decodeStrict(t, readRecipe(t, "cluster-api-kubeadmcontrolplane.yaml"), &kcp)
	assert.Equal(t, "KubeadmControlPlane", kcp.Kind)
	assert.Equal(t, controlplanev1.GroupVersion.String(), kcp.APIVersion)

	spec := kcp.Spec.KubeadmConfigSpec
	api := spec.ClusterConfiguration.APIServer
	w := apiServerWiring{args: map[string][]string{}}
	for _, a := range api.ExtraArgs {
		w.args[a.Name] = append(w.args[a.Name], ptrValue(a.Value))
	}
	for _, v := range api.ExtraVolumes {
		w.volumes = append(w.volumes, volume{name: v.Name, hostPath: v.HostPath, mountPath: v.MountPath, pathType: string(v.PathType), readOnly: ptrValue(v.ReadOnly)})
	}
	dir := checkWiring(t, w)

	out, staticDir := rendered(t)
	var files []bootstrapv1.File
	for _, f := range spec.Files {
		if f.Path == w.args[flagName][0] {
			files = append(files, f)
		}
	}
	require.Len(t, files, 1, "the machine gets the admission configuration as a file")
	assert.Equal(t, string(out), files[0].Content, "the file is exactly what render admission-config prints")
	assert.Equal(t, "install -d -o 65532 -g 65532 -m 0755 "+dir+" "+staticDir, strings.Join(spec.PreKubeadmCommands, "\n"),
		"both directories exist before kube-apiserver starts, writable by the sidecar's UID")
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
