package webhook

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

const (
	reloadDocAudit = `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
owners:
- name: koordinator
  match: {validating: [koord]}
  writers: {serviceAccounts: [koordinator-system/koord-manager]}
  ca: {secret: {namespace: koordinator-system, name: webhook-certs}}
`
	reloadDocEnforce = `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
defaultMode: enforce
owners:
- name: koordinator
  match: {validating: [koord]}
  writers: {serviceAccounts: [koordinator-system/koord-manager]}
  ca: {secret: {namespace: koordinator-system, name: webhook-certs}}
`
	reloadDocUnknownField = `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
defaultMode: enforce
owners:
- name: koordinator
  match: {validating: [koord]}
  writer: {serviceAccounts: [koordinator-system/koord-manager]}
  ca: {secret: {namespace: koordinator-system, name: webhook-certs}}
`
)

// reloaderEnv is a config file, a store and a reloader started from the
// file's first content, with captured log lines and reload callbacks.
type reloaderEnv struct {
	path     string
	store    *ConfigStore
	initial  *policy.Mappings
	metrics  *Metrics
	reloader *ConfigReloader

	mu       sync.Mutex
	logs     []string
	reloaded []*policy.Mappings
}

func newReloaderEnv(t *testing.T, doc string) *reloaderEnv {
	t.Helper()
	e := &reloaderEnv{path: filepath.Join(t.TempDir(), "guard.yaml")}
	e.write(t, doc)
	cfg, data, err := LoadConfigFile(e.path)
	require.NoError(t, err)
	e.initial, e.store, e.metrics = cfg, NewConfigStore(cfg), NewMetrics(prometheus.NewRegistry())
	log := funcr.New(func(_, args string) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.logs = append(e.logs, args)
	}, funcr.Options{})
	e.reloader = NewConfigReloader(e.path, data, e.store, 10*time.Millisecond, e.metrics, log)
	e.reloader.OnReload = func(c *policy.Mappings) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.reloaded = append(e.reloaded, c)
	}
	return e
}

// write replaces the file the way a ConfigMap mount changes: a new file
// renamed into place.
func (e *reloaderEnv) write(t *testing.T, doc string) {
	t.Helper()
	tmp := e.path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(doc), 0o600))
	require.NoError(t, os.Rename(tmp, e.path))
}

func (e *reloaderEnv) counts(t *testing.T) (success, failure, lastOK float64) {
	t.Helper()
	return toFloat64(t, e.metrics.ConfigReloads.WithLabelValues("success")),
		toFloat64(t, e.metrics.ConfigReloads.WithLabelValues("error")),
		toFloat64(t, e.metrics.ConfigLastReloadSuccess)
}

func (e *reloaderEnv) logLines() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.logs...)
}

func Test_ConfigReloader_Check(t *testing.T) {
	t.Run("if the file changed to a valid config, put it in force, count a success and call OnReload", func(t *testing.T) {
		e := newReloaderEnv(t, reloadDocAudit)
		e.write(t, reloadDocEnforce)

		e.reloader.Check()

		require.NotSame(t, e.initial, e.store.Current())
		assert.Equal(t, guardapi.ModeEnforce, e.store.Current().Spec.DefaultMode)
		assert.Equal(t, []*policy.Mappings{e.store.Current()}, e.reloaded)
		success, failure, lastOK := e.counts(t)
		assert.Equal(t, []float64{1, 0, 1}, []float64{success, failure, lastOK})
		assert.Equal(t, []string{`"level"=0 "msg"="configuration reloaded" "path"="` + e.path + `" "owners"=1 "defaultMode"="enforce"`}, e.logLines())
	})

	t.Run("if the file is unchanged, do not reload it", func(t *testing.T) {
		e := newReloaderEnv(t, reloadDocAudit)
		e.write(t, reloadDocAudit) // same content, new inode

		e.reloader.Check()
		e.reloader.Check()

		assert.Same(t, e.initial, e.store.Current())
		assert.Empty(t, e.reloaded)
		success, failure, lastOK := e.counts(t)
		assert.Equal(t, []float64{0, 0, 1}, []float64{success, failure, lastOK})
		assert.Empty(t, e.logLines())
	})

	t.Run("if the same new content is checked twice, reload it once", func(t *testing.T) {
		e := newReloaderEnv(t, reloadDocAudit)
		e.write(t, reloadDocEnforce)

		e.reloader.Check()
		first := e.store.Current()
		e.reloader.Check()

		assert.Same(t, first, e.store.Current())
		assert.Len(t, e.reloaded, 1)
		success, _, _ := e.counts(t)
		assert.Equal(t, 1.0, success)
	})

	t.Run("if the new file has an unknown field, reject it, count an error, keep the last good config, and do not retry the same content", func(t *testing.T) {
		e := newReloaderEnv(t, reloadDocAudit)
		e.write(t, reloadDocUnknownField)

		e.reloader.Check()
		e.reloader.Check()

		assert.Same(t, e.initial, e.store.Current(), "the last good configuration stays in force")
		assert.Empty(t, e.reloaded)
		success, failure, lastOK := e.counts(t)
		assert.Equal(t, []float64{0, 1, 0}, []float64{success, failure, lastOK})
		assert.Equal(t, []string{
			`"msg"="rejected the new configuration; the last good one stays in force" "error"="config ` + e.path + `: cannot decode GuardConfig: unknown field \"owners[0].writer\""`,
		}, e.logLines())

		// Fixing the file puts it in force and clears the failure gauge.
		e.write(t, reloadDocEnforce)
		e.reloader.Check()
		assert.Equal(t, guardapi.ModeEnforce, e.store.Current().Spec.DefaultMode)
		success, failure, lastOK = e.counts(t)
		assert.Equal(t, []float64{1, 1, 1}, []float64{success, failure, lastOK})
	})

	t.Run("if the file is deleted, keep the last good config and report the failure once", func(t *testing.T) {
		e := newReloaderEnv(t, reloadDocAudit)
		require.NoError(t, os.Remove(e.path))

		e.reloader.Check()
		e.reloader.Check()

		assert.Same(t, e.initial, e.store.Current())
		success, failure, lastOK := e.counts(t)
		assert.Equal(t, []float64{0, 1, 0}, []float64{success, failure, lastOK})
		assert.Equal(t, []string{
			`"msg"="rejected the new configuration; the last good one stays in force" "error"="config ` + e.path + `: open ` + e.path + `: no such file or directory"`,
		}, e.logLines())

		// When the file comes back, it is loaded again.
		e.write(t, reloadDocAudit)
		e.reloader.Check()
		require.NotSame(t, e.initial, e.store.Current())
		assert.Equal(t, guardapi.ModeAudit, e.store.Current().Spec.DefaultMode)
		success, failure, lastOK = e.counts(t)
		assert.Equal(t, []float64{1, 1, 1}, []float64{success, failure, lastOK})
	})
}

func Test_ConfigReloader_Start(t *testing.T) {
	e := newReloaderEnv(t, reloadDocAudit)
	assert.False(t, e.reloader.NeedLeaderElection(), "every replica follows its own file")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.reloader.Start(ctx) }()

	e.write(t, reloadDocEnforce)
	require.Eventually(t, func() bool {
		return e.store.Current().Spec.DefaultMode == guardapi.ModeEnforce
	}, 5*time.Second, 5*time.Millisecond, "the poller picks up the change")

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Start did not return after its context ended")
	}
}

func Test_LoadConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(doc), 0o600))
		return p
	}
	valid := write("valid.yaml", reloadDocEnforce)
	invalid := write("invalid.yaml", reloadDocUnknownField)
	missing := filepath.Join(dir, "missing.yaml")

	tests := map[string]struct {
		path     string
		expMode  guardapi.Mode
		expData  string
		expErr   string
		expNoCfg bool
	}{
		"if the file is valid, return the config and its content": {
			path: valid, expMode: guardapi.ModeEnforce, expData: reloadDocEnforce,
		},
		"if the file does not decode, return an error naming the file, and its content": {
			path: invalid, expData: reloadDocUnknownField, expNoCfg: true,
			expErr: "config " + invalid + `: cannot decode GuardConfig: unknown field "owners[0].writer"`,
		},
		"if the file does not exist, return an error naming the file": {
			path: missing, expNoCfg: true,
			expErr: "config " + missing + ": open " + missing + ": no such file or directory",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, data, err := LoadConfigFile(test.path)
			if test.expErr != "" {
				require.EqualError(t, err, test.expErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, test.expData, string(data))
			if test.expNoCfg {
				assert.Nil(t, cfg)
				return
			}
			assert.Equal(t, test.expMode, cfg.Spec.DefaultMode)
		})
	}
}

func Test_ConfigStore(t *testing.T) {
	f := testFixtures(t)
	a, b := mustLoad(t, guardConfigDoc(f)), mustLoad(t, reloadDocAudit)
	s := NewConfigStore(a)
	assert.Same(t, a, s.Current())
	s.Set(b)
	assert.Same(t, b, s.Current())
	assert.Same(t, a, StaticConfig{Config: a}.Current())
	var _ ConfigSource = s
}
