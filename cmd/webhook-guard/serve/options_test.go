package serve

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// validOptions are the serve defaults with a config path and a cert dir
// holding tls.crt and tls.key.
func validOptions(t *testing.T) Options {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"tls.crt", "tls.key"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600))
	}
	return Options{
		ConfigPath:             "/etc/webhook-guard/guard.yaml",
		ConfigReloadInterval:   10 * time.Second,
		BindAddress:            "0.0.0.0",
		Port:                   9443,
		CertDir:                dir,
		TLSMinVersion:          "VersionTLS12",
		CAMaxStale:             5 * time.Minute,
		MetricsBindAddress:     ":8080",
		HealthProbeBindAddress: ":8081",
		LogFormat:              "json",
		LogLevel:               "info",
		KubeAPIQPS:             50,
		KubeAPIBurst:           100,
		RecordsFlushInterval:   30 * time.Second,
		RecordsMaxResults:      100,
		AdmissionEndpoint:      true,
	}
}

const secureSuites = "TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256, " +
	"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, " +
	"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, " +
	"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, " +
	"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"

func Test_Options_Validate(t *testing.T) {
	saNamespaceFile := "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
	_, statErr := os.Stat(saNamespaceFile)
	inCluster := statErr == nil

	tests := map[string]struct {
		mod    func(t *testing.T, o *Options)
		expErr string
		exp    func(t *testing.T, o *Options)
		// skipInCluster skips a case that depends on not running in a pod.
		skipInCluster bool
	}{
		"if every flag is valid, return no error": {
			mod: func(*testing.T, *Options) {},
		},
		"if TLS 1.3 and secure cipher suites are chosen, return no error": {
			mod: func(_ *testing.T, o *Options) {
				o.TLSMinVersion = "VersionTLS13"
				o.TLSCipherSuites = []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"}
			},
		},
		"if --port is 0, name the flag": {
			mod:    func(_ *testing.T, o *Options) { o.Port = 0 },
			expErr: "invalid options:\n  --port must be in 1..65535, got 0",
		},
		"if --port is above 65535, name the flag": {
			mod:    func(_ *testing.T, o *Options) { o.Port = 65536 },
			expErr: "invalid options:\n  --port must be in 1..65535, got 65536",
		},
		"if --config is missing, say what it is": {
			mod:    func(_ *testing.T, o *Options) { o.ConfigPath = "" },
			expErr: "invalid options:\n  --config is required: the GuardConfig file with the owner mappings",
		},
		"if --cert-dir is missing, say what it must hold": {
			mod:    func(_ *testing.T, o *Options) { o.CertDir = "" },
			expErr: "invalid options:\n  --cert-dir is required: a directory holding tls.crt and tls.key (a mounted cert-manager Secret)",
		},
		"if --cert-dir lacks tls.key, name the missing file": {
			mod: func(t *testing.T, o *Options) {
				require.NoError(t, os.Remove(filepath.Join(o.CertDir, "tls.key")))
			},
			expErr: "invalid options:\n  --cert-dir {dir}: stat {dir}/tls.key: no such file or directory",
		},
		"if --cert-dir is empty, name both missing files": {
			mod: func(t *testing.T, o *Options) {
				o.CertDir = t.TempDir()
			},
			expErr: "invalid options:\n  --cert-dir {dir}: stat {dir}/tls.crt: no such file or directory\n  --cert-dir {dir}: stat {dir}/tls.key: no such file or directory",
		},
		"if --tls-min-version is TLS 1.1, name the accepted values": {
			mod:    func(_ *testing.T, o *Options) { o.TLSMinVersion = "VersionTLS11" },
			expErr: "invalid options:\n  --tls-min-version must be VersionTLS12 or VersionTLS13, got \"VersionTLS11\"",
		},
		"if --tls-min-version is empty, name the accepted values": {
			mod:    func(_ *testing.T, o *Options) { o.TLSMinVersion = "" },
			expErr: "invalid options:\n  --tls-min-version must be VersionTLS12 or VersionTLS13, got \"\"",
		},
		"if a cipher suite is unknown, name it and list the secure ones": {
			mod: func(_ *testing.T, o *Options) {
				o.TLSCipherSuites = []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_NOPE"}
			},
			expErr: "invalid options:\n  --tls-cipher-suites: \"TLS_NOPE\" is not a supported secure suite; choose from " + secureSuites,
		},
		"if a cipher suite is known but insecure, refuse it": {
			mod:    func(_ *testing.T, o *Options) { o.TLSCipherSuites = []string{"TLS_RSA_WITH_RC4_128_SHA"} },
			expErr: "invalid options:\n  --tls-cipher-suites: \"TLS_RSA_WITH_RC4_128_SHA\" is not a supported secure suite; choose from " + secureSuites,
		},
		"if --ca-max-stale is 0, name the flag": {
			mod:    func(_ *testing.T, o *Options) { o.CAMaxStale = 0 },
			expErr: "invalid options:\n  --ca-max-stale must be > 0, got 0s",
		},
		"if --config-reload-interval is below 100ms, name the flag": {
			mod:    func(_ *testing.T, o *Options) { o.ConfigReloadInterval = 10 * time.Millisecond },
			expErr: "invalid options:\n  --config-reload-interval must be >= 100ms, got 10ms",
		},
		"if --probe-interval is below 1s and not 0, name the flag": {
			mod:    func(_ *testing.T, o *Options) { o.ProbeInterval = 10 * time.Millisecond },
			expErr: "invalid options:\n  --probe-interval must be 0 (off) or >= 1s, got 10ms",
		},
		"if --log-format is unknown, name the accepted values": {
			mod:    func(_ *testing.T, o *Options) { o.LogFormat = "yaml" },
			expErr: "invalid options:\n  --log-format must be json or text, got \"yaml\"",
		},
		"if --leader-elect is set outside a cluster without a namespace, ask for it": {
			mod:           func(_ *testing.T, o *Options) { o.LeaderElect = true },
			expErr:        "invalid options:\n  --leader-election-namespace is required outside a cluster when --leader-elect is set",
			skipInCluster: true,
		},
		"if --leader-elect is set with a namespace, keep it": {
			mod: func(_ *testing.T, o *Options) {
				o.LeaderElect, o.LeaderElectionNamespace = true, "webhook-guard-system"
			},
			exp: func(t *testing.T, o *Options) {
				assert.Equal(t, "webhook-guard-system", o.LeaderElectionNamespace)
			},
		},
		"if several flags are wrong, report all of them, one per line": {
			mod: func(_ *testing.T, o *Options) {
				o.ConfigPath, o.Port, o.TLSMinVersion, o.LogFormat = "", 0, "VersionTLS10", ""
			},
			expErr: "invalid options:\n  --config is required: the GuardConfig file with the owner mappings\n  --port must be in 1..65535, got 0\n" +
				"  --tls-min-version must be VersionTLS12 or VersionTLS13, got \"VersionTLS10\"\n  --log-format must be json or text, got \"\"",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			if test.skipInCluster && inCluster {
				t.Skipf("%s exists: running in a cluster", saNamespaceFile)
			}
			o := validOptions(t)
			test.mod(t, &o)
			require.NoError(t, o.Complete(nil))
			err := o.Validate()
			if test.expErr != "" {
				require.EqualError(t, err, strings.ReplaceAll(test.expErr, "{dir}", o.CertDir))
				return
			}
			require.NoError(t, err)
			if test.exp != nil {
				test.exp(t, &o)
			}
		})
	}
}

func Test_Options_TLSConfig(t *testing.T) {
	tests := map[string]struct {
		minVersion string
		suites     []string
		exp        *tls.Config
	}{
		"if TLS 1.2 with Go's default suites is chosen, set MinVersion and offer h2 and http/1.1": {
			minVersion: "VersionTLS12",
			exp:        &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}},
		},
		"if TLS 1.3 and suites are chosen, set both": {
			minVersion: "VersionTLS13",
			suites:     []string{"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"},
			exp: &tls.Config{
				MinVersion:   tls.VersionTLS13,
				CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
				NextProtos:   []string{"h2", "http/1.1"},
			},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			o := &Options{TLSMinVersion: test.minVersion, TLSCipherSuites: test.suites}
			// controller-runtime starts from NextProtos h2 only.
			cfg := &tls.Config{NextProtos: []string{"h2"}}
			o.TLSConfig(cfg)
			assert.Equal(t, test.exp, cfg)
		})
	}
}

// Test_Options_AdmissionEndpoint: the static shape serves /validate (kube-
// apiserver calls it); --policy-mode serves none, since nothing calls it
// there and anyone on the pod network could post forged reviews that become
// records, Events and metrics; --admission-endpoint given explicitly wins.
// Without the endpoint no serving certificate is needed.
func Test_Options_AdmissionEndpoint(t *testing.T) {
	tests := map[string]struct {
		args   []string
		exp    bool
		expErr string
	}{
		"if no shape flag is given, serve the endpoint (static shape)": {args: nil, exp: true},
		"if --policy-mode is given, serve no endpoint":                 {args: []string{"--policy-mode"}, exp: false},
		"if --policy-mode and --admission-endpoint are given, serve it": {
			args: []string{"--policy-mode", "--admission-endpoint"}, exp: true,
		},
		"if --admission-endpoint=false is given, serve no endpoint": {args: []string{"--admission-endpoint=false"}, exp: false},
		"if the endpoint is served, --cert-dir is required": {
			args: []string{"--policy-mode", "--admission-endpoint", "--cert-dir="}, expErr: "invalid options:\n  --cert-dir is required: a directory holding tls.crt and tls.key (a mounted cert-manager Secret)",
		},
		"if no endpoint is served, --cert-dir is not needed": {args: []string{"--policy-mode", "--cert-dir="}, exp: false},
		"if --client-ca-file is given without an endpoint, say it has nothing to authenticate": {
			args:   []string{"--policy-mode", "--client-ca-file", "/etc/ca.crt"},
			expErr: "invalid options:\n  --client-ca-file authenticates callers of the admission endpoint, which is not served (--policy-mode without --admission-endpoint)",
		},
		"if --client-ca-file does not exist, name it": {
			args:   []string{"--client-ca-file", "/nonexistent/ca.crt"},
			expErr: "invalid options:\n  --client-ca-file: stat /nonexistent/ca.crt: no such file or directory",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			dir := validOptions(t).CertDir
			o := NewOptions()
			cmd := &cobra.Command{Use: "serve"}
			o.AddFlags(cmd)
			require.NoError(t, cmd.ParseFlags(append([]string{"--config", "/etc/guard.yaml", "--cert-dir", dir}, test.args...)))
			require.NoError(t, o.Complete(nil))
			err := o.Validate()
			if test.expErr != "" {
				require.EqualError(t, err, test.expErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, test.exp, o.AdmissionEndpoint)
		})
	}
}
