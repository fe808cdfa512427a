package transport

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigFromEnviron(t *testing.T) {
	def := DefaultConfig()
	if err := def.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	tests := []struct {
		name    string
		env     []string
		want    func(*Config)
		badKnob []string // knobs the error must name
	}{
		{"none set", []string{"PATH=/bin", "GOARMCI_PATHS=2"}, func(*Config) {}, nil},
		{"empty counts as unset", []string{"GOARMCI_MAX_RC= "}, func(*Config) {}, nil},
		{"all set", []string{"GOARMCI_MAX_RC=4", "GOARMCI_RC_WINDOW=500ms", "GOARMCI_RC_GAMMA=10ns", "GOARMCI_RC_IDLE_TIMEOUT=3s"},
			func(c *Config) {
				c.MaxRC, c.Window, c.Gamma, c.IdleTimeout = 4, 500*time.Millisecond, 10*time.Nanosecond, 3*time.Second
			}, nil},
		{"h = 0: shared only", []string{"GOARMCI_MAX_RC=0"}, func(c *Config) { c.MaxRC = 0 }, nil},
		{"not a number", []string{"GOARMCI_MAX_RC=many"}, nil, []string{EnvMaxRC}},
		{"negative h", []string{"GOARMCI_MAX_RC=-1"}, nil, []string{EnvMaxRC}},
		{"h too large", []string{"GOARMCI_MAX_RC=70000"}, nil, []string{EnvMaxRC}},
		{"window too short", []string{"GOARMCI_RC_WINDOW=10us"}, nil, []string{EnvWindow}},
		{"window not a duration", []string{"GOARMCI_RC_WINDOW=2"}, nil, []string{EnvWindow}},
		{"negative gamma", []string{"GOARMCI_RC_GAMMA=-1ns"}, nil, []string{EnvGamma}},
		{"idle timeout zero", []string{"GOARMCI_RC_IDLE_TIMEOUT=0s"}, nil, []string{EnvIdleTimeout}},
		{"idle timeout under the window", []string{"GOARMCI_RC_IDLE_TIMEOUT=1s", "GOARMCI_RC_WINDOW=5s"}, nil, []string{EnvIdleTimeout}},
		{"every bad value reported", []string{"GOARMCI_MAX_RC=x", "GOARMCI_RC_GAMMA=y"}, nil, []string{EnvMaxRC, EnvGamma}},
	}
	for _, tt := range tests {
		got, err := ConfigFromEnviron(tt.env)
		if tt.badKnob != nil {
			if !errors.Is(err, ErrBadConfig) {
				t.Errorf("%s: err %v, want ErrBadConfig", tt.name, err)
				continue
			}
			for _, k := range tt.badKnob {
				if !strings.Contains(err.Error(), k) {
					t.Errorf("%s: error %q does not name %s", tt.name, err, k)
				}
			}
			if got != (Config{}) {
				t.Errorf("%s: a bad environment returned %+v", tt.name, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		want := def
		tt.want(&want)
		if got != want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, want)
		}
	}
}

func TestConfigValidateCosts(t *testing.T) {
	c := DefaultConfig()
	c.Costs.RingEntries = 0
	if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
		t.Errorf("no ring entries: %v", err)
	}
	if _, err := NewSelector(4, c); !errors.Is(err, ErrBadConfig) {
		t.Errorf("NewSelector with bad costs: %v", err)
	}
}
