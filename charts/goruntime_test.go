package charts

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// Test_goRuntimeEnv: the guard container gets GOGC from goRuntime.gogc and
// GOMEMLIMIT from its own memory limit, and neither when they do not apply.
func Test_goRuntimeEnv(t *testing.T) {
	tests := map[string]struct {
		set        []string
		gogc       string // "" when GOGC must be absent
		memoryFrom bool
	}{
		"if nothing is set, GOGC is 200 and GOMEMLIMIT follows the memory limit": {
			gogc: "200", memoryFrom: true,
		},
		"if gogc is given as a number, it is passed as a string": {
			set: []string{"goRuntime.gogc=300"}, gogc: "300", memoryFrom: true,
		},
		"if gogc is empty, Go's default applies (no GOGC)": {
			set: []string{"goRuntime.gogc="}, memoryFrom: true,
		},
		"if the container has no memory limit, there is no GOMEMLIMIT": {
			set: []string{"resources.limits=null"}, gogc: "200",
		},
		"if memoryLimitFromResources is off, there is no GOMEMLIMIT": {
			set: []string{"goRuntime.memoryLimitFromResources=false"}, gogc: "200",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var extra []string
			for _, s := range test.set {
				extra = append(extra, "--set", s)
			}
			out, err := helm(t, templateArgs(chartDir, "", append(extra, "--show-only", "templates/daemonset.yaml")...)...)
			if err != nil {
				t.Fatal(err)
			}
			var ds struct {
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct {
								Name string `json:"name"`
								Env  []struct {
									Name      string `json:"name"`
									Value     string `json:"value"`
									ValueFrom *struct {
										ResourceFieldRef *struct {
											ContainerName string `json:"containerName"`
											Resource      string `json:"resource"`
										} `json:"resourceFieldRef"`
									} `json:"valueFrom"`
								} `json:"env"`
							} `json:"containers"`
						} `json:"spec"`
					} `json:"template"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(out), "---")), &ds); err != nil {
				t.Fatal(err)
			}
			var gogc string
			var memoryFrom bool
			for _, c := range ds.Spec.Template.Spec.Containers {
				if c.Name != "webhook-guard" {
					continue
				}
				for _, e := range c.Env {
					switch e.Name {
					case "GOGC":
						gogc = e.Value
					case "GOMEMLIMIT":
						ref := e.ValueFrom.ResourceFieldRef
						memoryFrom = ref != nil && ref.ContainerName == "webhook-guard" && ref.Resource == "limits.memory"
					}
				}
			}
			if gogc != test.gogc || memoryFrom != test.memoryFrom {
				t.Errorf("GOGC %q, GOMEMLIMIT from the memory limit %t; want %q, %t\n%s", gogc, memoryFrom, test.gogc, test.memoryFrom, out)
			}
		})
	}
}
