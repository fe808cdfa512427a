// Package logx builds goarmci's zerolog logger from the configuration (GOARMCI_LOG_LEVEL,
// GOARMCI_LOG_FILE, GOARMCI_LOG_FORMAT): level, destination (file or stderr), encoding (console
// lines on a terminal, JSON otherwise, unless the knob says), and a "rank" field on every event.
package logx

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/term"

	"github.com/goarmci/goarmci/internal/config"
)

// New returns a logger for this rank (rank < 0: no rank field) following c.LogLevel,
// c.LogFile ("" = stderr; "%r" replaced by the rank) and c.LogFormat (auto: console when the
// destination is a terminal, JSON otherwise). The returned Closer
// closes the log file (a no-op for stderr); call it at finalize. Errors wrap
// config.ErrBadValue for an unknown level or the file's open error.
func New(c *config.Config, rank int) (zerolog.Logger, io.Closer, error) {
	return NewTo(c, rank, nil)
}

// NewTo is New writing to w instead of the configured file or stderr (w == nil: as New).
func NewTo(c *config.Config, rank int, w io.Writer) (zerolog.Logger, io.Closer, error) {
	level := zerolog.WarnLevel
	if c.LogLevel != "" {
		l, err := zerolog.ParseLevel(c.LogLevel)
		if err != nil {
			return zerolog.Nop(), nopCloser{}, fmt.Errorf("%w: GOARMCI_LOG_LEVEL=%q", config.ErrBadValue, c.LogLevel)
		}
		level = l
	}
	var closer io.Closer = nopCloser{}
	tty := false
	if w == nil {
		w = os.Stderr
		tty = term.IsTerminal(int(os.Stderr.Fd()))
		if c.LogFile != "" {
			tty = false
			name := FileName(c.LogFile, rank)
			f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
			if err != nil {
				return zerolog.Nop(), nopCloser{}, fmt.Errorf("logx: GOARMCI_LOG_FILE: %w", err)
			}
			w, closer = f, f
		}
	}
	if Console(c.LogFormat, tty) {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly + ".000", NoColor: !tty}
	}
	ctx := zerolog.New(w).Level(level).With().Timestamp()
	if rank >= 0 {
		ctx = ctx.Int("rank", rank)
	}
	return ctx.Logger(), closer, nil
}

// Console reports whether format f writes console lines to a destination that is (tty) or is
// not a terminal: console always, json never, auto (or unset) on a terminal only.
func Console(f config.LogFormat, tty bool) bool {
	return f == config.LogConsole || (tty && (f == config.LogAuto || f == ""))
}

// FileName expands "%r" in a log file pattern to the rank ("" for rank < 0).
func FileName(pattern string, rank int) string {
	r := ""
	if rank >= 0 {
		r = strconv.Itoa(rank)
	}
	return strings.ReplaceAll(pattern, "%r", r)
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
