package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaults(t *testing.T) {
	c := Default()
	assert.Equal(t, TransportAuto, c.Transport)
	assert.Empty(t, c.Rails)
	assert.Equal(t, 1, c.Paths)
	assert.Equal(t, "warn", c.LogLevel)
	assert.Equal(t, 60*time.Second, c.StartupTimeout)
	assert.True(t, c.APM)
	assert.True(t, c.FT)
	assert.Equal(t, 64, c.OnDemandThreshold)
	assert.Equal(t, 50*time.Millisecond, c.AckTimeout)
	assert.Equal(t, 7, c.RetryCount)
	assert.Equal(t, int64(16<<10), c.StripeThreshold)
	assert.Equal(t, LogAuto, c.LogFormat)
	assert.Equal(t, 30*time.Second, c.PartitionTimeout, "finite: no operation waits forever for a partition to heal")
	assert.Equal(t, "/dev/shm", c.ShmDir)
	require.NoError(t, c.Validate())
}

// GOARMCI_PARTITION_TIMEOUT: unset or empty is the 30 s default; 0 (waiting until the
// operation's context ends) only when set explicitly.
func TestPartitionTimeoutDefault(t *testing.T) {
	for env, want := range map[string]time.Duration{"": 30 * time.Second, "GOARMCI_PARTITION_TIMEOUT=": 30 * time.Second,
		"GOARMCI_PARTITION_TIMEOUT=0": 0, "GOARMCI_PARTITION_TIMEOUT=0s": 0, "GOARMCI_PARTITION_TIMEOUT=5m": 5 * time.Minute} {
		c, _, err := FromEnviron([]string{env})
		require.NoError(t, err, env)
		assert.Equal(t, want, c.PartitionTimeout, env)
	}
	for _, k := range Knobs() {
		if k.Name == "GOARMCI_PARTITION_TIMEOUT" {
			assert.Equal(t, "30s", k.Default, "goarmci info prints the default")
		}
	}
}

func TestShmDir(t *testing.T) {
	c, _, err := FromEnviron([]string{"GOARMCI_SHM_DIR=/run/user/1000/goarmci/"})
	require.NoError(t, err)
	assert.Equal(t, "/run/user/1000/goarmci", c.ShmDir)
	for _, bad := range []string{"shm", "./x", " "} {
		_, _, err := FromEnviron([]string{"GOARMCI_SHM_DIR=" + bad})
		require.ErrorIs(t, err, ErrBadValue, bad)
		assert.Contains(t, err.Error(), "GOARMCI_SHM_DIR")
	}
	before := Default()
	c = before
	require.ErrorIs(t, c.Set("GOARMCI_SHM_DIR", "relative"), ErrBadValue)
	assert.Equal(t, before, c, "bad input changes nothing")
}

func TestKnobTable(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Knobs() {
		assert.True(t, strings.HasPrefix(k.Name, Prefix), k.Name)
		assert.False(t, seen[k.Name], "duplicate %s", k.Name)
		seen[k.Name] = true
		assert.NotEmpty(t, k.Doc, k.Name)
		assert.NotEmpty(t, k.Type, k.Name)
		if !k.Launcher {
			require.NotNil(t, k.get, k.Name)
			require.NotNil(t, k.set, k.Name)
			// The default round-trips through the printed value.
			c := Default()
			var d Config
			require.NoError(t, d.Set(k.Name, k.Value(&c)), k.Name)
			assert.Equal(t, k.Value(&c), k.Value(&d), k.Name)
		}
	}
	for _, n := range []string{"GOARMCI_RANK", "GOARMCI_SIZE", "GOARMCI_RDV", "GOARMCI_JOBID", "GOARMCI_TRANSPORT",
		"GOARMCI_RAILS", "GOARMCI_LOG_LEVEL", "GOARMCI_LOG_FILE", "GOARMCI_STARTUP_TIMEOUT", "GOARMCI_APM",
		"GOARMCI_ACK_TIMEOUT", "GOARMCI_RETRY_COUNT", "GOARMCI_PARTITION_TIMEOUT", "GOARMCI_STRIPE_POLICY",
		"GOARMCI_STRIPE_THRESHOLD", "GOARMCI_SHM_DIR"} {
		assert.True(t, seen[n], n)
	}
}

func TestFromEnviron(t *testing.T) {
	c, warns, err := FromEnviron([]string{
		"PATH=/bin",
		"GOARMCI_TRANSPORT=TCP",
		"GOARMCI_RAILS=eth0, eth1,,10.0.0.1:0",
		"GOARMCI_LOG_LEVEL=debug",
		"GOARMCI_LOG_FILE=/tmp/x-%r.log",
		"GOARMCI_STARTUP_TIMEOUT=5s",
		"GOARMCI_APM=off",
		"GOARMCI_ACK_TIMEOUT=10ms",
		"GOARMCI_RETRY_COUNT=3",
		"GOARMCI_PARTITION_TIMEOUT=2m",
		"GOARMCI_STRIPE_POLICY=BSS",
		"GOARMCI_STRIPE_THRESHOLD=1MiB",
		"GOARMCI_RANK=3", "GOARMCI_SIZE=4", "GOARMCI_RDV=127.0.0.1:9", "GOARMCI_JOBID=j",
		"GOARMCI_APN=1",
		"GOARMCI_WHATEVER_ELSE=1",
		"GOARMCI_LOG_FORMAT=", // empty = unset
	})
	require.NoError(t, err)
	assert.Equal(t, TransportTCP, c.Transport)
	assert.Equal(t, []string{"eth0", "eth1", "10.0.0.1:0"}, c.Rails)
	assert.Equal(t, "debug", c.LogLevel)
	assert.Equal(t, "/tmp/x-%r.log", c.LogFile)
	assert.Equal(t, LogAuto, c.LogFormat)
	assert.Equal(t, 5*time.Second, c.StartupTimeout)
	assert.False(t, c.APM)
	assert.Equal(t, 10*time.Millisecond, c.AckTimeout)
	assert.Equal(t, 3, c.RetryCount)
	assert.Equal(t, 2*time.Minute, c.PartitionTimeout)
	assert.Equal(t, "bss", c.StripePolicy)
	assert.Equal(t, int64(1<<20), c.StripeThreshold)
	require.Len(t, warns, 2)
	assert.Equal(t, "GOARMCI_APN", warns[0].Var)
	assert.Contains(t, warns[0].Msg, "did you mean GOARMCI_APM")
	assert.Equal(t, "GOARMCI_WHATEVER_ELSE", warns[1].Var)
}

func TestFromEnvironBadValues(t *testing.T) {
	cases := map[string]string{
		"GOARMCI_TRANSPORT":         "udp",
		"GOARMCI_LOG_LEVEL":         "loud",
		"GOARMCI_STARTUP_TIMEOUT":   "60",
		"GOARMCI_APM":               "maybe",
		"GOARMCI_ACK_TIMEOUT":       "-1s",
		"GOARMCI_RETRY_COUNT":       "x",
		"GOARMCI_PARTITION_TIMEOUT": "forever",
		"GOARMCI_STRIPE_THRESHOLD":  "16 parsecs",
		"GOARMCI_LOG_FORMAT":        "xml",
		"GOARMCI_STRIPE_POLICY":     "a,b",
		"GOARMCI_RAILS":             "eth0,a b",
		"GOARMCI_BARRIER":           "tournament",
	}
	for name, val := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := FromEnviron([]string{name + "=" + val})
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrBadValue))
			assert.Contains(t, err.Error(), name)
		})
	}
	// Several bad values: every one is named.
	_, _, err := FromEnviron([]string{"GOARMCI_APM=2", "GOARMCI_RETRY_COUNT=-1"})
	require.ErrorIs(t, err, ErrBadValue)
	assert.Contains(t, err.Error(), "GOARMCI_APM")
	assert.Contains(t, err.Error(), "GOARMCI_RETRY_COUNT")
}

func TestFromEnvUsesProcessEnv(t *testing.T) {
	t.Setenv("GOARMCI_RETRY_COUNT", "11")
	c, _, err := FromEnv()
	require.NoError(t, err)
	assert.Equal(t, 11, c.RetryCount)
}

func TestSetGetValidate(t *testing.T) {
	c := Default()
	require.NoError(t, c.Set("GOARMCI_STRIPE_THRESHOLD", "64k"))
	v, err := c.Get("GOARMCI_STRIPE_THRESHOLD")
	require.NoError(t, err)
	assert.Equal(t, "64KiB", v)

	before := c
	err = c.Set("GOARMCI_APM", "perhaps")
	require.ErrorIs(t, err, ErrBadValue)
	assert.Equal(t, before, c, "failed Set changes nothing")
	require.ErrorIs(t, c.Set("GOARMCI_NOPE", "1"), ErrUnknownKnob)
	require.ErrorIs(t, c.Set("GOARMCI_RANK", "1"), ErrUnknownKnob, "launcher variables are not config")

	c.Transport = "carrier-pigeon"
	c.RetryCount = -2
	err = c.Validate()
	require.ErrorIs(t, err, ErrBadValue)
	assert.Contains(t, err.Error(), "GOARMCI_TRANSPORT")
	assert.Contains(t, err.Error(), "GOARMCI_RETRY_COUNT")
}

func TestParseBytes(t *testing.T) {
	good := map[string]int64{"0": 0, "4096": 4096, "16K": 16 << 10, "16KiB": 16 << 10, "1mib": 1 << 20,
		"2G": 2 << 30, "1M": 1 << 20, "1MiB": 1 << 20, "3m": 3 << 20, "1T": 1 << 40, "7b": 7, " 8 KiB ": 8 << 10}
	for s, want := range good {
		got, err := ParseBytes(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "-1", "1.5K", "K", "1Q", "9999999999999T"} {
		_, err := ParseBytes(s)
		assert.Error(t, err, s)
	}
	// One convention: decimal units are rejected, with the binary spelling in the message.
	for s, hint := range map[string]string{"1MB": "1MiB", "16kB": "16KiB", "2gb": "2GiB", "1 TB": "1TiB"} {
		_, err := ParseBytes(s)
		require.Error(t, err, s)
		assert.Contains(t, err.Error(), hint, s)
		assert.Contains(t, err.Error(), "ambiguous", s)
	}
	var c Config
	err := c.Set("GOARMCI_STRIPE_THRESHOLD", "1MB")
	assert.ErrorIs(t, err, ErrBadValue)
	require.NoError(t, c.Set("GOARMCI_STRIPE_THRESHOLD", "1M"))
	v, _ := c.Get("GOARMCI_STRIPE_THRESHOLD")
	assert.Equal(t, "1MiB", v)
	assert.Equal(t, "1MiB", FormatBytes(1<<20))
	assert.Equal(t, "1000", FormatBytes(1000))
	assert.Equal(t, "0", FormatBytes(0))
}

func TestSections(t *testing.T) {
	RegisterSection(Section{Title: "b", Order: 1})
	RegisterSection(Section{Title: "a", Order: 2})
	RegisterSection(Section{Title: "c", Order: 1})
	RegisterSection(Section{Title: "b", Order: 3}) // replaces
	var titles []string
	for _, s := range Sections() {
		titles = append(titles, s.Title)
	}
	assert.Equal(t, []string{"c", "a", "b"}, titles)
}
