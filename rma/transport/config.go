package transport

import (
	"errors"
	"fmt"
	"time"
)

// The environment variables of the selection (internal/config parses them for rma; Validate's
// errors name them).
const (
	// EnvMaxRC bounds the RC connections a rank keeps open (h of [Takagi15 §3.2]); 0 keeps every
	// network peer on the shared path.
	EnvMaxRC = "GOARMCI_MAX_RC"
	// EnvWindow is the length of the statistics window the selection looks back over.
	EnvWindow = "GOARMCI_RC_WINDOW"
	// EnvGamma is γ, the latency reduction per message a new mapping must promise over the
	// current one before it is applied [Takagi15 §3.4 T4].
	EnvGamma = "GOARMCI_RC_GAMMA"
	// EnvIdleTimeout is how long an RC connection may carry no message before it is evicted.
	EnvIdleTimeout = "GOARMCI_RC_IDLE_TIMEOUT"
)

// MaxRCLimit bounds GOARMCI_MAX_RC.
const MaxRCLimit = 1 << 16

// Config configures a Selector.
type Config struct {
	MaxRC       int           // h: RC connections open at most (pooled ones included), 0..MaxRCLimit
	Window      time.Duration // statistics window, ≥ 1 ms
	Gamma       time.Duration // γ: per-message reduction a new mapping must exceed, ≥ 0
	IdleTimeout time.Duration // an RC connection idle longer than this is evicted, ≥ Window
	Costs       Costs
}

// DefaultConfig returns h = 26 and γ = 25 ns [Takagi15 Table 2], a 2 s window (twice the
// evaluation period of about a second, [Takagi15 §3.4]), a 10 s idle timeout and DefaultCosts.
func DefaultConfig() Config {
	return Config{MaxRC: 26, Window: 2 * time.Second, Gamma: 25 * time.Nanosecond,
		IdleTimeout: 10 * time.Second, Costs: DefaultCosts()}
}

// Validate checks every field; the error wraps ErrBadConfig and names each bad field.
func (c Config) Validate() error {
	var errs []error
	bad := func(knob, want string, v any) {
		errs = append(errs, fmt.Errorf("%w: %s = %v: want %s", ErrBadConfig, knob, v, want))
	}
	if c.MaxRC < 0 || c.MaxRC > MaxRCLimit {
		bad(EnvMaxRC, fmt.Sprintf("an integer in [0, %d]", MaxRCLimit), c.MaxRC)
	}
	if c.Window < time.Millisecond {
		bad(EnvWindow, "a duration of at least 1ms", c.Window)
	}
	if c.Gamma < 0 {
		bad(EnvGamma, "a duration of at least 0", c.Gamma)
	}
	if c.IdleTimeout <= 0 || c.IdleTimeout < c.Window {
		// Shorter than the window, an evicted peer's old traffic would promote it again.
		bad(EnvIdleTimeout, "a positive duration, at least the window ("+EnvWindow+")", c.IdleTimeout)
	}
	k := c.Costs
	if k.RCGain < 0 || k.Credit < 0 || k.Poll < 0 || k.Setup < 0 || k.Reuse < 0 || k.RingEntries < 1 {
		bad("Costs", "non-negative costs and at least one ring entry", k)
	}
	return errors.Join(errs...)
}
