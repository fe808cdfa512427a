// Package progress shows how far a long command has got (goarmci bench compare, the scenario
// benchmarks, goarmci run --progress): on a terminal one bar redrawn in place, elsewhere (a
// pipe, a log file, CI) one plain line per finished step.
//
// The bar is drawn here rather than by a progress-bar library: the ones at hand import net/http
// (and with it crypto/tls), which goarmci, the launcher, does not link otherwise; the launcher
// is kept small for the same reason goarmci-plot is a command of its own. What is needed is one
// line, rewritten with a carriage return and an erase-to-end-of-line escape, and a terminal
// test (golang.org/x/term).
package progress

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"
)

// Bar is one command's progress: Total steps, each reported by Step. All methods are safe for
// concurrent use, and a nil *Bar does nothing (callers need not check whether progress was
// asked for).
//
// Plain lines look like
//
//	goarmci: bench compare put_latency: run 3/5 goarmci done (7/15 runs, 42.1s)
//
// that is the title, the step's text, then steps done/total with the unit and the time since New.
// The bar on a terminal is the title, [=====>    ], done/total with the unit, the elapsed time
// and the text of the step under way or just done, cut to the terminal's width.
type Bar struct {
	mu     sync.Mutex
	w      io.Writer
	title  string
	unit   string
	total  int
	done   int
	status string // the bar's text: the last Start, Step or Note
	doing  string // the last Start's text (plain heartbeat lines)
	start  time.Time
	now    func() time.Time
	tty    bool
	width  int  // terminal columns
	shown  bool // the bar is on the terminal's current line
	ended  bool

	redraw time.Duration // terminal: period of the bar's redraw; ≤ 0 = none
	beat   time.Duration // plain: period of the heartbeat lines; ≤ 0 = none
	stop   chan struct{}
	wg     sync.WaitGroup
}

// Option changes how New sets a Bar up.
type Option func(*Bar)

// WithClock makes the Bar read the time from now (tests).
func WithClock(now func() time.Time) Option { return func(b *Bar) { b.now = now } }

// WithTerminal forces the terminal form, width columns (characters) wide, whatever w is
// (tests, and callers that know better).
func WithTerminal(width int) Option {
	return func(b *Bar) { b.tty, b.width = true, width }
}

// WithHeartbeat makes the plain form write "TITLE: DOING (done/total UNIT, elapsed)" every
// period between steps (DOING: the last Start's text, or "running"), so that a log shows a long
// step is still under way. The default is none. A goroutine owned by the Bar writes them; End
// stops it.
func WithHeartbeat(every time.Duration) Option { return func(b *Bar) { b.beat = every } }

// WithRedraw sets how often the terminal bar is redrawn between steps so that its elapsed time
// moves on (default every second; ≤ 0: only at Start, Step and Note). A goroutine owned by the
// Bar redraws it; End stops it.
func WithRedraw(every time.Duration) Option { return func(b *Bar) { b.redraw = every } }

// New starts the progress of a task of total steps on w (standard error, as a rule). title
// starts every line ("goarmci: bench compare put_latency"); unit names the steps in the counts
// ("runs", "ranks finished"). w is a terminal when it is an *os.File on a terminal and TERM is
// not "dumb". Call End when the task is over.
func New(w io.Writer, title, unit string, total int, opts ...Option) *Bar {
	b := &Bar{w: w, title: title, unit: unit, total: max(total, 0), now: time.Now, redraw: time.Second}
	if f, ok := w.(*os.File); ok && os.Getenv("TERM") != "dumb" && term.IsTerminal(int(f.Fd())) {
		b.tty, b.width = true, 80
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			b.width = cols
		}
	}
	for _, o := range opts {
		o(b)
	}
	every := b.beat
	if b.tty {
		every = b.redraw
	}
	b.start = b.now()
	if b.tty {
		b.mu.Lock()
		b.draw()
		b.mu.Unlock()
	}
	if every > 0 {
		b.stop = make(chan struct{})
		b.wg.Add(1)
		go b.tick(every)
	}
	return b
}

// tick redraws the bar (terminal) or writes a heartbeat line (plain) every period until End.
func (b *Bar) tick(every time.Duration) {
	defer b.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			b.mu.Lock()
			if !b.ended {
				if b.tty {
					b.draw()
				} else {
					b.line(cmp.Or(b.doing, "running"))
				}
			}
			b.mu.Unlock()
		}
	}
}

// Terminal reports whether b draws a bar (false: plain lines, or a nil Bar).
func (b *Bar) Terminal() bool { return b != nil && b.tty }

// Start says what the task is doing now (the bar's text; plain form writes nothing, the
// heartbeat line repeats it).
func (b *Bar) Start(status string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.status, b.doing = status, status
	if b.tty && !b.ended {
		b.draw()
	}
}

// Step counts one step done and says which ("run 3/5 goarmci done"): a plain line, or the bar
// redrawn with it.
func (b *Bar) Step(status string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done++
	b.total = max(b.total, b.done)
	b.status = status
	if b.ended {
		return
	}
	if b.tty {
		b.draw()
	} else {
		b.line(status)
	}
}

// Note writes a line that is not a step: plain form writes "TITLE: MSG (counts, elapsed)", the
// terminal shows it as the bar's text.
func (b *Bar) Note(msg string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return
	}
	b.status = msg
	if b.tty {
		b.draw()
	} else {
		b.line(msg)
	}
}

// AddTotal changes the number of steps by delta (a system left out of a comparison takes its
// remaining runs with it); the total never drops below the steps done.
func (b *Bar) AddTotal(delta int) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total = max(b.total+delta, b.done)
}

// End stops the heartbeat and, on a terminal, leaves the bar's last state on its own line.
// Further calls do nothing.
func (b *Bar) End() {
	if b == nil {
		return
	}
	b.mu.Lock()
	if b.ended {
		b.mu.Unlock()
		return
	}
	b.ended = true
	if b.tty {
		b.draw()
		fmt.Fprint(b.w, "\n")
		b.shown = false
	}
	b.mu.Unlock()
	if b.stop != nil {
		close(b.stop)
		b.wg.Wait()
	}
}

// Writer returns a writer for output that shares the terminal with the bar (the ranks' lines,
// notes on standard error): each write clears the bar first and draws it again after. In plain
// form, or for a nil Bar, it returns w itself.
func (b *Bar) Writer(w io.Writer) io.Writer {
	if b == nil || !b.tty {
		return w
	}
	return &barWriter{b: b, w: w}
}

type barWriter struct {
	b *Bar
	w io.Writer
}

func (bw *barWriter) Write(p []byte) (int, error) {
	bw.b.mu.Lock()
	defer bw.b.mu.Unlock()
	if bw.b.shown {
		fmt.Fprint(bw.b.w, "\r\x1b[K")
		bw.b.shown = false
	}
	n, err := bw.w.Write(p)
	if !bw.b.ended && len(p) > 0 && p[len(p)-1] == '\n' {
		bw.b.draw()
	}
	return n, err
}

// counts is "7/15 runs, 42.1s".
func (b *Bar) counts() string {
	c := fmt.Sprintf("%d/%d", b.done, b.total)
	if b.unit != "" {
		c += " " + b.unit
	}
	return c + ", " + Elapsed(b.now().Sub(b.start))
}

// line writes one plain line; the caller holds b.mu.
func (b *Bar) line(msg string) {
	s := b.title
	if msg != "" {
		s += ": " + msg
	}
	fmt.Fprintf(b.w, "%s (%s)\n", s, b.counts())
}

// Render is the bar's line for done of total steps (unit: their name) after elapsed, cut to
// width columns (without the carriage return and erase escape that draw adds).
func Render(title string, done, total int, unit string, elapsed time.Duration, status string, width int) string {
	const cells = 20
	fill := 0
	if total > 0 {
		fill = min(cells, done*cells/total)
	}
	bar := strings.Repeat("=", fill)
	if fill < cells {
		bar += ">" + strings.Repeat(" ", cells-fill-1)
	}
	s := fmt.Sprintf("%s [%s] %d/%d", title, bar, done, total)
	if unit != "" {
		s += " " + unit
	}
	s += ", " + Elapsed(elapsed)
	if status != "" {
		s += "  " + status
	}
	if width > 1 && utf8.RuneCountInString(s) > width-1 {
		// One column spare: a line that fills the terminal exactly wraps on some terminals.
		r := []rune(s)
		s = string(r[:width-1])
	}
	return s
}

// draw rewrites the bar on the terminal's current line; the caller holds b.mu.
func (b *Bar) draw() {
	fmt.Fprint(b.w, "\r"+Render(b.title, b.done, b.total, b.unit, b.now().Sub(b.start), b.status, b.width)+"\x1b[K")
	b.shown = true
}

// Elapsed formats a duration for progress output: 0.4s, 42.1s, 3m05s, 1h02m.
func Elapsed(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		s := int(d / time.Second)
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	m := int(d / time.Minute)
	return fmt.Sprintf("%dh%02dm", m/60, m%60)
}
