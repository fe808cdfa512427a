package logx

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/internal/config"
)

func TestLevelAndRankField(t *testing.T) {
	c := config.Default()
	var buf bytes.Buffer
	log, closer, err := NewTo(&c, 3, &buf)
	require.NoError(t, err)
	defer closer.Close()
	log.Info().Msg("hidden at warn")
	log.Warn().Str("k", "v").Msg("shown")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 1)
	var ev map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &ev))
	assert.Equal(t, "shown", ev["message"])
	assert.Equal(t, float64(3), ev["rank"])
	assert.Equal(t, "warn", ev["level"])
}

func TestFileWithRankPattern(t *testing.T) {
	dir := t.TempDir()
	c := config.Default()
	require.NoError(t, c.Set("GOARMCI_LOG_LEVEL", "debug"))
	require.NoError(t, c.Set("GOARMCI_LOG_FILE", filepath.Join(dir, "log-%r.txt")))
	log, closer, err := New(&c, 5)
	require.NoError(t, err)
	log.Debug().Msg("to file")
	require.NoError(t, closer.Close())
	b, err := os.ReadFile(filepath.Join(dir, "log-5.txt"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"message":"to file"`)
	assert.Contains(t, string(b), `"rank":5`)
}

func TestConsoleNoRank(t *testing.T) {
	c := config.Default()
	c.LogFormat = config.LogConsole
	var buf bytes.Buffer
	log, _, err := NewTo(&c, -1, &buf)
	require.NoError(t, err)
	log.Error().Msg("boom")
	assert.Contains(t, buf.String(), "boom")
	assert.NotContains(t, buf.String(), "rank")
}

func TestErrors(t *testing.T) {
	c := config.Default()
	c.LogLevel = "loud"
	_, _, err := New(&c, 0)
	require.ErrorIs(t, err, config.ErrBadValue)

	c = config.Default()
	c.LogFile = filepath.Join(t.TempDir(), "missing-dir", "x.log")
	_, _, err = New(&c, 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "GOARMCI_LOG_FILE")
}

func TestConsoleChoice(t *testing.T) {
	for _, tc := range []struct {
		f    config.LogFormat
		tty  bool
		want bool
	}{
		{config.LogAuto, true, true}, {config.LogAuto, false, false}, {"", true, true}, {"", false, false},
		{config.LogJSON, true, false}, {config.LogJSON, false, false},
		{config.LogConsole, true, true}, {config.LogConsole, false, true},
	} {
		assert.Equal(t, tc.want, Console(tc.f, tc.tty), "format %q, terminal %v", tc.f, tc.tty)
	}
}

// The default (auto) writes JSON to anything that is not a terminal; console on request.
func TestAutoFormatOffTerminal(t *testing.T) {
	c := config.Default()
	require.Equal(t, config.LogAuto, c.LogFormat)
	var buf bytes.Buffer
	log, _, err := NewTo(&c, 1, &buf)
	require.NoError(t, err)
	log.Warn().Int("peer", 2).Msg("x")
	var ev map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &ev))
	assert.Equal(t, float64(2), ev["peer"])

	require.NoError(t, c.Set("GOARMCI_LOG_FORMAT", "console"))
	buf.Reset()
	log, _, err = NewTo(&c, 1, &buf)
	require.NoError(t, err)
	log.Warn().Int("peer", 2).Msg("x")
	assert.Contains(t, buf.String(), "peer=2")
	assert.Contains(t, buf.String(), "rank=1")
}
