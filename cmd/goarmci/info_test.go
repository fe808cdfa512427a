package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/internal/config"
)

// badKnobValues holds a bad value for every knob that can have one; TestInfoExitsOneForEachBadKnob
// fails when a knob is added without one here (or in anyValue).
var badKnobValues = map[string]string{
	"GOARMCI_TRANSPORT":           "ib",
	"GOARMCI_SHM_DIR":             "relative/dir",
	"GOARMCI_RAILS":               "eth0,eth 1",
	"GOARMCI_PATHS":               "0",
	"GOARMCI_LOG_LEVEL":           "loud",
	"GOARMCI_LOG_FORMAT":          "xml",
	"GOARMCI_STARTUP_TIMEOUT":     "0s",
	"GOARMCI_FT":                  "maybe",
	"GOARMCI_ON_DEMAND_THRESHOLD": "-1",
	"GOARMCI_BARRIER":             "tournament",
	"GOARMCI_BARRIER_FANIN":       "16",
	"GOARMCI_APM":                 "2",
	"GOARMCI_APM_TEST":            "-1s",
	"GOARMCI_ACK_TIMEOUT":         "fast",
	"GOARMCI_RETRY_COUNT":         "many",
	"GOARMCI_PARTITION_TIMEOUT":   "forever",
	"GOARMCI_FAILURE_TIMEOUT":     "-2s",
	"GOARMCI_TCP_POLL":            "2s",
	"GOARMCI_STRIPE_POLICY":       "even,bss",
	"GOARMCI_STRIPE_THRESHOLD":    "1MB",
	"GOARMCI_STATS":               "sometimes",
	"GOARMCI_NET_TRANSPORT":       "ud",
	"GOARMCI_BIND":                "socket",
	"GOARMCI_MAX_RC":              "-1",
	"GOARMCI_RC_WINDOW":           "0s",
	"GOARMCI_RC_GAMMA":            "-1ns",
	"GOARMCI_RC_IDLE_TIMEOUT":     "0s",
	// Launcher variables.
	config.EnvRank:      "first",
	config.EnvSize:      "-2",
	config.EnvRDV:       "nohost",
	config.EnvLocalRank: "x",
	config.EnvLocalSize: "1.5",
	config.EnvRDVDir:    "relative/dir",
	config.EnvJobSecret: "not-hex",
}

// anyValue are knobs every value of which is valid.
var anyValue = map[string]bool{"GOARMCI_LOG_FILE": true, config.EnvJobID: true, config.EnvHostID: true}

// clearGoarmciEnv unsets every GOARMCI_* variable for the test.
func clearGoarmciEnv(t *testing.T) {
	for _, k := range config.Knobs() {
		t.Setenv(k.Name, "")
	}
}

// TestInfoHidesJobSecret: goarmci info says the job secret is set, never what it is.
func TestInfoHidesJobSecret(t *testing.T) {
	clearGoarmciEnv(t)
	const s = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	t.Setenv(config.EnvJobSecret, s)
	_, out, errOut := runCLI(t, "info")
	assert.NotContains(t, out+errOut, s[:16])
	assert.Contains(t, out, config.EnvJobSecret)
}

func TestInfoExitsOneForEachBadKnob(t *testing.T) {
	for _, k := range config.Knobs() {
		bad, ok := badKnobValues[k.Name]
		if anyValue[k.Name] {
			continue
		}
		require.True(t, ok, "no bad value for %s in badKnobValues", k.Name)
		t.Run(k.Name, func(t *testing.T) {
			clearGoarmciEnv(t)
			if k.Name == config.EnvSize {
				t.Setenv(config.EnvRank, "0")
			}
			if k.Name == config.EnvRank {
				t.Setenv(config.EnvSize, "2")
			}
			t.Setenv(k.Name, bad)
			code, out, errOut := runCLI(t, "info")
			assert.Equal(t, 1, code, "%s=%q: %s", k.Name, bad, errOut)
			assert.Contains(t, errOut, k.Name, "the error names the variable")
			assert.Contains(t, out, "== configuration", "the whole report is printed first")
		})
	}
}

func TestInfoGoodEnvironment(t *testing.T) {
	clearGoarmciEnv(t)
	t.Setenv("GOARMCI_STRIPE_THRESHOLD", "1M")
	t.Setenv("GOARMCI_TRANSPORT", "tcp")
	code, out, errOut := runCLI(t, "info")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^GOARMCI_STRIPE_THRESHOLD +1MiB +16KiB +bytes`, out)
	assert.Contains(t, out, "sizes: "+config.ByteSizes)
	assert.NotContains(t, out, "warning:")
}

func TestInfoWarnsAboutUnknownVariables(t *testing.T) {
	clearGoarmciEnv(t)
	t.Setenv("GOARMCI_STRIPE_TRESHOLD", "64K")
	t.Setenv("GOARMCI_NOT_A_KNOB", "1")
	code, out, errOut := runCLI(t, "info")
	require.Equal(t, 0, code, "unknown variables warn, they do not fail: %s", errOut)
	assert.Contains(t, out, "warning: GOARMCI_STRIPE_TRESHOLD: unknown goarmci variable, ignored; did you mean GOARMCI_STRIPE_THRESHOLD?")
	assert.Contains(t, out, "warning: GOARMCI_NOT_A_KNOB: unknown goarmci variable, ignored")
	assert.Equal(t, 2, strings.Count(out, "warning: "))
}
