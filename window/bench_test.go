package window

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// cpuClock measures the CPU time of the calling goroutine's timed loop, reported beside ns/op as
// cpu-ns/op: the goroutine is wired to its thread and the thread's CPU time (getrusage
// clock CLOCK_THREAD_CPUTIME_ID) read around the loop. On a machine shared with other jobs ns/op counts the time
// the rank waited for a core too; cpu-ns/op counts only the time it ran.
type cpuClock struct {
	b     *testing.B
	start time.Duration
}

// startCPU wires the goroutine to its thread, resets the benchmark timer and starts the clock.
func startCPU(b *testing.B) *cpuClock {
	runtime.LockOSThread()
	b.ResetTimer()
	return &cpuClock{b: b, start: threadCPU()}
}

// stop stops the benchmark timer, reports cpu-ns/op and unwires the goroutine.
func (c *cpuClock) stop() {
	el := threadCPU() - c.start
	c.b.StopTimer()
	runtime.UnlockOSThread()
	c.b.ReportMetric(float64(el.Nanoseconds())/float64(c.b.N), "cpu-ns/op")
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// benchRanks runs body on n ranks (goroutines, one rma.Runtime each) for a benchmark; rank 0
// owns the timer.
func benchRanks(b *testing.B, n int, tr rma.Transport, body func(ctx context.Context, rt *rma.Runtime, w *Window) error, opts ...Option) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := rmatest.NewGroup(n)
	job := fmt.Sprintf("wb%d", time.Now().UnixNano()%1e9)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rt, err := rma.Init(ctx, &rma.Config{Bootstrap: g.Member(i), Transport: tr, HostID: "bench", Job: job})
			if err != nil {
				errs[i] = err
				cancel()
				return
			}
			defer rt.Finalize(ctx)
			w, err := Allocate(ctx, rt, 4096, 8, opts...)
			if err == nil {
				err = body(ctx, rt, w)
			}
			if err == nil {
				err = w.Free(ctx)
			}
			if err != nil {
				errs[i] = err
				cancel()
				g.Close()
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", i, err)
		}
	}
}

// BenchmarkLockPutUnlock: one 8-byte Put to rank 1 in a shared (as osu_put_latency -s lock) or
// an exclusive lock epoch (MPI_Win_lock, MPI_Put, MPI_Win_unlock), the OSU "lock"
// synchronization; ns/op is one whole epoch.
func BenchmarkLockPutUnlock(b *testing.B) {
	for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
		for _, lt := range []LockType{LockShared, LockExclusive} {
			b.Run(string(tr)+"/"+lt.String(), func(b *testing.B) {
				benchRanks(b, 2, tr, func(ctx context.Context, rt *rma.Runtime, w *Window) error {
					if rt.Rank() == 0 {
						src := make([]byte, 8)
						clk := startCPU(b)
						for i := 0; i < b.N; i++ {
							if err := w.Lock(ctx, lt, 1, 0); err != nil {
								return err
							}
							if err := w.Put(ctx, src, 1, 0); err != nil {
								return err
							}
							if err := w.Unlock(ctx, 1); err != nil {
								return err
							}
						}
						clk.stop()
					}
					return rt.Barrier(ctx)
				})
			})
		}
	}
}

// BenchmarkFetchAndOp: one FetchAndOp(SUM) of an int64 on rank 1 then a Flush, inside one
// shared lock epoch (OSU fop_latency with flush), in each atomicity domain: the accumulate lock
// (default) and SingleIntrinsic's native atomics; .../cas: one CompareAndSwap instead, whose
// compare value is the previous result, so every swap succeeds (OSU cas_latency with flush).
func BenchmarkFetchAndOp(b *testing.B) {
	for _, d := range []struct {
		name string
		opts []Option
	}{{"lock", nil}, {"native", []Option{SingleIntrinsic(true)}}} {
		for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
			for _, cas := range []bool{false, true} {
				name := d.name + "/" + string(tr)
				if cas {
					name += "/cas"
				}
				b.Run(name, func(b *testing.B) {
					benchRanks(b, 2, tr, func(ctx context.Context, rt *rma.Runtime, w *Window) error {
						if rt.Rank() == 0 {
							return benchAtomic(ctx, b, w, cas)
						}
						return rt.Barrier(ctx)
					}, d.opts...)
				})
			}
		}
	}
}

// benchAtomic is rank 0's loop of BenchmarkFetchAndOp, then the barrier rank 1 waits in.
func benchAtomic(ctx context.Context, b *testing.B, w *Window, cas bool) error {
	one, res, cmp, swap := make([]byte, 8), make([]byte, 8), make([]byte, 8), make([]byte, 8)
	one[0] = 1
	if err := w.Lock(ctx, LockShared, 1, 0); err != nil {
		return err
	}
	clk := startCPU(b)
	for i := 0; i < b.N; i++ {
		var err error
		if cas {
			copy(cmp, res)
			le.PutUint64(swap, le.Uint64(cmp)+1)
			err = w.CompareAndSwap(ctx, swap, cmp, res, Int64, 1, 0)
		} else {
			err = w.FetchAndOp(ctx, one, res, Int64, 1, 0, OpSum)
		}
		if err != nil {
			return err
		}
		if err := w.Flush(ctx, 1); err != nil {
			return err
		}
	}
	clk.stop()
	if err := w.Unlock(ctx, 1); err != nil {
		return err
	}
	return w.Runtime().Barrier(ctx)
}

// BenchmarkFencePut: one 8-byte Put from rank 0 to rank 1 per fence epoch (MPI_Put then
// MPI_Win_fence on both ranks), the OSU "fence" synchronization; ns/op is one epoch.
func BenchmarkFencePut(b *testing.B) {
	for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
		b.Run(string(tr), func(b *testing.B) {
			benchRanks(b, 2, tr, func(ctx context.Context, rt *rma.Runtime, w *Window) error {
				src := make([]byte, 8)
				if err := w.Fence(ctx, ModeNoPrecede); err != nil {
					return err
				}
				if rt.Rank() == 0 {
					b.ResetTimer()
				}
				for i := 0; i < b.N; i++ {
					if rt.Rank() == 0 {
						if err := w.Put(ctx, src, 1, 0); err != nil {
							return err
						}
					}
					if err := w.Fence(ctx, 0); err != nil {
						return err
					}
				}
				if rt.Rank() == 0 {
					b.StopTimer()
				}
				return w.Fence(ctx, ModeNoSucceed)
			})
		})
	}
}

// BenchmarkInterleave is the interleaving test of [Vishnu07 §5.3.4]: rank 0 issues 16 puts and 16
// gets of one size per fence epoch to rank 1, with the reordering policy on and off; MB/s counts
// the bytes of both directions. (The full sweep over sizes and rate-limited rails belongs to
// `goarmci bench interleave`.)
func BenchmarkInterleave(b *testing.B) {
	const size = 256 << 10
	for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
		for _, reorder := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/reorder=%v", tr, reorder), func(b *testing.B) {
				b.SetBytes(32 * size)
				benchInterleave(b, tr, reorder, size)
			})
		}
	}
}

func benchInterleave(b *testing.B, tr rma.Transport, reorder bool, size int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := rmatest.NewGroup(2)
	job := fmt.Sprintf("wi%d", time.Now().UnixNano()%1e9)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := func() error {
				rt, err := rma.Init(ctx, &rma.Config{Bootstrap: g.Member(i), Transport: tr, HostID: "bench", Job: job})
				if err != nil {
					return err
				}
				defer rt.Finalize(ctx)
				w, err := Allocate(ctx, rt, 32*size, 1, Reorder(reorder))
				if err != nil {
					return err
				}
				bufs := make([][]byte, 32)
				for k := range bufs {
					bufs[k] = make([]byte, size)
				}
				if err := w.Fence(ctx, ModeNoPrecede); err != nil {
					return err
				}
				if i == 0 {
					b.ResetTimer()
				}
				for it := 0; it < b.N; it++ {
					if i == 0 {
						for k := 0; k < 16; k++ {
							if err := w.Put(ctx, bufs[k], 1, k*size); err != nil {
								return err
							}
						}
						for k := 16; k < 32; k++ {
							if err := w.Get(ctx, bufs[k], 1, k*size); err != nil {
								return err
							}
						}
					}
					if err := w.Fence(ctx, 0); err != nil {
						return err
					}
				}
				if i == 0 {
					b.StopTimer()
				}
				if err := w.Fence(ctx, ModeNoSucceed); err != nil {
					return err
				}
				return w.Free(ctx)
			}()
			if err != nil {
				errs[i] = err
				cancel()
				g.Close()
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", i, err)
		}
	}
}
