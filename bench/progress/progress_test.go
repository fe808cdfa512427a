package progress_test

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/goarmci/goarmci/bench/progress"
)

// clock returns a fake clock that moves on by step at every reading after the first.
func clock(step time.Duration) func() time.Time {
	t := time.Unix(1000, 0)
	first := true
	return func() time.Time {
		if !first {
			t = t.Add(step)
		}
		first = false
		return t
	}
}

func TestPlainLines(t *testing.T) {
	var out bytes.Buffer
	b := progress.New(&out, "goarmci: bench compare put_latency", "runs", 4, progress.WithClock(clock(1500*time.Millisecond)))
	assert.False(t, b.Terminal(), "a buffer is no terminal")
	b.Start("run 1/2 goarmci")
	b.Step("run 1/2 goarmci done")
	b.Step("run 1/2 openmpi-sm done")
	b.Note("openmpi-sm left out")
	b.AddTotal(-1)
	b.Step("run 2/2 goarmci done")
	b.End()
	b.End()
	assert.Equal(t, strings.Join([]string{
		"goarmci: bench compare put_latency: run 1/2 goarmci done (1/4 runs, 1.5s)",
		"goarmci: bench compare put_latency: run 1/2 openmpi-sm done (2/4 runs, 3.0s)",
		"goarmci: bench compare put_latency: openmpi-sm left out (2/4 runs, 4.5s)",
		"goarmci: bench compare put_latency: run 2/2 goarmci done (3/3 runs, 6.0s)",
		"",
	}, "\n"), out.String())
	w := io.Writer(&out)
	assert.Same(t, w, b.Writer(w), "plain output passes through")
}

func TestNilBar(t *testing.T) {
	var b *progress.Bar
	b.Start("x")
	b.Step("x")
	b.Note("x")
	b.AddTotal(3)
	b.End()
	assert.False(t, b.Terminal())
	var out bytes.Buffer
	assert.Same(t, io.Writer(&out), b.Writer(&out))
}

func TestTerminalBar(t *testing.T) {
	var out bytes.Buffer
	b := progress.New(&out, "goarmci: run", "ranks finished", 2, progress.WithTerminal(200),
		progress.WithRedraw(0), progress.WithClock(clock(time.Second)))
	assert.True(t, b.Terminal())
	b.Start("2 ranks started")
	w := b.Writer(&out)
	_, _ = w.Write([]byte("[0] hello\n"))
	b.Step("rank 0 exited (code 0)")
	b.Step("rank 1 exited (code 0)")
	b.End()
	s := out.String()
	// Every draw rewrites the line; the ranks' line clears it first.
	assert.True(t, strings.HasPrefix(s, "\rgoarmci: run [>                   ] 0/2 ranks finished, 1.0s\x1b[K"), "%q", s)
	assert.Contains(t, s, "\r\x1b[K[0] hello\n\rgoarmci: run [>                   ] 0/2")
	assert.Contains(t, s, "[==========>         ] 1/2")
	assert.True(t, strings.HasSuffix(s, "[====================] 2/2 ranks finished, 6.0s  rank 1 exited (code 0)\x1b[K\n"), "%q", s)
}

func TestRender(t *testing.T) {
	assert.Equal(t, "t [====================] 3/3 runs, 1m05s  done", progress.Render("t", 3, 3, "runs", 65*time.Second, "done", 0))
	assert.Equal(t, "t [>                   ] 0/0, 0.0s", progress.Render("t", 0, 0, "", 0, "", 80))
	assert.Equal(t, "t [=====", progress.Render("t", 1, 4, "jobs", time.Second, "long status", 9), "cut to width-1 columns")
}

func TestElapsed(t *testing.T) {
	for d, want := range map[time.Duration]string{
		400 * time.Millisecond:        "0.4s",
		42100 * time.Millisecond:      "42.1s",
		185 * time.Second:             "3m05s",
		time.Hour + 2*time.Minute:     "1h02m",
		26*time.Hour + 59*time.Second: "26h00m",
	} {
		assert.Equal(t, want, progress.Elapsed(d), d.String())
	}
}

func TestHeartbeatStops(t *testing.T) {
	var out bytes.Buffer
	b := progress.New(&out, "goarmci: run", "ranks finished", 1, progress.WithHeartbeat(time.Millisecond))
	b.Start("1 rank started")
	b.End() // returns once the heartbeat goroutine has stopped: reading out below does not race
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if l != "" {
			assert.True(t, strings.HasPrefix(l, "goarmci: run: 1 rank started (0/1 ranks finished, "), l)
		}
	}
}
