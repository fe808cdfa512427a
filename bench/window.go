package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/window"
)

// API names for Options.API.
const (
	// APIARMCI runs the one-sided benchmarks on the ARMCI calls of rma (the default).
	APIARMCI = "armci"
	// APIWindow runs them on MPI-3 windows (package window) with MPI's epochs, exactly as the
	// OSU suite and the MPI peer: MPI_Win_lock/flush/unlock, MPI_Win_fence, PSCW.
	APIWindow = "window"
)

// winBench is the state of a one-sided benchmark on a window.
type winBench struct {
	rt       *rma.Runtime
	w        *window.Window
	buf, res []byte
	one      [8]byte
	swap     [8]byte
	cmp      [8]byte
	sync     Sync
	me, peer int
}

// runWindow is runOneSided over an MPI window: created over an rma segment (o.Win == "create")
// or allocated (default).
func runWindow(ctx context.Context, rt *rma.Runtime, o Options, s Spec) ([]Row, error) {
	n := bibwBytes(o, s.Name)
	var w *window.Window
	var err error
	if o.Win == "create" {
		seg, merr := rt.Malloc(ctx, n)
		if merr != nil {
			return nil, merr
		}
		defer seg.Free(ctx)
		w, err = window.Create(ctx, rt, seg, 1)
	} else {
		w, err = window.Allocate(ctx, rt, n, 1)
	}
	if err != nil {
		return nil, err
	}
	defer w.Free(ctx)
	b := &winBench{rt: rt, w: w, buf: make([]byte, n), res: make([]byte, n), sync: o.Sync, me: rt.Rank(), peer: -1}
	binary.LittleEndian.PutUint64(b.one[:], 1)
	switch b.me {
	case origin:
		b.peer = target
	case target:
		b.peer = origin
	}
	var rows []Row
	for _, size := range o.Sizes() {
		iters, skip := o.Counts(s.Kind, size)
		if err := rt.Barrier(ctx); err != nil {
			return nil, err
		}
		if err := settleRanks(ctx, rt, o.Settle); err != nil {
			return nil, err
		}
		var v float64
		if s.Kind == Latency {
			v, err = b.latency(ctx, s.Name, size, iters, skip)
		} else {
			v, err = b.bandwidth(ctx, s.Name, size, o.Window, iters, skip)
		}
		if err != nil {
			return nil, fmt.Errorf("bench: %s (window, %s) size %d: %w", s.Name, o.Sync, size, err)
		}
		if err := rt.Barrier(ctx); err != nil {
			return nil, err
		}
		rows = append(rows, Row{Size: size, Values: []float64{v}})
	}
	return rows, nil
}

// op queues one operation of benchmark name towards rank to.
func (b *winBench) op(ctx context.Context, name string, size, to int) error {
	w := b.w
	switch name {
	case "put_latency", "put_bw", "put_bibw":
		return w.Put(ctx, b.buf[:size], to, 0)
	case "get_latency", "get_bw":
		return w.Get(ctx, b.res[:size], to, 0)
	case "acc_latency":
		return w.Accumulate(ctx, b.buf[:size], window.Float64, to, 0, window.OpSum)
	case "get_acc_latency":
		return w.GetAccumulate(ctx, b.buf[:size], b.res[:size], window.Float64, to, 0, window.OpSum)
	case "fop_latency":
		return w.FetchAndOp(ctx, b.one[:], b.res[:8], window.Int64, to, 0, window.OpSum)
	case "cas_latency":
		// The result of the previous swap is the next compare value, so every swap succeeds.
		copy(b.cmp[:], b.res[:8])
		binary.LittleEndian.PutUint64(b.swap[:], binary.LittleEndian.Uint64(b.cmp[:])+1)
		return w.CompareAndSwap(ctx, b.swap[:], b.cmp[:], b.res[:8], window.Int64, to, 0)
	}
	return fmt.Errorf("%w %q", ErrUnknown, name)
}

// latency follows osu_put_latency's run_*_with_{flush,lock,fence,pscw}.
func (b *winBench) latency(ctx context.Context, name string, size, iters, skip int) (float64, error) {
	w := b.w
	var t0 time.Time
	switch b.sync {
	case SyncFence:
		if err := w.Fence(ctx, 0); err != nil {
			return 0, err
		}
		for i := range skip + iters {
			if i == skip {
				t0 = time.Now()
			}
			if b.me == origin {
				if err := b.op(ctx, name, size, b.peer); err != nil {
					return 0, err
				}
			}
			if err := w.Fence(ctx, 0); err != nil {
				return 0, err
			}
			if b.me == target {
				if err := b.op(ctx, name, size, b.peer); err != nil {
					return 0, err
				}
			}
			if err := w.Fence(ctx, 0); err != nil {
				return 0, err
			}
		}
		return usPer(time.Since(t0), 2*iters), nil
	case SyncPSCW:
		if b.peer < 0 {
			return 0, nil
		}
		g := []int{b.peer}
		for i := range skip + iters {
			if i == skip {
				t0 = time.Now()
			}
			if b.me == origin {
				if err := b.access(ctx, name, size, g, 1); err != nil {
					return 0, err
				}
				if err := b.expose(ctx, g); err != nil {
					return 0, err
				}
			} else {
				if err := b.expose(ctx, g); err != nil {
					return 0, err
				}
				if err := b.access(ctx, name, size, g, 1); err != nil {
					return 0, err
				}
			}
		}
		return usPer(time.Since(t0), 2*iters), nil
	}
	if b.me != origin {
		return 0, nil
	}
	flush := b.sync == SyncFlush
	if flush {
		if err := w.Lock(ctx, window.LockShared, target, 0); err != nil {
			return 0, err
		}
	}
	for i := range skip + iters {
		if i == skip {
			t0 = time.Now()
		}
		if !flush {
			if err := w.Lock(ctx, window.LockShared, target, 0); err != nil {
				return 0, err
			}
		}
		if err := b.op(ctx, name, size, target); err != nil {
			return 0, err
		}
		var err error
		if flush {
			err = w.Flush(ctx, target)
		} else {
			err = w.Unlock(ctx, target)
		}
		if err != nil {
			return 0, err
		}
	}
	el := time.Since(t0)
	if flush {
		if err := w.Unlock(ctx, target); err != nil {
			return 0, err
		}
	}
	return usPer(el, iters), nil
}

// access is one PSCW access epoch of n operations to group.
func (b *winBench) access(ctx context.Context, name string, size int, g []int, n int) error {
	if err := b.w.Start(ctx, g, 0); err != nil {
		return err
	}
	if err := b.ops(ctx, name, size, n); err != nil { // g is {b.peer}
		return err
	}
	return b.w.Complete(ctx)
}

// expose is one PSCW exposure epoch to group.
func (b *winBench) expose(ctx context.Context, g []int) error {
	if err := b.w.Post(ctx, g, 0); err != nil {
		return err
	}
	return b.w.Wait(ctx)
}

// bandwidth follows osu_put_bw / osu_put_bibw.
func (b *winBench) bandwidth(ctx context.Context, name string, size, window_, iters, skip int) (float64, error) {
	w := b.w
	bi := name == "put_bibw"
	active := b.me == origin || (bi && b.me == target)
	var t0 time.Time
	if b.sync == SyncFence {
		if err := w.Fence(ctx, 0); err != nil {
			return 0, err
		}
	}
	if b.sync == SyncFlush && active {
		if err := w.Lock(ctx, window.LockShared, b.peer, 0); err != nil {
			return 0, err
		}
	}
	for i := range skip + iters {
		if i == skip {
			if bi && b.sync != SyncFence {
				if err := b.rt.Barrier(ctx); err != nil {
					return 0, err
				}
			}
			t0 = time.Now()
		}
		var err error
		switch b.sync {
		case SyncFence:
			if bi { // osu_put_bibw's epoch: fence, the window of puts, fence
				err = w.Fence(ctx, 0)
			}
			if active && err == nil {
				err = b.ops(ctx, name, size, window_)
			}
			if err == nil {
				err = w.Fence(ctx, 0)
			}
		case SyncPSCW:
			g := []int{b.peer}
			switch {
			case b.peer < 0:
			case bi:
				if err = w.Post(ctx, g, 0); err == nil {
					if err = b.access(ctx, name, size, g, window_); err == nil {
						err = w.Wait(ctx)
					}
				}
			case b.me == origin:
				err = b.access(ctx, name, size, g, window_)
			default:
				err = b.expose(ctx, g)
			}
		case SyncLock:
			if active {
				if err = w.Lock(ctx, window.LockShared, b.peer, 0); err == nil {
					if err = b.ops(ctx, name, size, window_); err == nil {
						err = w.Unlock(ctx, b.peer)
					}
				}
			}
		default:
			if active {
				if err = b.ops(ctx, name, size, window_); err == nil {
					err = w.Flush(ctx, b.peer)
				}
			}
		}
		if err != nil {
			return 0, err
		}
	}
	if bi && b.sync != SyncFence {
		if err := b.rt.Barrier(ctx); err != nil {
			return 0, err
		}
	}
	el := time.Since(t0)
	if b.sync == SyncFlush && active {
		if err := w.Unlock(ctx, b.peer); err != nil {
			return 0, err
		}
	}
	bytes := float64(size) * float64(window_) * float64(iters)
	if bi {
		bytes *= 2
	}
	return bytes / el.Seconds() / 1e6, nil
}

// ops queues n operations of benchmark name to the peer; put_bibw's operation j puts bytes
// [j*size, (j+1)*size) of the origin buffer to the same place of the peer's window (osu_put_bibw).
func (b *winBench) ops(ctx context.Context, name string, size, n int) error {
	for j := range n {
		var err error
		if name == "put_bibw" {
			err = b.w.Put(ctx, b.buf[j*size:(j+1)*size], b.peer, j*size)
		} else {
			err = b.op(ctx, name, size, b.peer)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
