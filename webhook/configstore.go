package webhook

import (
	"sync/atomic"

	"github.com/webhook-guard/webhook-guard/policy"
)

// ConfigSource gives the configuration in force.
type ConfigSource interface {
	Current() *policy.Config
}

// StaticConfig is a ConfigSource that never changes (check CLI, tests).
type StaticConfig struct{ Config *policy.Config }

// Current implements ConfigSource.
func (s StaticConfig) Current() *policy.Config { return s.Config }

// ConfigStore holds the configuration in force; a reload swaps it atomically,
// so a request is always decided against one whole configuration.
type ConfigStore struct {
	cur atomic.Pointer[policy.Config]
}

// NewConfigStore starts with cfg in force.
func NewConfigStore(cfg *policy.Config) *ConfigStore {
	s := &ConfigStore{}
	s.cur.Store(cfg)
	return s
}

// Current implements ConfigSource.
func (s *ConfigStore) Current() *policy.Config { return s.cur.Load() }

// Set puts cfg in force.
func (s *ConfigStore) Set(cfg *policy.Config) { s.cur.Store(cfg) }
