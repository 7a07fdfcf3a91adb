package charts

import (
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// Test_serviceMonitorReachesTheMetricsPort follows the ServiceMonitor to the
// pods as Prometheus would: its selector matches the chart's Service, its
// endpoint port is a port of that Service, and that port's targetPort names
// the guard container's metrics port. A break anywhere in that chain is a
// scrape target that never appears, with no error anywhere.
func Test_serviceMonitorReachesTheMetricsPort(t *testing.T) {
	for _, name := range []string{"static", "policy"} {
		t.Run(name, func(t *testing.T) {
			out, err := helm(t, templateArgs(chartDir, valueSets[name])...)
			if err != nil {
				t.Fatal(err)
			}
			type port struct {
				Name       string `json:"name"`
				TargetPort string `json:"targetPort"`
			}
			var (
				monitorSelector map[string]string
				monitorPorts    []string
				services        []struct {
					labels map[string]string
					ports  []port
				}
				containerPorts []string
			)
			for doc := range strings.SplitSeq(out, "\n---\n") {
				var o struct {
					Kind     string `json:"kind"`
					Metadata struct {
						Labels map[string]string `json:"labels"`
					} `json:"metadata"`
					Spec struct {
						Selector struct {
							MatchLabels map[string]string `json:"matchLabels"`
						} `json:"selector"`
						Endpoints []struct {
							Port string `json:"port"`
						} `json:"endpoints"`
						Ports    []port `json:"ports"`
						Template struct {
							Spec struct {
								Containers []struct {
									Name  string `json:"name"`
									Ports []struct {
										Name string `json:"name"`
									} `json:"ports"`
								} `json:"containers"`
							} `json:"spec"`
						} `json:"template"`
					} `json:"spec"`
				}
				if err := yaml.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(doc), "---")), &o); err != nil {
					t.Fatal(err)
				}
				switch o.Kind {
				case "ServiceMonitor":
					monitorSelector = o.Spec.Selector.MatchLabels
					for _, e := range o.Spec.Endpoints {
						monitorPorts = append(monitorPorts, e.Port)
					}
				case "Service":
					services = append(services, struct {
						labels map[string]string
						ports  []port
					}{o.Metadata.Labels, o.Spec.Ports})
				case "DaemonSet", "Deployment":
					for _, c := range o.Spec.Template.Spec.Containers {
						if c.Name == "webhook-guard" {
							for _, p := range c.Ports {
								containerPorts = append(containerPorts, p.Name)
							}
						}
					}
				}
			}
			if monitorSelector == nil || len(monitorPorts) == 0 {
				t.Fatalf("values %s render no ServiceMonitor with endpoints", valueSets[name])
			}
			for _, want := range monitorPorts {
				found := false
				for _, svc := range services {
					if !selects(monitorSelector, svc.labels) {
						continue
					}
					for _, p := range svc.ports {
						if p.Name == want {
							found = true
							if !slices.Contains(containerPorts, p.TargetPort) {
								t.Errorf("Service port %q targets %q, which is not a port of the guard container (%v)", p.Name, p.TargetPort, containerPorts)
							}
						}
					}
				}
				if !found {
					t.Errorf("the ServiceMonitor scrapes port %q, but no Service it selects (%v) has that port", want, monitorSelector)
				}
			}
		})
	}
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
