package webhook

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"

	"github.com/webhook-guard/webhook-guard/policy"
)

// LoadConfigFile reads and loads a GuardConfig file; errors name the file.
func LoadConfigFile(path string) (*policy.Mappings, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("config %s: %w", path, err)
	}
	cfg, err := policy.Load(data)
	if err != nil {
		return nil, data, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, data, nil
}

// ConfigReloader re-reads the config file when its content changes. A file
// that fails to load is logged and counted, and the last good configuration
// stays in force. It polls rather than relying on inotify alone because a
// mounted ConfigMap changes by swapping a symlinked directory, which a
// content comparison catches reliably.
type ConfigReloader struct {
	Path     string
	Store    *ConfigStore
	Interval time.Duration
	Metrics  *Metrics
	Log      logr.Logger
	// OnReload runs after a new configuration is put in force.
	OnReload func(*policy.Mappings)

	last []byte
}

// NewConfigReloader starts from the content already loaded.
func NewConfigReloader(path string, loaded []byte, store *ConfigStore, interval time.Duration, m *Metrics, log logr.Logger) *ConfigReloader {
	return &ConfigReloader{Path: path, Store: store, Interval: interval, Metrics: m, Log: log, last: loaded}
}

// Start polls until ctx ends; it implements manager.Runnable.
func (r *ConfigReloader) Start(ctx context.Context) error {
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			r.Check()
		}
	}
}

// NeedLeaderElection: every replica must follow its own config file.
func (r *ConfigReloader) NeedLeaderElection() bool { return false }

// Check reloads the file if its content changed.
func (r *ConfigReloader) Check() {
	data, err := os.ReadFile(r.Path)
	if err != nil {
		if !bytes.Equal(r.last, nil) {
			r.fail(fmt.Errorf("config %s: %w", r.Path, err))
			r.last = nil
		}
		return
	}
	if bytes.Equal(data, r.last) {
		return
	}
	r.last = data
	cfg, err := policy.Load(data)
	if err != nil {
		r.fail(fmt.Errorf("config %s: %w", r.Path, err))
		return
	}
	r.Store.Set(cfg)
	r.Metrics.ConfigReloads.WithLabelValues("success").Inc()
	r.Metrics.ConfigLastReloadSuccess.Set(1)
	r.Log.Info("configuration reloaded", "path", r.Path, "owners", len(cfg.Spec.Owners), "defaultMode", cfg.Spec.DefaultMode)
	if r.OnReload != nil {
		r.OnReload(cfg)
	}
}

func (r *ConfigReloader) fail(err error) {
	r.Metrics.ConfigReloads.WithLabelValues("error").Inc()
	r.Metrics.ConfigLastReloadSuccess.Set(0)
	r.Log.Error(err, "rejected the new configuration; the last good one stays in force")
}
