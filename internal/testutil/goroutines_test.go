package testutil

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is a testing.TB that records failures instead of failing the real test.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	failed   bool
	msg      string
	cleanups []func()
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msg = fmt.Sprintf(format, args...)
}
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recorder) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func TestCheckGoroutinesPassesWhenStopped(t *testing.T) {
	r := &recorder{TB: t}
	CheckGoroutines(r)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); <-stop }()
	r.Cleanup(func() { close(stop); wg.Wait() })
	r.runCleanups()
	assert.False(t, r.failed, r.msg)
}

func TestCheckGoroutinesDetectsLeak(t *testing.T) {
	r := &recorder{TB: t}
	CheckGoroutines(r)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); <-stop }()
	old := settleRounds
	settleRounds = 5 // the leak is certain; do not wait the full settle time
	defer func() { settleRounds = old }()
	r.runCleanups()
	close(stop)
	<-done
	require.True(t, r.failed)
	assert.Contains(t, r.msg, "goroutine leak")
	assert.True(t, strings.Contains(r.msg, "TestCheckGoroutinesDetectsLeak"), "stacks name the leaking goroutine's creator")
}
