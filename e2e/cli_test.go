package e2e

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
)

// runCLI runs the webhook-guard binary and returns stdout, stderr and the
// exit code (2 included: some cases expect it).
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(framework.GuardBinary(t), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("webhook-guard %s: %v", strings.Join(args, " "), err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// TestCLIKubectlStyle runs the CLI against the real API server with
// kubectl's flags: review -o wide and --no-headers print the guard's real
// report, --as impersonates (a subject without RBAC is refused by the API
// server, not by the CLI), and -n picks the namespace of --from-cluster's
// ConfigMap.
func TestCLIKubectlStyle(t *testing.T) {
	t.Parallel()
	f := newFixture(t, framework.Options{ReportCRDs: true, GuardArgs: []string{"--records-flush-interval", flushInterval.String()}})
	ctx := t.Context()
	kubeconfig := f.env.Kubeconfig(t, envtest.User{Name: "e2e-cli", Groups: []string{"system:masters"}})
	f.create(t, framework.Validating, auditedName, f.ownerCA.PEM)
	_, err := f.intruder.Annotate(ctx, framework.Validating, auditedName, "e2e/intruder", "1")
	require.NoError(t, err)

	var wide string
	framework.Eventually(t, 5*flushInterval+5*time.Second, "review -o wide lists the intruder's write", func() bool {
		wide, _, _ = runCLI(t, "review", "--kubeconfig", kubeconfig, "-o", "wide")
		return strings.Contains(wide, "vwc/"+auditedName)
	})
	assert.Contains(t, wide, "CONFIGURATION")
	assert.Contains(t, wide, "sa:"+intruderNamespace+":"+intruderSA)

	rows, _, code := runCLI(t, "review", "--kubeconfig", kubeconfig, "--no-headers", "--mapping", auditedMapping)
	assert.Equal(t, 1, code, "a would-deny exits 1")
	assert.NotContains(t, rows, "MAPPING")
	assert.NotContains(t, rows, "Suggestions")
	assert.Contains(t, rows, auditedMapping+" ")

	// --as: the intruder may not list ClusterReports; the API server says so.
	_, stderr, code := runCLI(t, "review", "--kubeconfig", kubeconfig, "--as", intruderUser.Name)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `clusterreports.openreports.io is forbidden: User "`+intruderUser.Name+`" cannot list`)

	// -n: the installed GuardConfig is read from the release namespace.
	_, err = f.env.AdminKube.CoreV1().ConfigMaps(appNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook-guard-config"},
		Data:       map[string]string{"guard.yaml": string(framework.MarshalConfig(t, guardConfig()))},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	out, stderr, code := runCLI(t, "scan", "--kubeconfig", kubeconfig, "--from-cluster", "-n", appNamespace, "-o", "json")
	assert.NotEqual(t, 2, code, stderr)
	assert.Contains(t, out, `"mapping": "`+auditedMapping+`"`)
	_, stderr, code = runCLI(t, "scan", "--kubeconfig", kubeconfig, "--from-cluster", "-n", intruderNamespace)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "ConfigMap "+intruderNamespace+"/webhook-guard-config")
}
