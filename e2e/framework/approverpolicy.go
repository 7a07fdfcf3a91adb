package framework

import (
	"path/filepath"
	"testing"
)

// ApproverPolicyVersion is the cert-manager approver-policy release whose
// CertificateRequestPolicy CRD the chart's tls.approverPolicy objects are
// created against.
const ApproverPolicyVersion = "v0.28.0"

// ApproverPolicyCRDPaths is approver-policy's CertificateRequestPolicy CRD,
// from its module (nothing imports it, so it is fetched by version).
func ApproverPolicyCRDPaths(t testing.TB) []string {
	t.Helper()
	dir := DownloadModule(t, "github.com/cert-manager/approver-policy@"+ApproverPolicyVersion)
	return []string{filepath.Join(dir, "deploy", "crds", "policy.cert-manager.io_certificaterequestpolicies.yaml")}
}
