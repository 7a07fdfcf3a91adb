package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// fatalRecorder stands in for a testing.TB to observe a Fatal.
type fatalRecorder struct {
	testing.TB
	fatal string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatal(args ...any) {
	f.fatal = fmt.Sprint(args...)
	runtime.Goexit()
}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with the recorder on its own goroutine (Fatal exits it).
func (f *fatalRecorder) run(fn func(testing.TB)) string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.fatal
}

func Test_requireBinaries(t *testing.T) {
	cases := map[string]struct {
		present []string
		want    string
	}{
		"if both are missing, fail naming both and `make tools`": {
			want: "kube-apiserver and ",
		},
		"if etcd is missing, fail naming it and `make tools`": {
			present: []string{"kube-apiserver"},
			want:    "etcd is missing; run `make tools`",
		},
		"if both exist, pass": {
			present: []string{"kube-apiserver", "etcd"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for _, p := range tc.present {
				if err := os.WriteFile(filepath.Join(dir, p), []byte("#!/bin/sh\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			got := (&fatalRecorder{TB: t}).run(func(tb testing.TB) { requireBinaries(tb, dir) })
			switch {
			case tc.want == "" && got != "":
				t.Errorf("unexpected failure: %s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("failure %q does not contain %q", got, tc.want)
			case tc.want != "" && !strings.Contains(got, "make tools"):
				t.Errorf("failure %q does not say to run `make tools`", got)
			}
		})
	}
}

// A static manifest that kube-apiserver refuses makes it exit at start;
// envtest only says "timeout waiting for process kube-apiserver", so Start
// must put the apiserver's own reason into the failure.
func TestStart_surfacesWhyKubeAPIServerExited(t *testing.T) {
	RequireControlPlane(t)
	rec := &fatalRecorder{TB: t}
	got := rec.run(func(tb testing.TB) {
		Start(tb, Options{
			Config: &guardapi.GuardConfig{Owners: []guardapi.Owner{}},
			afterRender: func(t testing.TB, dir string) {
				// A static configuration must be named *.static.k8s.io.
				p := filepath.Join(dir, "static", "webhook-guard.static.k8s.io.yaml")
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				b = []byte(strings.Replace(string(b), "name: webhook-guard.static.k8s.io", "name: not-static", 1))
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
			},
		})
	})
	t.Logf("Start failed with:\n%s", got)
	if !strings.Contains(got, "kube-apiserver's reason: ") || !strings.Contains(got, "not-static") {
		t.Errorf("the failure does not carry kube-apiserver's reason:\n%s", got)
	}
}
