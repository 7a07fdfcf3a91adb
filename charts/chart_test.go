package charts

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/app"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/static"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.* from the current chart")

const (
	chartDir    = "webhook-guard"
	releaseName = "webhook-guard"
	namespace   = "webhook-guard"
	// kubeVersion pins .Capabilities.KubeVersion so that goldens do not depend
	// on how bin/helm was built.
	kubeVersion = "1.37.0"
)

// valueSets are the values every chart-wide test runs with: the defaults,
// each shape with its options, and the user-facing samples.
var valueSets = map[string]string{
	"default":     "",
	"static":      "testdata/values-static.yaml",
	"policy":      "testdata/values-policy.yaml",
	"options":     "testdata/values-options.yaml",
	"koordinator": "../config/samples/values-koordinator.yaml",
	"cainjector":  "../config/samples/values-cainjector.yaml",
}

func helmBinary(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "bin", "helm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run make tools (hack/build-helm.sh builds helm from the Go module proxy)", bin)
	}
	return bin
}

// helm runs bin/helm with an isolated HOME so no user configuration or
// repository cache leaks in, and returns stdout; a non-zero exit is returned
// as an error carrying stderr.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), helmBinary(t), args...)
	cmd.Env = append(os.Environ(),
		"HOME="+home,
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// writeValues writes a values file for one test. Not under t.TempDir():
// helm splits --values on commas, and test names contain commas.
func writeValues(t *testing.T, content string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "webhook-guard-values-") //nolint:usetesting // see above: no commas in the path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func templateArgs(chart, valuesFile string, extra ...string) []string {
	args := []string{"template", releaseName, chart, "--namespace", namespace, "--kube-version", kubeVersion}
	if valuesFile != "" {
		args = append(args, "--values", valuesFile)
	}
	return append(args, extra...)
}

// policyShape tells which valueSets install the policy shape.
func policyShape(valueSet string) bool {
	return valueSet == "policy" || valueSet == "options"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func Test_chartVersionMatchesVERSION(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(string(raw))
	chartYAML, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Version     string `json:"version"`
		AppVersion  string `json:"appVersion"`
		KubeVersion string `json:"kubeVersion"`
	}
	if err := yaml.Unmarshal(chartYAML, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.Version != want || chart.AppVersion != want {
		t.Errorf("Chart.yaml has version %q and appVersion %q; both must equal VERSION (%q)", chart.Version, chart.AppVersion, want)
	}
	if chart.KubeVersion != ">=1.33.0-0" {
		t.Errorf("Chart.yaml kubeVersion is %q, want >=1.33.0-0 (the generated policies use CEL's two-variable comprehensions)", chart.KubeVersion)
	}
}

func Test_lintStrict(t *testing.T) {
	for _, name := range sortedKeys(valueSets) {
		t.Run(name, func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
			if f := valueSets[name]; f != "" {
				args = append(args, "--values", f)
			}
			if out, err := helm(t, args...); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// notesChart copies the chart and adds a template that renders NOTES.txt into
// a YAML document: `helm template` skips NOTES.txt, and `helm install
// --dry-run` needs a cluster.
func notesChart(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), chartDir)
	if err := os.CopyFS(dst, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	preview := "notes: |\n{{- include (print $.Template.BasePath \"/NOTES.txt\") . | nindent 2 }}\n"
	if err := os.WriteFile(filepath.Join(dst, "templates", "zz-notes-preview.yaml"), []byte(preview), 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

func renderNotes(t *testing.T, valuesFile string, extra ...string) string {
	t.Helper()
	out, err := helm(t, templateArgs(notesChart(t), valuesFile, append([]string{"--show-only", "templates/zz-notes-preview.yaml"}, extra...)...)...)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Notes string `json:"notes"`
	}
	if err := yaml.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(out), "---")), &doc); err != nil {
		t.Fatalf("NOTES.txt preview is not YAML: %v\n%s", err, out)
	}
	return doc.Notes
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (create it with make update-golden)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s; review the change and run make update-golden\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff reports the first lines that differ, enough to locate a change.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 20; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  golden: %q\n  got:    %q\n", i+1, wl, gl)
			shown++
		}
	}
	return b.String()
}

func Test_templateGolden(t *testing.T) {
	for _, name := range sortedKeys(valueSets) {
		t.Run(name, func(t *testing.T) {
			out, err := helm(t, templateArgs(chartDir, valueSets[name])...)
			if err != nil {
				t.Fatal(err)
			}
			compareGolden(t, filepath.Join("testdata", name+".golden.yaml"), out)
			compareGolden(t, filepath.Join("testdata", name+".notes.golden.txt"), renderNotes(t, valueSets[name]))
		})
	}
}

// Test_schemaRejects checks that bad values fail `helm template` before
// anything renders, with helm's message naming the offending key.
func Test_schemaRejects(t *testing.T) {
	const validOwner = `
    - name: koordinator
      match: {validating: [koord-validating-webhook-configuration]}
      writers: {serviceAccounts: [koordinator-system/koord-manager]}
      ca: {secret: {namespace: koordinator-system, name: koordinator-webhook-certs}}`
	tests := map[string]struct {
		values string
		want   []string
	}{
		"if a mapping's mode is unknown, name owners[0].mode": {
			values: `
config:
  owners:
    - name: koordinator
      mode: enforcing
      match: {validating: [koord-validating-webhook-configuration]}
      writers: {serviceAccounts: [koordinator-system/koord-manager]}
      ca: {secret: {namespace: koordinator-system, name: koordinator-webhook-certs}}`,
			want: []string{"at '/config/owners/0/mode': value must be one of 'audit', 'enforce'"},
		},
		"if defaultMode is unknown, name config.defaultMode": {
			values: "config:\n  defaultMode: deny\n",
			want:   []string{"at '/config/defaultMode': value must be one of 'audit', 'enforce'"},
		},
		"if a mapping has no CA source, name its ca": {
			values: `
config:
  owners:
    - name: koordinator
      match: {validating: [koord-validating-webhook-configuration]}
      writers: {serviceAccounts: [koordinator-system/koord-manager]}
      ca: {}`,
			want: []string{"at '/config/owners/0/ca': minProperties: got 0, want 1"},
		},
		"if a mapping has two CA sources, name its ca": {
			values: `
config:
  owners:
    - name: koordinator
      match: {validating: [koord-validating-webhook-configuration]}
      writers: {serviceAccounts: [koordinator-system/koord-manager]}
      ca:
        secret: {namespace: koordinator-system, name: koordinator-webhook-certs}
        configMap: {namespace: koordinator-system, name: koordinator-ca}`,
			want: []string{"at '/config/owners/0/ca': maxProperties: got 2, want 1"},
		},
		"if a writer service account is written as a username, name the entry": {
			values: `
config:
  owners:
    - name: koordinator
      match: {validating: [koord-validating-webhook-configuration]}
      writers: {serviceAccounts: ["system:serviceaccount:koordinator-system:koord-manager"]}
      ca: {secret: {namespace: koordinator-system, name: koordinator-webhook-certs}}`,
			want: []string{"at '/config/owners/0/writers/serviceAccounts/0': 'system:serviceaccount:koordinator-system:koord-manager' does not match pattern"},
		},
		"if a writer service account has no namespace, name the entry": {
			values: `
config:
  owners:
    - name: koordinator
      match: {validating: [koord-validating-webhook-configuration]}
      writers: {serviceAccounts: [koord-manager]}
      ca: {secret: {namespace: koordinator-system, name: koordinator-webhook-certs}}`,
			want: []string{"at '/config/owners/0/writers/serviceAccounts/0': 'koord-manager' does not match pattern"},
		},
		"if a break-glass service account is malformed, name it": {
			values: "config:\n  breakGlass:\n    serviceAccounts: [Kube-System/Admin]\n",
			want:   []string{"at '/config/breakGlass/serviceAccounts/0': 'Kube-System/Admin' does not match pattern"},
		},
		"if the writers lists are all empty, name writers": {
			values: `
config:
  owners:
    - name: koordinator
      match: {validating: [koord-validating-webhook-configuration]}
      writers: {serviceAccounts: [], users: [], groups: []}
      ca: {secret: {namespace: koordinator-system, name: koordinator-webhook-certs}}`,
			want: []string{"at '/config/owners/0/writers': 'anyOf' failed"},
		},
		"if writers are missing and the CA is not injected by cert-manager, name writers": {
			values: `
config:
  owners:
    - name: koordinator
      match: {validating: [koord-validating-webhook-configuration]}
      ca: {secret: {namespace: koordinator-system, name: koordinator-webhook-certs}}`,
			want: []string{"at '/config/owners/0': missing property 'writers'"},
		},
		"if a mapping matches nothing, name match": {
			values: `
config:
  owners:
    - name: koordinator
      match: {validating: []}
      writers: {serviceAccounts: [koordinator-system/koord-manager]}
      ca: {secret: {namespace: koordinator-system, name: koordinator-webhook-certs}}`,
			want: []string{"at '/config/owners/0/match': 'anyOf' failed"},
		},
		"if a ClusterIssuer source has a namespace, name the issuer": {
			values: `
config:
  owners:
    - name: platform
      match: {mutating: [platform-defaults]}
      writers: {users: [platform-deployer]}
      ca: {issuer: {kind: ClusterIssuer, namespace: cert-manager, name: platform-ca}}`,
			want: []string{"at '/config/owners/0/ca/issuer'"},
		},
		"if a mapping key is misspelled, name it": {
			values: "config:\n  owners:" + validOwner + "\n      writer: {users: [x]}\n",
			want:   []string{"at '/config/owners/0': additional properties 'writer' not allowed"},
		},
		"if a config key is unknown (apiVersion is the chart's), name it": {
			values: "config:\n  apiVersion: webhook-guard.io/v1alpha1\n  owners: []\n",
			want:   []string{"at '/config': additional properties 'apiVersion' not allowed"},
		},
		"if a top-level key is unknown, name it": {
			values: "replicas: 3\n",
			want:   []string{"additional properties 'replicas' not allowed"},
		},
		"if an RSA key would be 256 bits, name the size": {
			values: "tls:\n  privateKey: {algorithm: RSA, size: 256}\n",
			want:   []string{"at '/tls/privateKey/size': value must be one of 2048, 3072, 4096, 8192"},
		},
		"if the shape is unknown, name shape": {
			values: "shape: deployment\n",
			want:   []string{"at '/shape': value must be one of 'static', 'policy'"},
		},
		"if goRuntime.gogc is not a percentage, name the key": {
			values: "goRuntime:\n  gogc: fast\n",
			want:   []string{"at '/goRuntime/gogc'"},
		},
		"if policyGuardServiceAccount is a username rather than namespace/name, name the key": {
			values: "policyGuardServiceAccount: system:serviceaccount:wg-policy:wg\n",
			want:   []string{"at '/policyGuardServiceAccount'"},
		},
		"if the restricted securityContext is weakened, name the field": {
			values: "securityContext:\n  readOnlyRootFilesystem: false\n",
			want:   []string{"at '/securityContext/readOnlyRootFilesystem'"},
		},
		"if both an existing Secret and an issuer are given, fail naming both": {
			values: "tls:\n  existingSecret: my-tls\n  issuerRef: {name: my-issuer}\n",
			want:   []string{"tls.existingSecret and tls.issuerRef.name are both set"},
		},
		"if staticManifestSync is enabled in the policy shape, fail naming both": {
			values: "shape: policy\nstaticManifestSync: {enabled: true}\n",
			want:   []string{"staticManifestSync.enabled requires shape: static"},
		},
		"if several policy replicas run without leader election, fail": {
			values: "shape: policy\nleaderElection: {enabled: false}\n",
			want:   []string{"policy.replicas is 2 but leaderElection.enabled is false"},
		},
		"if two mappings share a name, fail naming it": {
			values: "config:\n  owners:" + validOwner + strings.ReplaceAll(validOwner, "koord-validating-webhook-configuration", "other") + "\n",
			want:   []string{`config.owners: two mappings are named "koordinator"`},
		},
		"if two mappings claim the same configuration, fail naming both": {
			values: "config:\n  owners:" + validOwner + strings.ReplaceAll(validOwner, "name: koordinator", "name: legacy") + "\n",
			want:   []string{`the validating webhook configuration "koord-validating-webhook-configuration" is matched by mappings "koordinator" and "legacy"`},
		},
		"if the PodDisruptionBudget sets both minAvailable and maxUnavailable, fail naming both": {
			values: "shape: policy\npolicy:\n  podDisruptionBudget: {minAvailable: 1, maxUnavailable: 1}\n",
			want:   []string{`policy.podDisruptionBudget: minAvailable (1) and maxUnavailable (1) are both set; a PodDisruptionBudget takes one: set the other to ""`},
		},
		"if maxUnavailable is not a number or a percentage, name it": {
			values: "policy:\n  podDisruptionBudget: {maxUnavailable: half}\n",
			want:   []string{"at '/policy/podDisruptionBudget/maxUnavailable': 'half' does not match pattern"},
		},
		"if config.existingConfigMap is set with owners in values, fail: they would be ignored": {
			values: "config:\n  existingConfigMap: my-guard-config\n  owners:" + validOwner + "\n",
			want:   []string{`config.existingConfigMap is "my-guard-config" and config.owners is not empty`},
		},
		"if approver-policy is enabled with an existing Secret, fail: nothing to approve": {
			values: "tls:\n  existingSecret: mine\n  approverPolicy: {enabled: true}\n",
			want:   []string{"tls.approverPolicy.enabled and tls.existingSecret are both set"},
		},
		"if approver-policy's cert-manager service account has no namespace, name it": {
			values: "tls:\n  approverPolicy: {enabled: true, certManagerServiceAccount: cert-manager}\n",
			want:   []string{"at '/tls/approverPolicy/certManagerServiceAccount'"},
		},
		"if an extra argument is not a flag, name it": {
			values: "extraArgs: [kube-api-qps=5]\n",
			want:   []string{"at '/extraArgs/0': 'kube-api-qps=5' does not match pattern"},
		},
		"if an extra volume mount has no mountPath, name it": {
			values: "volumeMounts: [{name: scratch}]\n",
			want:   []string{"at '/volumeMounts/0': missing property 'mountPath'"},
		},
		"if the runbook base URL carries an anchor, name it": {
			values: "monitoring:\n  prometheusRule: {runbookBaseURL: 'https://example.com/runbooks.md#top'}\n",
			want:   []string{"at '/monitoring/prometheusRule/runbookBaseURL'"},
		},
		"if a ServiceMonitor would scrape a loopback-only metrics server, fail": {
			values: "monitoring:\n  serviceMonitor: {enabled: true}\nmetrics:\n  bindAddress: 127.0.0.1\n",
			want:   []string{"monitoring.serviceMonitor.enabled but metrics.bindAddress is loopback"},
		},
	}
	for _, name := range sortedKeys(tests) {
		tc := tests[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			valuesFile := writeValues(t, tc.values)
			out, err := helm(t, templateArgs(chartDir, valuesFile)...)
			if err == nil {
				t.Fatalf("helm template accepted the values; want an error containing %q\n%s", tc.want, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

// Test_schemaAccepts checks values the schema must not reject.
func Test_schemaAccepts(t *testing.T) {
	tests := map[string]string{
		"if the CA is injected by cert-manager, writers may be omitted": `
config:
  owners:
    - name: example
      match: {validating: [example]}
      ca: {injectedByCertManager: {}}`,
		"if only groups are writers, that is enough": `
config:
  owners:
    - name: example
      match: {labelSelector: {matchLabels: {app: example}}}
      writers: {groups: [platform-admins]}
      ca: {configMap: {namespace: example, name: example-ca, key: ca.pem}}`,
		"if the policy shape runs one replica, it renders (NOTES warns)": "shape: policy\npolicy: {replicas: 1}\n",
	}
	for _, name := range sortedKeys(tests) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			valuesFile := writeValues(t, tests[name])
			if _, err := helm(t, templateArgs(chartDir, valuesFile)...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func Test_notesWarnAboutSingleReplica(t *testing.T) {
	notes := renderNotes(t, "", "--set", "shape=policy", "--set", "policy.replicas=1")
	if !strings.Contains(notes, "WARNING: policy.replicas is 1") {
		t.Errorf("NOTES.txt does not warn about a single replica:\n%s", notes)
	}
	notes = renderNotes(t, "", "--set", "shape=policy")
	if strings.Contains(notes, "WARNING: policy.replicas") {
		t.Errorf("NOTES.txt warns about replicas although there are 2:\n%s", notes)
	}
}

// Test_notesRenderCommandProtectsPolicyObjects: with
// policyGuardServiceAccount set and no sync sidecar, the render command in
// NOTES passes it on, as the sidecar would.
func Test_notesRenderCommandProtectsPolicyObjects(t *testing.T) {
	notes := renderNotes(t, "", "--set", "policyGuardServiceAccount=wg-policy/wg-policy-webhook-guard")
	if !strings.Contains(notes, "--guard-service-account wg-policy/wg-policy-webhook-guard") {
		t.Errorf("NOTES.txt's render command does not pass --guard-service-account:\n%s", notes)
	}
	if notes := renderNotes(t, ""); strings.Contains(notes, "--guard-service-account") {
		t.Errorf("NOTES.txt passes --guard-service-account although policyGuardServiceAccount is empty:\n%s", notes)
	}
}

// object is a rendered Kubernetes object, decoded generically.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Data  map[string]string `json:"data"`
	Rules []struct {
		APIGroups     []string `json:"apiGroups"`
		Resources     []string `json:"resources"`
		Verbs         []string `json:"verbs"`
		ResourceNames []string `json:"resourceNames"`
	} `json:"rules"`
}

func renderObjects(t *testing.T, valuesFile string, extra ...string) []object {
	t.Helper()
	out, err := helm(t, templateArgs(chartDir, valuesFile, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	var objs []object
	for doc := range strings.SplitSeq(out, "\n---\n") {
		doc = strings.TrimPrefix(strings.TrimSpace(doc), "---")
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var o object
		// The final newline back: TrimSpace took it, and a block scalar
		// that ends the document (guard.yaml) would lose its own.
		if err := yaml.Unmarshal([]byte(doc+"\n"), &o); err != nil {
			t.Fatalf("rendered document is not YAML: %v\n%s", err, doc)
		}
		if o.Kind != "" {
			objs = append(objs, o)
		}
	}
	return objs
}

// Test_renderedGuardConfigLoads is the values -> ConfigMap -> loader round
// trip: the guard.yaml the chart renders loads with policy.Load unchanged,
// with as many mappings as the values declare.
func Test_renderedGuardConfigLoads(t *testing.T) {
	for _, name := range sortedKeys(valueSets) {
		t.Run(name, func(t *testing.T) {
			var values struct {
				Config struct {
					Owners []map[string]any `json:"owners"`
				} `json:"config"`
			}
			if f := valueSets[name]; f != "" {
				raw, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if err := yaml.Unmarshal(raw, &values); err != nil {
					t.Fatal(err)
				}
			}
			var cm *object
			for _, o := range renderObjects(t, valueSets[name], "--show-only", "templates/configmap.yaml") {
				if o.Kind == "ConfigMap" {
					cm = &o
				}
			}
			if cm == nil {
				t.Fatal("the chart renders no ConfigMap")
			}
			guardYAML, ok := cm.Data["guard.yaml"]
			if !ok {
				t.Fatalf("ConfigMap %s has no key guard.yaml", cm.Metadata.Name)
			}
			cfg, err := policy.Load([]byte(guardYAML))
			if err != nil {
				t.Fatalf("policy.Load rejects the rendered guard.yaml: %v\n%s", err, guardYAML)
			}
			if got, want := len(cfg.Spec.Owners), len(values.Config.Owners); got != want {
				t.Errorf("loaded %d mappings, the values declare %d", got, want)
			}
			if cfg.Spec.DefaultMode != guardapi.ModeAudit && name != "static" {
				t.Errorf("defaultMode is %q, want audit by default", cfg.Spec.DefaultMode)
			}
		})
	}
}

// Test_rbacIsLeastPrivilege checks invariants of every rendered Role and
// ClusterRole: nothing may write webhook configurations, and Secrets and
// ConfigMaps are only ever readable with `get` on named objects.
func Test_rbacIsLeastPrivilege(t *testing.T) {
	for _, name := range sortedKeys(valueSets) {
		t.Run(name, func(t *testing.T) {
			for _, o := range renderObjects(t, valueSets[name]) {
				if o.Kind != "Role" && o.Kind != "ClusterRole" {
					continue
				}
				where := fmt.Sprintf("%s %s/%s", o.Kind, o.Metadata.Namespace, o.Metadata.Name)
				for i, r := range o.Rules {
					for _, res := range r.Resources {
						switch res {
						case "validatingadmissionpolicies", "validatingadmissionpolicybindings":
							// Policy shape: the guard's leader creates the policies
							// it generates, and applies (patch), updates and
							// deletes them by name only
							// (Test_policyObjectWritesByName). Never in the
							// static shape.
							allowed := []string{"get", "list", "watch"}
							if policyShape(name) && o.Kind == "ClusterRole" {
								allowed = append(allowed, "create")
								if len(r.ResourceNames) > 0 {
									allowed = append(allowed, "patch", "update", "delete")
								}
							}
							for _, v := range r.Verbs {
								if !slices.Contains(allowed, v) {
									t.Errorf("%s rules[%d] grants %q on %s: only the policy shape writes (its own) policies", where, i, v, res)
								}
							}
						case "validatingwebhookconfigurations", "mutatingwebhookconfigurations":
							for _, v := range r.Verbs {
								if !slices.Contains([]string{"get", "list", "watch"}, v) {
									t.Errorf("%s rules[%d] grants %q on %s: the guard must never write what it guards", where, i, v, res)
								}
							}
						case "secrets", "configmaps":
							if o.Kind == "ClusterRole" {
								t.Errorf("%s rules[%d] grants %s cluster-wide; CA sources are read through Roles with resourceNames", where, i, res)
							}
							// list/watch with resourceNames authorize only a
							// metadata.name field selector: the guard watches
							// each CA source by name.
							if !slices.Equal(r.Verbs, []string{"get", "list", "watch"}) || len(r.ResourceNames) == 0 {
								t.Errorf("%s rules[%d] grants %v on %s with resourceNames %v; want get, list, watch on named objects only", where, i, r.Verbs, res, r.ResourceNames)
							}
						}
						if res == "*" || slices.Contains(r.Verbs, "*") {
							t.Errorf("%s rules[%d] uses a wildcard", where, i)
						}
					}
				}
			}
		})
	}
}

// Test_secretReadsFollowMappings checks that the Roles grant get on exactly
// the Secrets and ConfigMaps named by the mappings and extra*Reads of the
// static test values, per namespace.
func Test_secretReadsFollowMappings(t *testing.T) {
	want := map[string]map[string][]string{
		"cert-manager":       {"secrets": {"platform-ca"}},
		"gatekeeper-system":  {"secrets": {"gatekeeper-ca"}},
		"koordinator-system": {"secrets": {"koordinator-webhook-certs"}, "configmaps": {"koordinator-ca-bundle"}},
		"kyverno":            {"configmaps": {"kyverno-ca"}},
	}
	got := map[string]map[string][]string{}
	for _, o := range renderObjects(t, valueSets["static"], "--show-only", "templates/rbac.yaml") {
		if o.Kind != "Role" || strings.HasSuffix(o.Metadata.Name, "-leader-election") || strings.HasSuffix(o.Metadata.Name, "-events") {
			continue
		}
		for _, r := range o.Rules {
			for _, res := range r.Resources {
				if got[o.Metadata.Namespace] == nil {
					got[o.Metadata.Namespace] = map[string][]string{}
				}
				got[o.Metadata.Namespace][res] = append(got[o.Metadata.Namespace][res], r.ResourceNames...)
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("CA source reads:\n got  %v\n want %v", got, want)
	}
}

func TestMain(m *testing.M) {
	flag.Parse()
	if _, err := os.Stat(filepath.Join("..", "bin", "helm")); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(os.Stderr, "bin/helm is missing: run make tools (hack/build-helm.sh)")
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// Test_everyValueIsCommented checks that every key of values.yaml has a
// comment on the line(s) right above it. Keys inside lists and inside
// free-form maps (label selectors, resource quantities) are data, not
// settings, and are exempt.
func Test_everyValueIsCommented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dataMaps := []string{"nodeSelector", "requests", "limits", "alertLabels", "capabilities", "seccompProfile", "resources"}
	type frame struct {
		indent int
		key    string
	}
	var stack []frame
	prevComment := false
	listIndent := -1
	for i, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			prevComment = false
			continue
		}
		if strings.HasPrefix(trimmed, "#") {
			prevComment = true
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		wasComment := prevComment
		prevComment = false
		if strings.HasPrefix(trimmed, "- ") {
			listIndent = indent
			continue
		}
		if listIndent >= 0 && indent > listIndent {
			continue
		}
		listIndent = -1
		key, _, ok := strings.Cut(trimmed, ":")
		if !ok {
			continue
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		exempt := len(stack) > 0 && slices.Contains(dataMaps, stack[len(stack)-1].key)
		stack = append(stack, frame{indent, key})
		if !exempt && !wasComment {
			var path []string
			for _, f := range stack {
				path = append(path, f.key)
			}
			t.Errorf("values.yaml:%d: %s has no comment above it", i+1, strings.Join(path, "."))
		}
	}
}

// Test_containerArgsAreKnownFlags parses the args of every container the
// chart renders with the binary's own command tree, so a renamed or removed
// flag fails here rather than in a crash-looping pod.
func Test_containerArgsAreKnownFlags(t *testing.T) {
	wantCommands := map[string]string{"webhook-guard": "serve", "static-manifest-sync": "static-manifest"}
	for _, name := range sortedKeys(valueSets) {
		t.Run(name, func(t *testing.T) {
			out, err := helm(t, templateArgs(chartDir, valueSets[name])...)
			if err != nil {
				t.Fatal(err)
			}
			seen := 0
			for doc := range strings.SplitSeq(out, "\n---\n") {
				var w struct {
					Kind string `json:"kind"`
					Spec struct {
						Template struct {
							Spec struct {
								Containers []struct {
									Name string   `json:"name"`
									Args []string `json:"args"`
								} `json:"containers"`
							} `json:"spec"`
						} `json:"template"`
					} `json:"spec"`
				}
				if err := yaml.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(doc), "---")), &w); err != nil {
					t.Fatal(err)
				}
				if w.Kind != "DaemonSet" && w.Kind != "Deployment" {
					continue
				}
				for _, c := range w.Spec.Template.Spec.Containers {
					seen++
					root := app.NewCommand(io.Discard, io.Discard)
					sub, rest, err := root.Find(c.Args)
					if err != nil {
						t.Errorf("%s container %s: args %v: %v", w.Kind, c.Name, c.Args, err)
						continue
					}
					if want := wantCommands[c.Name]; sub.Name() != want {
						t.Errorf("%s container %s runs %q, want %q", w.Kind, c.Name, sub.CommandPath(), want)
					}
					if err := sub.ParseFlags(rest); err != nil {
						t.Errorf("%s container %s: `%s` rejects the chart's args %v: %v", w.Kind, c.Name, sub.CommandPath(), rest, err)
					}
				}
			}
			if seen == 0 {
				t.Fatal("the chart renders no DaemonSet or Deployment")
			}
		})
	}
}

// Test_renderedGuardConfigWorksWithCheck feeds the guard.yaml the chart
// renders from the sample values, unchanged, to `webhook-guard check` with
// the sample objects and AdmissionReviews of config/samples: the owner's and
// cainjector's writes are allowed, the intruders' are audited.
func Test_renderedGuardConfigWorksWithCheck(t *testing.T) {
	tests := map[string]struct {
		values, review string
		want           []string
	}{
		"if koord-manager writes its own CA, allow": {
			values: "koordinator", review: "owner.json",
			want: []string{"decision: allow (audit)", "mapping:  koordinator"},
		},
		"if another service account writes, audit it as not-owner": {
			values: "koordinator", review: "intruder.json",
			want: []string{"decision: audit (audit)", "rule:     not-owner", "webhook-guard (audit) would deny"},
		},
		"if cainjector writes the injected CA, allow": {
			values: "cainjector", review: "cainjector.json",
			want: []string{"decision: allow (audit)", "mapping:  istio-sidecar-injector"},
		},
		"if istiod writes its own CA over cainjector's, audit it": {
			values: "cainjector", review: "cainjector-app-writes-own-ca.json",
			want: []string{"decision: audit (audit)", "mapping:  istio-sidecar-injector"},
		},
	}
	for _, name := range sortedKeys(tests) {
		tc := tests[name]
		t.Run(name, func(t *testing.T) {
			var guardYAML string
			for _, o := range renderObjects(t, valueSets[tc.values], "--show-only", "templates/configmap.yaml") {
				guardYAML = o.Data["guard.yaml"]
			}
			configPath := filepath.Join(t.TempDir(), "guard.yaml")
			if err := os.WriteFile(configPath, []byte(guardYAML), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := app.Main([]string{"check", "--config", configPath,
				"--objects", filepath.Join("..", "config", "samples", "objects.yaml"),
				"--review", filepath.Join("..", "config", "samples", "reviews", tc.review)}, &stdout, &stderr)
			if code != app.ExitAllowed {
				t.Fatalf("webhook-guard check exited %d, want %d\n%s%s", code, app.ExitAllowed, stdout.String(), stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("check output lacks %q:\n%s", w, stdout.String())
				}
			}
		})
	}
}

// Test_podInvariants checks what must hold for every rendered workload,
// whatever a golden update might let slip: the restricted security context
// on every container, the priority class, and for the static shape host
// networking with everything on loopback except metrics.
func Test_podInvariants(t *testing.T) {
	type probe struct {
		HTTPGet struct {
			Host string `json:"host"`
		} `json:"httpGet"`
	}
	type container struct {
		Name            string   `json:"name"`
		Args            []string `json:"args"`
		SecurityContext struct {
			AllowPrivilegeEscalation *bool `json:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool `json:"readOnlyRootFilesystem"`
			Capabilities             struct {
				Drop []string `json:"drop"`
				Add  []string `json:"add"`
			} `json:"capabilities"`
		} `json:"securityContext"`
		LivenessProbe  *probe `json:"livenessProbe"`
		ReadinessProbe *probe `json:"readinessProbe"`
	}
	type workload struct {
		Kind string `json:"kind"`
		Spec struct {
			Template struct {
				Spec struct {
					HostNetwork       bool              `json:"hostNetwork"`
					DNSPolicy         string            `json:"dnsPolicy"`
					PriorityClassName string            `json:"priorityClassName"`
					NodeSelector      map[string]string `json:"nodeSelector"`
					SecurityContext   struct {
						RunAsNonRoot   *bool `json:"runAsNonRoot"`
						SeccompProfile struct {
							Type string `json:"type"`
						} `json:"seccompProfile"`
					} `json:"securityContext"`
					Containers []container `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	for _, name := range sortedKeys(valueSets) {
		t.Run(name, func(t *testing.T) {
			out, err := helm(t, templateArgs(chartDir, valueSets[name])...)
			if err != nil {
				t.Fatal(err)
			}
			for doc := range strings.SplitSeq(out, "\n---\n") {
				var w workload
				if err := yaml.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(doc), "---")), &w); err != nil {
					t.Fatal(err)
				}
				if w.Kind != "DaemonSet" && w.Kind != "Deployment" {
					continue
				}
				pod := w.Spec.Template.Spec
				// Empty by default: clusters with a quota on
				// system-cluster-critical refuse it outside kube-system.
				want := ""
				if name == "options" {
					want = "system-cluster-critical"
				}
				if pod.PriorityClassName != want {
					t.Errorf("%s priorityClassName = %q, want %q", w.Kind, pod.PriorityClassName, want)
				}
				if pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot || pod.SecurityContext.SeccompProfile.Type != "RuntimeDefault" {
					t.Errorf("%s pod securityContext is not restricted: %+v", w.Kind, pod.SecurityContext)
				}
				static := w.Kind == "DaemonSet"
				if static != (pod.HostNetwork && pod.DNSPolicy == "ClusterFirstWithHostNet") {
					t.Errorf("%s hostNetwork=%v dnsPolicy=%q", w.Kind, pod.HostNetwork, pod.DNSPolicy)
				}
				if static {
					if _, ok := pod.NodeSelector["node-role.kubernetes.io/control-plane"]; !ok {
						t.Errorf("DaemonSet nodeSelector %v does not select control-plane nodes", pod.NodeSelector)
					}
				}
				for _, c := range pod.Containers {
					sc := c.SecurityContext
					if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
						!slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
						t.Errorf("%s container %s securityContext is not restricted: %+v", w.Kind, c.Name, sc)
					}
					if c.Name != "webhook-guard" {
						continue
					}
					for _, p := range []*probe{c.LivenessProbe, c.ReadinessProbe} {
						if p == nil {
							t.Errorf("%s container %s lacks a probe", w.Kind, c.Name)
						} else if static && p.HTTPGet.Host != "127.0.0.1" {
							t.Errorf("%s probe host = %q; with host networking it must be 127.0.0.1, where the health server listens", w.Kind, p.HTTPGet.Host)
						}
					}
					if static {
						for _, want := range []string{"--bind-address=127.0.0.1", "--health-probe-bind-address=[127.0.0.1]:"} {
							if !slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, want) }) {
								t.Errorf("DaemonSet guard args %v lack %s", c.Args, want)
							}
						}
					}
				}
			}
		})
	}
}

// Test_skipGrantNamesTheRenderedConfig: in the static shape the grant names
// the fingerprint of guard.yaml exactly as the ConfigMap holds it, which is
// what `render static-manifest --skip-grant-service-account` (the
// staticManifestSync sidecar, given the mounted file) computes. A mismatch
// would silently turn the skip off; an extra grant could turn it on for a
// manifest of another GuardConfig.
func Test_skipGrantNamesTheRenderedConfig(t *testing.T) {
	for _, name := range sortedKeys(valueSets) {
		t.Run(name, func(t *testing.T) {
			objs := renderObjects(t, valueSets[name], "--set", "shape=static")
			var guardYAML string
			var grants [][]string
			for _, o := range objs {
				if o.Kind == "ConfigMap" && o.Data["guard.yaml"] != "" {
					guardYAML = o.Data["guard.yaml"]
				}
				for _, r := range o.Rules {
					if slices.Contains(r.APIGroups, static.GrantGroup) {
						if !slices.Equal(r.Resources, []string{static.GrantResource}) || !slices.Equal(r.Verbs, []string{static.GrantVerb}) {
							t.Errorf("%s %s grants %v on %v, want only %s on %s", o.Kind, o.Metadata.Name, r.Verbs, r.Resources, static.GrantVerb, static.GrantResource)
						}
						grants = append(grants, r.ResourceNames)
					}
				}
			}
			if guardYAML == "" {
				t.Fatal("no guard.yaml rendered")
			}
			want := static.Fingerprint([]byte(guardYAML))
			if len(grants) != 1 || !slices.Equal(grants[0], []string{want}) {
				t.Errorf("skip grants name %v, want exactly one naming the fingerprint of the rendered guard.yaml, %s", grants, want)
			}
		})
	}
	t.Run("existingConfigMap has no grant", func(t *testing.T) {
		for _, o := range renderObjects(t, "", "--set", "shape=static", "--set", "config.existingConfigMap=mine") {
			for _, r := range o.Rules {
				if slices.Contains(r.APIGroups, static.GrantGroup) {
					t.Errorf("%s %s grants the skip although the chart cannot fingerprint an existing ConfigMap", o.Kind, o.Metadata.Name)
				}
			}
		}
	})
}
