package framework

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ReportCRDPaths are the OpenReports CRD files from the
// github.com/openreports/reports-api module in the module cache.
func ReportCRDPaths(t testing.TB) []string {
	t.Helper()
	dir := filepath.Join(moduleDir(t, "github.com/openreports/reports-api"), "config", "crd")
	return []string{filepath.Join(dir, "openreports.io_clusterreports.yaml"), filepath.Join(dir, "openreports.io_reports.yaml")}
}

func moduleDir(t testing.TB, module string) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		t.Fatalf("locate the %s module (go list -m): %v", module, err)
	}
	return strings.TrimSpace(string(out))
}

// CertManagerCRDPaths are cert-manager's CRD files from the
// github.com/cert-manager/cert-manager module in the module cache.
func CertManagerCRDPaths(t testing.TB) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager")
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		t.Fatalf("locate the cert-manager module (go list -m): %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds")
	var paths []string
	for _, f := range []string{"cert-manager.io_certificates.yaml", "cert-manager.io_issuers.yaml", "cert-manager.io_clusterissuers.yaml", "cert-manager.io_certificaterequests.yaml"} {
		paths = append(paths, filepath.Join(dir, f))
	}
	return paths
}

// PrometheusOperatorVersion is the prometheus-operator release whose CRDs
// the chart's ServiceMonitor and PrometheusRule are created against. The
// CRD files are in the root module (example/prometheus-operator-crd), which
// nothing imports, so it is fetched by version rather than through go.mod.
const PrometheusOperatorVersion = "v0.85.0"

// PrometheusOperatorCRDPaths are the ServiceMonitor and PrometheusRule CRD
// files of github.com/prometheus-operator/prometheus-operator, downloaded
// through the Go module proxy (checksum-verified by the Go command).
func PrometheusOperatorCRDPaths(t testing.TB) []string {
	t.Helper()
	dir := filepath.Join(DownloadModule(t, "github.com/prometheus-operator/prometheus-operator@"+PrometheusOperatorVersion), "example", "prometheus-operator-crd")
	return []string{
		filepath.Join(dir, "monitoring.coreos.com_servicemonitors.yaml"),
		filepath.Join(dir, "monitoring.coreos.com_prometheusrules.yaml"),
	}
}

// DownloadModule downloads module@version through the Go module proxy
// (checksum-verified by the Go command), outside this module so nothing is
// added to go.mod, and returns its directory in the module cache.
func DownloadModule(t testing.TB, mod string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	var dl struct {
		Dir   string `json:"Dir"`
		Error string `json:"Error"`
	}
	if jerr := json.Unmarshal(out, &dl); err != nil || jerr != nil || dl.Error != "" {
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		t.Fatalf("download %s (go mod download): %v %s", mod, err, dl.Error)
	}
	return dl.Dir
}
