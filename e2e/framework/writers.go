package framework

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
