package webhook

import (
	"sync/atomic"

	"github.com/webhook-guard/webhook-guard/policy"
)

// ConfigSource gives the configuration in force.
type ConfigSource interface {
	Current() *policy.Mappings
}

// StaticConfig is a ConfigSource that never changes (check CLI, tests).
type StaticConfig struct{ Config *policy.Mappings }

// Current implements ConfigSource.
func (s StaticConfig) Current() *policy.Mappings { return s.Config }

// ConfigStore holds the configuration in force; a reload swaps it atomically,
// so a request is always decided against one whole configuration.
type ConfigStore struct {
	cur atomic.Pointer[policy.Mappings]
}

// NewConfigStore starts with cfg in force.
func NewConfigStore(cfg *policy.Mappings) *ConfigStore {
	s := &ConfigStore{}
	s.cur.Store(cfg)
	return s
}

// Current implements ConfigSource.
func (s *ConfigStore) Current() *policy.Mappings { return s.cur.Load() }

// Set puts cfg in force.
func (s *ConfigStore) Set(cfg *policy.Mappings) { s.cur.Store(cfg) }
