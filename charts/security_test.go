package charts

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Test_podsAreRestricted: in every value set, every container of every
// workload runs as non-root with a read-only root filesystem, no privilege
// escalation, no capabilities and the RuntimeDefault seccomp profile (Pod
// Security "restricted"). The guard writes nothing to disk: its config and
// certificates are read-only mounts, and the static-manifest sidecar writes
// only to its hostPath output directory.
func Test_podsAreRestricted(t *testing.T) {
	for _, name := range sortedKeys(valueSets) {
		t.Run(name, func(t *testing.T) {
			out, err := helm(t, templateArgs(chartDir, valueSets[name])...)
			if err != nil {
				t.Fatal(err)
			}
			workloads := 0
			for doc := range strings.SplitSeq(out, "\n---\n") {
				var w struct {
					Kind     string `json:"kind"`
					Metadata struct {
						Name string `json:"name"`
					} `json:"metadata"`
					Spec struct {
						Template struct {
							Spec corev1.PodSpec `json:"spec"`
						} `json:"template"`
					} `json:"spec"`
				}
				if err := yaml.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(doc), "---")), &w); err != nil {
					t.Fatal(err)
				}
				if w.Kind != "DaemonSet" && w.Kind != "Deployment" {
					continue
				}
				workloads++
				pod := w.Spec.Template.Spec
				psc := pod.SecurityContext
				if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
					t.Errorf("%s %s: the pod must set runAsNonRoot and a non-zero runAsUser: %+v", w.Kind, w.Metadata.Name, psc)
				}
				if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
					t.Errorf("%s %s: the pod must use the RuntimeDefault seccomp profile", w.Kind, w.Metadata.Name)
				}
				for _, c := range append(pod.InitContainers, pod.Containers...) {
					sc := c.SecurityContext
					switch {
					case sc == nil:
						t.Errorf("%s %s: container %s has no securityContext", w.Kind, w.Metadata.Name, c.Name)
					case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
						t.Errorf("%s %s: container %s must have a read-only root filesystem", w.Kind, w.Metadata.Name, c.Name)
					case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
						t.Errorf("%s %s: container %s must set allowPrivilegeEscalation: false", w.Kind, w.Metadata.Name, c.Name)
					case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) > 0:
						t.Errorf("%s %s: container %s must drop ALL capabilities and add none", w.Kind, w.Metadata.Name, c.Name)
					case sc.Privileged != nil && *sc.Privileged:
						t.Errorf("%s %s: container %s is privileged", w.Kind, w.Metadata.Name, c.Name)
					}
				}
			}
			if workloads == 0 {
				t.Fatal("no Deployment or DaemonSet rendered")
			}
		})
	}
}
