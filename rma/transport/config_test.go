package transport

import (
	"errors"
	"strings"
	"testing"
	"time"
)

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

// Validate names every bad field's knob and wraps ErrBadConfig; the defaults are valid.
func TestConfigValidateNamesKnobs(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	c := DefaultConfig()
	c.MaxRC, c.Window, c.Gamma, c.IdleTimeout = -1, time.Microsecond, -time.Nanosecond, time.Nanosecond
	err := c.Validate()
	if !errors.Is(err, ErrBadConfig) {
		t.Fatalf("bad config: %v", err)
	}
	for _, knob := range []string{EnvMaxRC, EnvWindow, EnvGamma, EnvIdleTimeout} {
		if !strings.Contains(err.Error(), knob) {
			t.Errorf("error does not name %s: %v", knob, err)
		}
	}
}
