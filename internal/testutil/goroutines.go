// Package testutil holds helpers shared by the project's tests: goroutine leak checks (and, later,
// network-namespace helpers that skip cleanly without privileges).
package testutil

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// settleRounds × settlePause bounds how long CheckGoroutines lets goroutines that were told to stop
// finish exiting. It is a settle loop, not a timing assertion: a goroutine still alive after it is
// a leak whatever the machine's speed, because every owner must wait for its goroutines in Close.
var (
	settleRounds = 500
	settlePause  = 10 * time.Millisecond
)

// CheckGoroutines records the number of live goroutines now and registers a cleanup that fails t
// when, after the test's other cleanups (registered later, so run earlier: closing devices and
// the like), more goroutines are alive than at the start. Call it first in a test. On failure the
// stacks of all goroutines are logged. Tests using it must not run in parallel with others.
func CheckGoroutines(t testing.TB) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		n := runtime.NumGoroutine()
		for i := 0; i < settleRounds && n > before; i++ {
			time.Sleep(settlePause)
			n = runtime.NumGoroutine()
		}
		if n > before {
			t.Errorf("goroutine leak: %d goroutines alive, %d before the test\n%s", n, before, Stacks())
		}
	})
}

// Stacks returns the stacks of all goroutines except the caller's.
func Stacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	gs := strings.Split(string(buf), "\n\n")
	if len(gs) > 0 {
		gs = gs[1:] // the caller's own goroutine
	}
	return strings.Join(gs, "\n\n")
}
