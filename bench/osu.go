package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/goarmci/goarmci/globalarray"
	"github.com/goarmci/goarmci/rma"
)

// Origin and target of the two-rank benchmarks (OSU: rank 0 issues, rank 1 is passive).
const (
	origin = 0
	target = 1
)

// Run runs the benchmark o.Name on rt. It is collective: every rank of the job calls it with the
// same options. Rank 0 returns the table; the other ranks return nil and no error. Ranks beyond
// the second take part only in the synchronizations of two-rank benchmarks.
//
// Errors: ErrUnknown, ErrSync, ErrOptions (nothing run), ErrRanks, ErrUnsupported, and rma's
// errors of the operations measured.
func Run(ctx context.Context, rt *rma.Runtime, o Options) (*Result, error) {
	o, s, err := o.Check()
	if err != nil {
		return nil, err
	}
	if rt.Size() < s.Ranks {
		return nil, fmt.Errorf("%w: %s needs %d ranks, the job has %d", ErrRanks, s.Name, s.Ranks, rt.Size())
	}
	onWindow := o.API == APIWindow && isOneSided(s.Name)
	if o.Sync == SyncPSCW && !onWindow {
		// General active-target synchronization needs the window package's epochs
		// (MPI_Win_post/start/complete/wait); the ARMCI calls have no groups to post to.
		return nil, fmt.Errorf("%w: %s -sync pscw needs -api window", ErrSync, s.Name)
	}
	res := &Result{
		Name:      s.Name,
		Title:     s.Title + " (goarmci)",
		KeyLabel:  "Size",
		Sync:      string(o.Sync),
		Transport: rt.TransportTo(min(target, rt.Size()-1)),
		Ranks:     rt.Size(),
		Run:       CurrentRun(),
	}
	if s.Kind == Bandwidth {
		res.Columns = []string{ColBandwidth}
	} else {
		res.Columns = []string{ColLatency}
	}
	res.Header = []string{
		"Window creation: ARMCI_Malloc",
		"Synchronization: " + syncDoc(o.Sync),
		"Operation: " + s.note,
		fmt.Sprintf("Transport: %s, %d ranks", res.Transport, rt.Size()),
	}
	if onWindow {
		res.Title = s.Title + " (goarmci windows)"
		res.Header[0] = map[string]string{"allocate": "Window creation: MPI_Win_allocate (window.Allocate)", "create": "Window creation: MPI_Win_create (window.Create over ARMCI_Malloc)"}[o.Win]
		res.Header[1] = "Synchronization: " + winSyncDoc(o.Sync)
		res.Header[2] = "Operation: " + map[string]string{
			"put_latency": "MPI_Put", "put_bw": "MPI_Put x window", "put_bibw": "MPI_Put x window from both ranks",
			"get_latency": "MPI_Get", "get_bw": "MPI_Get x window", "acc_latency": "MPI_Accumulate (MPI_DOUBLE, MPI_SUM)",
			"get_acc_latency": "MPI_Get_accumulate (MPI_DOUBLE, MPI_SUM)", "fop_latency": "MPI_Fetch_and_op (MPI_INT64_T, MPI_SUM)",
			"cas_latency": "MPI_Compare_and_swap (MPI_INT64_T)",
		}[s.Name] + " on package window"
	}
	var rows []Row
	switch {
	case onWindow:
		rows, err = runWindow(ctx, rt, o, s)
	case s.Name == "get_acc_latency":
		return nil, fmt.Errorf("%w: %s (rma has no MPI_Get_accumulate: no fetching accumulate of a buffer)", ErrUnsupported, s.Name)
	case s.Name == "allreduce":
		res.Header = []string{"Operation: " + s.note, fmt.Sprintf("Transport: %s, %d ranks", res.Transport, rt.Size())}
		rows, err = runAllReduce(ctx, rt, o)
	case s.Name == "barrier":
		res.KeyLabel = "Ranks"
		res.Title = s.Title + " (goarmci)"
		res.Header = []string{"Algorithm: " + barrierAlgName(o.BarrierAlg), fmt.Sprintf("Transport: %s", res.Transport)}
		res.Columns, rows, err = runBarrier(ctx, rt, o)
	case slices.Contains(GASuite, s.Name):
		res.Header = []string{"Operation: " + s.note, fmt.Sprintf("Transport: %s, %d ranks", res.Transport, rt.Size())}
		switch s.Name {
		case "ga_read_inc", "ga_sync":
		case "ga_dgemm":
			res.KeyLabel, res.Columns = "N", []string{ColGFlops}
			res.Header = append(res.Header, "Local products: "+globalarray.BLASBackend()+" BLAS")
		default:
			res.Columns = []string{ColLatency, ColBandwidth}
		}
		rows, err = runGA(ctx, rt, o, s)
	default:
		rows, err = runOneSided(ctx, rt, o, s)
	}
	if err != nil {
		return nil, err
	}
	if o.Baseline && !s.Collective() {
		cols, extra, berr := runBaseline(ctx, rt, o, s)
		if berr != nil {
			return nil, berr
		}
		if rt.Rank() == origin {
			res.Columns = append(res.Columns, cols...)
			for i := range rows {
				rows[i].Values = append(rows[i].Values, extra[i]...)
			}
		}
	}
	if rt.Rank() != origin {
		return nil, nil
	}
	res.Rows = rows
	return res, nil
}

func isOneSided(name string) bool { return slices.Contains(oneSidedNames, name) }

func winSyncDoc(s Sync) string {
	switch s {
	case SyncFlush:
		return "MPI_Win_flush (lock shared once, flush per operation or window)"
	case SyncLock:
		return "MPI_Win_lock/MPI_Win_unlock"
	case SyncFence:
		return "MPI_Win_fence"
	}
	return "MPI_Win_post/start/complete/wait"
}

func syncDoc(s Sync) string {
	switch s {
	case SyncFlush:
		return "flush (ARMCI_Fence, as MPI_Win_flush)"
	case SyncLock:
		return "lock (ARMCI_Lock/ARMCI_Unlock of mutex 0 at the target, as MPI_Win_lock/unlock)"
	case SyncFence:
		return "fence (ARMCI_Barrier = AllFence + barrier, as MPI_Win_fence)"
	}
	return string(s)
}

// oneSided is the state of a two-rank benchmark.
type oneSided struct {
	rt   *rma.Runtime
	seg  *rma.Segment
	buf  []byte
	hs   []*rma.Handle
	sync Sync
	me   int
	peer int // the other rank of the pair (origin↔target), -1 for bystanders
	cmp  int64
}

// bibwBytes is the memory of each rank's window and origin buffer in a benchmark: put_bibw puts
// the operations of a window to consecutive places (osu_put_bibw: sbuf + j*size to disp +
// j*size), so it needs window × the largest size; the others reuse the first size bytes.
func bibwBytes(o Options, name string) int {
	n := max(o.MaxSize, 8)
	if name == "put_bibw" {
		n *= max(o.Window, 1)
	}
	return n
}

func runOneSided(ctx context.Context, rt *rma.Runtime, o Options, s Spec) ([]Row, error) {
	seg, err := rt.Malloc(ctx, bibwBytes(o, s.Name))
	if err != nil {
		return nil, err
	}
	defer seg.Free(ctx)
	if o.Sync == SyncLock {
		if err := rt.CreateMutexes(ctx, 1); err != nil {
			return nil, err
		}
		defer rt.DestroyMutexes(ctx)
	}
	b := &oneSided{rt: rt, seg: seg, buf: make([]byte, bibwBytes(o, s.Name)), sync: o.Sync, me: rt.Rank(), peer: -1}
	for i := range b.buf {
		b.buf[i] = byte(i)
	}
	switch b.me {
	case origin:
		b.peer = target
	case target:
		b.peer = origin
	}
	var rows []Row
	for _, size := range o.Sizes() {
		iters, skip := o.Counts(s.Kind, size)
		op, err := b.op(s.Name, size)
		if err != nil {
			return nil, err
		}
		if err := rt.Barrier(ctx); err != nil {
			return nil, err
		}
		if err := settleRanks(ctx, rt, o.Settle); err != nil {
			return nil, err
		}
		var v float64
		if s.Kind == Latency {
			v, err = b.latency(ctx, op, iters, skip)
		} else {
			v, err = b.bandwidth(ctx, s.Name, size, o.Window, iters, skip)
		}
		if err != nil {
			return nil, fmt.Errorf("bench: %s size %d: %w", s.Name, size, err)
		}
		if err := rt.Barrier(ctx); err != nil {
			return nil, err
		}
		rows = append(rows, Row{Size: size, Values: []float64{v}})
	}
	return rows, nil
}

// op returns the blocking operation of a latency benchmark towards rank to.
func (b *oneSided) op(name string, size int) (func(ctx context.Context, to int) error, error) {
	buf := b.buf[:size]
	rt, seg := b.rt, b.seg
	switch name {
	case "put_latency", "put_bw", "put_bibw":
		return func(ctx context.Context, to int) error { return rt.Put(ctx, buf, seg, to, 0) }, nil
	case "get_latency", "get_bw":
		return func(ctx context.Context, to int) error { return rt.Get(ctx, seg, to, 0, buf) }, nil
	case "acc_latency":
		// doubles 1.0, written: the target's values stay finite and normal, and the source is
		// real memory (a fresh make is the kernel's zero page until written, as in the peers)
		ones := make([]byte, size)
		for i := 0; i+8 <= size; i += 8 {
			binary.LittleEndian.PutUint64(ones[i:], math.Float64bits(1))
		}
		return func(ctx context.Context, to int) error {
			return rt.Acc(ctx, rma.AccFloat64, 1, ones, seg, to, 0)
		}, nil
	case "fop_latency":
		return func(ctx context.Context, to int) error {
			_, err := rt.Rmw(ctx, rma.FetchAndAddLong, seg, to, 0, 1)
			return err
		}, nil
	case "cas_latency":
		return func(ctx context.Context, to int) error {
			old, err := rt.CompareSwap(ctx, seg, to, 0, b.cmp, b.cmp+1)
			b.cmp = old // the next swap succeeds too: every iteration changes the word
			return err
		}, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknown, name)
}

// latency times iters operations after skip warm-ups and returns µs per operation.
func (b *oneSided) latency(ctx context.Context, op func(context.Context, int) error, iters, skip int) (float64, error) {
	rt := b.rt
	if b.sync == SyncFence {
		// OSU's fence mode is a ping-pong: origin: op, fence, fence; target: fence, op, fence.
		var t0 time.Time
		for i := range skip + iters {
			if i == skip {
				t0 = time.Now()
			}
			if b.me == origin {
				if err := op(ctx, b.peer); err != nil {
					return 0, err
				}
			}
			if err := rt.Barrier(ctx); err != nil {
				return 0, err
			}
			if b.me == target {
				if err := op(ctx, b.peer); err != nil {
					return 0, err
				}
			}
			if err := rt.Barrier(ctx); err != nil {
				return 0, err
			}
		}
		return usPer(time.Since(t0), 2*iters), nil
	}
	if b.me != origin {
		return 0, nil
	}
	var t0 time.Time
	for i := range skip + iters {
		if i == skip {
			t0 = time.Now()
		}
		if b.sync == SyncLock {
			if err := rt.Lock(ctx, 0, target); err != nil {
				return 0, err
			}
		}
		if err := op(ctx, target); err != nil {
			return 0, err
		}
		if err := rt.Fence(ctx, target); err != nil {
			return 0, err
		}
		if b.sync == SyncLock {
			if err := rt.Unlock(ctx, 0, target); err != nil {
				return 0, err
			}
		}
	}
	return usPer(time.Since(t0), iters), nil
}

// window issues n non-blocking operations to rank to and completes them (the flush). put_bibw's
// operation j moves bytes [j*size, (j+1)*size) of the origin buffer to the same place of the
// target's window, as osu_put_bibw; the others move the first size bytes each time.
func (b *oneSided) window(ctx context.Context, name string, size, n, to int) error {
	rt, seg := b.rt, b.seg
	stride := 0
	if name == "put_bibw" {
		stride = size
	}
	b.hs = b.hs[:0]
	for j := range n {
		var h *rma.Handle
		var err error
		off := j * stride
		buf := b.buf[off : off+size]
		if name == "get_bw" {
			h, err = rt.NbGet(ctx, seg, to, off, buf)
		} else {
			h, err = rt.NbPut(ctx, buf, seg, to, off)
		}
		if err != nil {
			return err
		}
		b.hs = append(b.hs, h)
	}
	for _, h := range b.hs {
		if err := h.Wait(ctx); err != nil {
			return err
		}
	}
	return rt.Fence(ctx, to)
}

// bandwidth times iters windows after skip warm-ups and returns MB/s (10^6 bytes/s).
func (b *oneSided) bandwidth(ctx context.Context, name string, size, window, iters, skip int) (float64, error) {
	rt := b.rt
	bi := name == "put_bibw"
	active := b.me == origin || (bi && b.me == target)
	var t0 time.Time
	for i := range skip + iters {
		if i == skip {
			if b.sync == SyncFence || bi {
				if err := rt.Barrier(ctx); err != nil {
					return 0, err
				}
			}
			t0 = time.Now()
		}
		if bi && b.sync == SyncFence {
			// osu_put_bibw's fence epoch: MPI_Win_fence, the window of puts, MPI_Win_fence
			if err := rt.Barrier(ctx); err != nil {
				return 0, err
			}
		}
		if b.sync == SyncLock && active {
			if err := rt.Lock(ctx, 0, b.peer); err != nil {
				return 0, err
			}
		}
		if active {
			if err := b.window(ctx, name, size, window, b.peer); err != nil {
				return 0, err
			}
		}
		if b.sync == SyncLock && active {
			if err := rt.Unlock(ctx, 0, b.peer); err != nil {
				return 0, err
			}
		}
		if b.sync == SyncFence {
			if err := rt.Barrier(ctx); err != nil {
				return 0, err
			}
		}
	}
	if bi && b.sync != SyncFence {
		if err := rt.Barrier(ctx); err != nil {
			return 0, err
		}
	}
	el := time.Since(t0)
	bytes := float64(size) * float64(window) * float64(iters)
	if bi {
		bytes *= 2
	}
	return bytes / el.Seconds() / 1e6, nil
}

func usPer(d time.Duration, n int) float64 {
	return float64(d.Nanoseconds()) / 1e3 / float64(max(n, 1))
}
