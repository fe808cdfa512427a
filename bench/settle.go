package bench

import (
	"context"
	"time"

	"github.com/goarmci/goarmci/rma"
)

// DefaultSettle is the command line's default Options.Settle.
const DefaultSettle = 30 * time.Millisecond

// settleRanks brings the ranks of a measurement to the steady state of a busy Go process before the
// warm-up of a size: a barrier, then d of spinning on the CPU (no system call, no communication),
// then a barrier that the ranks reach together. After a process had every thread idle (a rank
// blocked in a barrier, in bootstrap, in printing), the Go runtime's monitor thread (sysmon)
// wakes every 20 µs for about a millisecond, then doubles its sleep up to 10 ms; where every core
// runs a spinning rank, each of its wake-ups takes a rank's core for some microseconds and the
// other ranks wait for it at their next synchronization. OSU's warm-up counts (10 windows before
// 100 timed ones in the bandwidth tests) end well inside that period, so without settling such a
// run times the monitor, not the operations (bench/README.md, "Ninth session"). d = 0 does
// nothing.
func settleRanks(ctx context.Context, rt *rma.Runtime, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if err := rt.Barrier(ctx); err != nil {
		return err
	}
	for t0 := time.Now(); time.Since(t0) < d; {
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return rt.Barrier(ctx)
}

// timeCalls settles the ranks (settleRanks), then makes skip untimed and iters timed calls of
// call on this rank and returns the mean time per timed call in µs: the loop of the collective
// latency benchmarks (barrier, ga_sync, allreduce), every rank calling it alike. call's error
// ends the loop and is returned as is.
func timeCalls(ctx context.Context, rt *rma.Runtime, settle time.Duration, iters, skip int, call func() error) (float64, error) {
	if err := settleRanks(ctx, rt, settle); err != nil {
		return 0, err
	}
	var t0 time.Time
	for i := range skip + iters {
		if i == skip {
			t0 = time.Now()
		}
		if err := call(); err != nil {
			return 0, err
		}
	}
	return usPer(time.Since(t0), iters), nil
}
