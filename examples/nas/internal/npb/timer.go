package npb

import "time"

// Timer accumulates wall-clock time between Start and Stop, like NPB's timer_start/timer_stop/
// timer_read.
type Timer struct {
	start   time.Time
	elapsed time.Duration
	running bool
}

// Start starts (or restarts) the timer; time already accumulated is kept.
func (t *Timer) Start() {
	t.start = time.Now()
	t.running = true
}

// Stop adds the time since Start to the accumulated time.
func (t *Timer) Stop() {
	if t.running {
		t.elapsed += time.Since(t.start)
		t.running = false
	}
}

// Seconds returns the accumulated time in seconds (including a running interval).
func (t *Timer) Seconds() float64 {
	d := t.elapsed
	if t.running {
		d += time.Since(t.start)
	}
	return d.Seconds()
}
