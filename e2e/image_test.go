package e2e

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
)

// imageMachines is the ELF machine each platform's binary must be built for.
var imageMachines = map[string]elf.Machine{
	"linux/amd64": elf.EM_X86_64,
	"linux/arm64": elf.EM_AARCH64,
}

// TestImageMatchesChart reads the image `make image` wrote (bin/image/oci)
// and checks it against what the chart expects of it: the chart's default
// image reference is the name the image carries, so importing the archive
// into a node is enough for `helm install` with default values; the image's
// user is the chart's numeric non-root runAsUser:runAsGroup; the chart's
// containers set only args, so the image's entrypoint must be the binary;
// and each platform's binary is a static ELF for that platform that prints
// the VERSION.
func TestImageMatchesChart(t *testing.T) {
	dir := imageLayoutDir(t)
	named, images := readImageLayout(t, dir)
	root := framework.RepoRoot()
	version := strings.TrimSpace(string(mustRead(t, filepath.Join(root, "VERSION"))))
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(mustRead(t, filepath.Join(root, "charts", "webhook-guard", "Chart.yaml")), &chart); err != nil {
		t.Fatal(err)
	}

	// Both shapes, the static one with its sidecar: every container the chart
	// can run from the image.
	var pods []corev1.PodSpec
	for _, rel := range []chartRelease{
		{name: "wg", namespace: "webhook-guard", set: []string{"staticManifestSync.enabled=true"}},
		{name: "wg", namespace: "webhook-guard", set: []string{"shape=policy"}},
	} {
		pods = append(pods, chartPodSpecs(t, chartTemplate(t, rel))...)
	}
	if len(pods) != 2 {
		t.Fatalf("the chart rendered %d workloads for the two shapes, want 2", len(pods))
	}
	wantTag := "v" + chart.AppVersion
	for _, pod := range pods {
		sc := pod.SecurityContext
		if sc == nil || sc.RunAsUser == nil || sc.RunAsGroup == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Fatalf("the chart's podSecurityContext %+v does not set runAsNonRoot, runAsUser and runAsGroup", sc)
		}
		wantUser := fmt.Sprintf("%d:%d", *sc.RunAsUser, *sc.RunAsGroup)
		for _, img := range images {
			if img.config.Config.User != wantUser {
				t.Errorf("%s: image user %q, want the chart's runAsUser:runAsGroup %q", img.platform, img.config.Config.User, wantUser)
			}
		}
		for _, c := range pod.Containers {
			if len(c.Command) != 0 || len(c.Args) == 0 {
				t.Errorf("container %s: command %q args %q; the image's entrypoint is the binary, so the chart must set only args", c.Name, c.Command, c.Args)
			}
			if c.Image != named.Annotations["io.containerd.image.name"] {
				t.Errorf("container %s: image %q, but the image is named %q (make image names it after the chart's default)", c.Name, c.Image, named.Annotations["io.containerd.image.name"])
			}
			if tag := c.Image[strings.LastIndex(c.Image, ":")+1:]; tag != wantTag {
				t.Errorf("container %s: image tag %q, want v+appVersion %q", c.Name, tag, wantTag)
			}
		}
	}
	if got := named.Annotations["org.opencontainers.image.ref.name"]; got != "v"+version {
		t.Errorf("the layout names the image's tag %q, want v%s", got, version)
	}

	var platforms []string
	for _, img := range images {
		platforms = append(platforms, img.platform)
		cfg := img.config
		if cfg.OS+"/"+cfg.Architecture != img.platform {
			t.Errorf("%s: the config says %s/%s", img.platform, cfg.OS, cfg.Architecture)
		}
		uid, _, _ := strings.Cut(cfg.Config.User, ":")
		if n, err := strconv.Atoi(uid); err != nil || n == 0 {
			t.Errorf("%s: user %q is not a numeric non-root uid; kubelet can only verify runAsNonRoot for a numeric user", img.platform, cfg.Config.User)
		}
		if !slices.Equal(cfg.Config.Entrypoint, []string{"/webhook-guard"}) || len(cfg.Config.Cmd) != 0 {
			t.Errorf("%s: entrypoint %q cmd %q, want [/webhook-guard] and no cmd", img.platform, cfg.Config.Entrypoint, cfg.Config.Cmd)
		}
		if got := cfg.Config.Labels["org.opencontainers.image.version"]; got != version {
			t.Errorf("%s: label org.opencontainers.image.version %q, want VERSION %q (run make image again?)", img.platform, got, version)
		}
		hdr, bin := imageFile(t, img, "/webhook-guard")
		if hdr.Mode&0o7777 != 0o555 || hdr.Uid != 0 || hdr.Gid != 0 {
			t.Errorf("%s: /webhook-guard has mode %o owner %d:%d, want 555 0:0 (runnable, not writable, by the non-root user)", img.platform, hdr.Mode, hdr.Uid, hdr.Gid)
		}
		requireStaticELF(t, img.platform, bin)
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("image platforms %v, want %v", platforms, want)
	}

	bin := imageEntrypoint(t, images)
	out, err := exec.CommandContext(t.Context(), bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "webhook-guard "+version; got != want {
		t.Errorf("the image's binary prints %q, want %q", got, want)
	}
}

// TestImageServesWithChartArgs is Test_chartGuardServesWithChartRBAC with
// the binary taken out of the image: the image's entrypoint with the chart's
// args serves behind a real kube-apiserver under the chart's RBAC.
func TestImageServesWithChartArgs(t *testing.T) {
	_, images := readImageLayout(t, imageLayoutDir(t))
	chartGuardServes(t, imageEntrypoint(t, images))
}

// imageEntrypoint extracts the image for this machine's architecture and
// returns its entrypoint as a path on this machine.
func imageEntrypoint(t *testing.T, images []ociImage) string {
	t.Helper()
	want := "linux/" + runtime.GOARCH
	for _, img := range images {
		if img.platform != want {
			continue
		}
		ep := img.config.Config.Entrypoint
		if len(ep) != 1 || !filepath.IsAbs(ep[0]) {
			t.Fatalf("%s: entrypoint %q, want one absolute path", want, ep)
		}
		return filepath.Join(extractRootFS(t, img), filepath.FromSlash(ep[0]))
	}
	t.Fatalf("the image has no %s image to run on this machine", want)
	return ""
}

// requireStaticELF checks that bin is an ELF executable for the platform's
// machine with no dynamic loader (the image has no C library).
func requireStaticELF(t *testing.T, platform string, bin []byte) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Errorf("%s: /webhook-guard is not ELF: %v", platform, err)
		return
	}
	if want := imageMachines[platform]; f.Machine != want {
		t.Errorf("%s: /webhook-guard is built for %s, want %s", platform, f.Machine, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s: /webhook-guard is dynamically linked (PT_INTERP); build it with CGO_ENABLED=0", platform)
		}
	}
}

// chartPodSpecs returns the pod templates of the rendered DaemonSets and
// Deployments.
func chartPodSpecs(t *testing.T, objs []*unstructured.Unstructured) []corev1.PodSpec {
	t.Helper()
	var specs []corev1.PodSpec
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" && o.GetKind() != "Deployment" {
			continue
		}
		raw, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
		b, err := json.Marshal(raw)
		if err != nil {
			t.Fatal(err)
		}
		var spec corev1.PodSpec
		if err := json.Unmarshal(b, &spec); err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
		specs = append(specs, spec)
	}
	return specs
}

func mustRead(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
