package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// WriterBinary is a real writer built into bin/ by `make tools`
// (hack/build-writers.sh) from its own module under e2e/writers, so that
// its dependency graph never reaches e2e/go.mod. A missing binary fails
// the test (never skips) and says to run make tools.
func WriterBinary(t testing.TB, name string) string {
	t.Helper()
	bin := filepath.Join(RepoRoot(), "bin", name)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing (%v): run make tools", bin, err)
	}
	return bin
}

// writerModuleDir is module's directory in the module cache, as the
// writer module in e2e/writers/<writer> requires it (not e2e/go.mod).
func writerModuleDir(t testing.TB, writer, module string) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = filepath.Join(RepoRoot(), "e2e", "writers", writer)
	// As hack/build-writers.sh builds it: its own go.mod, not go.work.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		t.Fatalf("locate the %s module of e2e/writers/%s (go list -m): %v", module, writer, err)
	}
	return strings.TrimSpace(string(out))
}

// helmTemplate renders chart (a directory) with bin/helm as release in
// namespace, with the chart's defaults and --set values, into its objects;
// what names the chart in failures.
func helmTemplate(t testing.TB, what, release, chart, namespace string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", release, chart, "--namespace", namespace}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(filepath.Join(RepoRoot(), "bin", "helm"), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template %s: %v: %s (bin/helm missing? run make tools)", what, err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			break
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs
}

// createObjects creates objs as the admin (the installer), a namespaced
// object in namespace, each kind mapped to its resource through the API's
// discovery (read once, so CRDs must be served before); an object that
// exists is left as it is.
func createObjects(t testing.TB, env *Env, namespace string, objs []*unstructured.Unstructured) {
	t.Helper()
	groups, err := restmapper.GetAPIGroupResources(env.AdminKube.Discovery())
	if err != nil {
		t.Fatalf("discover the API: %v", err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dyn := dynamic.NewForConfigOrDie(env.Admin)
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("map %s: %v", gvk, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
			ri = dyn.Resource(m.Resource).Namespace(namespace)
		}
		if _, err := ri.Create(context.Background(), o, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// Target is an object a real writer writes its CA into.
type Target struct {
	Kind Kind
	Name string
}

// targetBundles reads the caBundle of every target as the admin, by
// "Kind/name", one per webhooks[] entry (one for a CRD).
func targetBundles(t testing.TB, env *Env, targets []Target) map[string][][]byte {
	t.Helper()
	admin := &Client{Config: env.Admin, Kube: env.AdminKube}
	out := map[string][][]byte{}
	for _, o := range targets {
		got, err := admin.Get(context.Background(), o.Kind, o.Name)
		if err != nil {
			t.Fatalf("get %s %s: %v", o.Kind, o.Name, err)
		}
		out[string(o.Kind)+"/"+o.Name] = got.Bundles
	}
	return out
}

// waitTargetBundles polls every 10 ms until every caBundle of targets is
// ca, byte for byte, and returns how long that took; after timeout it
// returns an error naming the objects that do not hold it (who names the
// writer).
func waitTargetBundles(t testing.TB, env *Env, targets []Target, who string, ca []byte, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	for {
		var off []string
		for name, bundles := range targetBundles(t, env, targets) {
			if len(bundles) == 0 {
				off = append(off, name+" has no caBundle")
			}
			for i, b := range bundles {
				if !bytes.Equal(b, ca) {
					off = append(off, fmt.Sprintf("%s[%d] holds %d bytes", name, i, len(b)))
				}
			}
		}
		if len(off) == 0 {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return time.Since(start), fmt.Errorf("after %s not every caBundle holds %s's CA (%d bytes): %s", timeout, who, len(ca), strings.Join(off, "; "))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// actingAs is a framework Client acting as a writer's identity with the
// RBAC its product grants only (no role of the suite's added), to write as
// it from outside its process.
func (e *Env) actingAs(t testing.TB, user envtest.User) *Client {
	t.Helper()
	return e.provision(t, user, &rest.Config{QPS: 50, Burst: 100})
}

// refusedLines are a writer's log lines about a write kube-apiserver
// refused (by a webhook or a policy; not a conflict).
func refusedLines(log *Buffer) []string {
	var out []string
	for _, l := range log.Lines() {
		if strings.Contains(l, "denied the request") || strings.Contains(l, "is forbidden") {
			out = append(out, l)
		}
	}
	return out
}
