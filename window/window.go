package window

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"

	"github.com/goarmci/goarmci/rma"
)

// AccOps says which accumulate operations may meet at one target location at the same time (the
// MPI info key accumulate_ops).
//
// Atomicity domain. A window has one, whatever the mode. By default every accumulate-class
// operation (Accumulate, GetAccumulate, FetchAndOp, CompareAndSwap; every op and type) runs under
// the target's accumulate lock, a word in the target's synchronization segment taken with a
// remote compare-and-swap and released with a remote swap, as Open MPI's osc/sm and osc/rdma do.
// Under it an Accumulate(SUM) is one rma Acc, a CompareAndSwap the target's compare-and-swap, and
// every other operation one read-modify-write of its whole range: one Get (into the result for
// the fetching calls), then the combination in a local buffer and one Put (or, for SUM to a
// same-node rank, one rma Acc in place). The operations of one flush to one target share one
// acquisition; inside an exclusive Lock epoch to the target none is taken (no other rank may
// access the window then). So all accumulate-class operations to the same memory are atomic with
// respect to each other (MPI-3 §11.7.1), whatever their ops, types, lengths and transports, and a
// GetAccumulate of an array costs one lock round trip and bulk copies instead of remote atomics
// per element. A window made with SingleIntrinsic has the other domain instead: the target's
// native atomics, element by element, for every accumulate-class operation, and no lock.
//
// Why one domain per window: the two per-element mechanisms below the window do not exclude each
// other — the target's CPU atomics (rma Rmw and CompareSwap, the lock-free FetchAndOp path this
// package had) and rma Acc, which on shared memory adds with plain loads and stores under the
// memory region's own lock — and neither excludes a get–combine–put of a range. A fetching
// accumulate of an array can only be made atomic, at bulk speed, under a lock that every other
// accumulate to the same words takes too; keeping lock-free single-element atomics beside it
// would lose updates whenever the two meet. The price of the default is on single elements: a
// FetchAndOp, CompareAndSwap or short Accumulate alone in its flush is a lock, the operation and
// an unlock (three remote operations where it was one), unless it shares the flush with others or
// runs under an exclusive lock; SingleIntrinsic makes it one atomic again and arrays slow. To a
// same-node rank with nothing queued for it, a one-element operation runs at issue (see the
// package doc): the same lock, operation and unlock, as the lock's compare-and-swap, a load and a
// store of the element, and the unlock's swap on the mapped memory, in the same domain (the lock
// orders the load and store with every other accumulate-class operation to the element).
// rma-level accumulates that bypass the window (rt.Acc on a Create'd window's segment) are
// outside either domain, as MPI leaves accesses outside the window interface undefined.
type AccOps uint8

const (
	// AccSameOpNoOp (MPI's default accumulate_ops=same_op_no_op): concurrent accumulate-class
	// operations to one location use the same op, or MPI_NO_OP. Accepted for the info key's sake;
	// the window does not use the promise (see AccOps): every operation takes the accumulate
	// lock.
	AccSameOpNoOp AccOps = iota
	// AccAnyOp (accumulate_ops unset in MPI terms: any ops may meet). The same single domain:
	// all accumulate-class operations are atomic per element with respect to each other whatever
	// their ops.
	AccAnyOp
)

// Option configures a window at Create/Allocate.
type Option func(*options)

type options struct {
	reorder bool
	accOps  AccOps
	native  bool
	depth   int
}

// Reorder turns the reordering policy on (the default) or off. On: the puts and gets queued in
// an epoch are issued interleaved, balancing the bytes of both link directions ([Vishnu07 §5.2.2],
// §5.3.4). Off: they are issued in program order. Either way nothing is ordered inside an epoch
// [Vishnu07 §5.2.5] except accumulate-class operations from this rank to one target, which are
// applied in program order (MPI's default accumulate_ordering).
func Reorder(on bool) Option { return func(o *options) { o.reorder = on } }

// AccumulateOps sets the accumulate_ops mode (default AccSameOpNoOp).
func AccumulateOps(m AccOps) Option { return func(o *options) { o.accOps = m } }

// SingleIntrinsic selects the window's other atomicity domain (default off; Open MPI's info key
// acc_single_intrinsic): every accumulate-class operation is applied element by element with the
// target's native atomics and no accumulate lock — integer SUM and NO_OP a fetch-and-add,
// REPLACE a swap, the other ops a compare-and-swap loop on the element's 4- or 8-byte word
// (Complex64 is one 8-byte word), CompareAndSwap the native one, Accumulate(SUM) included. All
// accumulate-class operations of the window are then atomic per element with respect to each
// other, and a one-element FetchAndOp, CompareAndSwap or Accumulate is one remote atomic (a
// round trip on the network) instead of a lock, the operation and an unlock. Arrays cost one or
// more remote atomics per element (a GetAccumulate of 1 MiB is hundreds of times slower than
// under the lock): meant for windows of counters, flags and queues. Complex128, whose elements
// are two words, allows only Accumulate(SUM) (component-wise, exact since additions commute);
// its other operations are ErrOp. Every rank must pass the same setting.
func SingleIntrinsic(on bool) Option { return func(o *options) { o.native = on } }

// QueueDepth sets how many operations an epoch queues before it issues them without waiting for
// the epoch to close (default 64; at least 1).
func QueueDepth(n int) Option { return func(o *options) { o.depth = max(n, 1) } }

// Layout of a window's synchronization segment (per rank, every word 8 bytes, 8-byte aligned):
// the passive-target lock word, the accumulate lock word, the PSCW completion counter, the fence
// barrier's round flags, and one "exposure granted" flag per target rank.
const (
	offLock     = 0
	offAccLock  = 8
	offDone     = 16
	offFence    = 24
	fenceRounds = 64
	offGrant    = offFence + 8*fenceRounds

	// lockWriter is the exclusive holder's bit in the lock word; shared holders count below it.
	lockWriter = int64(1) << 32
)

func syncBytes(n int) int { return offGrant + 8*n }

// targetState is what a window keeps of one rank as a target, in one place: the checks and the
// same-node path of an operation to it read one or two cache lines.
type targetState struct {
	// words is its part of the synchronization segment as this process maps it, as 8-byte words
	// for the CPU's atomics (faa, swap, cas); data its part of the data segment (see mapped).
	// Taken at Create; nil: not direct, or not mapped.
	words []uint64
	data  []byte

	size    int // bytes of its window
	disp    int // its disp_unit
	maxDisp int // its largest displacement whose byte offset fits an int
	queued  int // operations of w.q to it

	// direct: it is reached through a mapped view or is this rank (rma transport "shm" or
	// "self"): every rma operation to it completes at issue, so a small operation to it runs at
	// once instead of being queued (atOnce).
	direct  bool
	noCheck bool // locked by Lock with ModeNoCheck (no lock word held)
}

// Window is an MPI-2/3 window (MPI_Win) on this rank: a part of an rma segment on every rank,
// addressed by (target rank, displacement in units of the target's disp_unit), plus a small
// synchronization segment holding its lock words, flags and counters.
//
// A Window is used by one goroutine at a time (its epochs are this rank's program order), like an
// MPI window under MPI_THREAD_FUNNELED.
type Window struct {
	rt      *rma.Runtime
	data    *rma.Segment
	ownData bool
	sync    *rma.Segment
	me, n   int
	opt     options

	tgt []targetState // per target rank

	ep        Epochs
	epScratch *Epochs

	// passive target
	allNoCheck bool // LockAll with ModeNoCheck

	// PSCW
	postSeq    []uint64 // per origin: Posts this rank made to it
	startSeq   []uint64 // per target: Starts this rank made to it
	expectDone uint64   // completions this rank's Posts expect in total

	// fence
	fenceID uint64

	// spinMax is how many polls a local wait (pollLocal) may spin before it yields: spinPolls
	// when the window's ranks on this machine have a core each, else 0 (decided at Create, as
	// rma's waits); spin is the current budget, adapted by pollLocal within [spinFloor, spinMax]
	// (see there).
	spinMax, spin int

	// operations
	q        []op
	sel      []op
	dirs     []dir
	sizesQ   []int
	order    []int
	pend     []pending
	touched  []bool
	nTouched int // targets set in touched
	scratch  []byte
	word     [8]byte // one element's combination (applyOne)

	freed bool
}

// Create makes a window over rank-local memory the runtime already owns (MPI_Win_create over
// memory from MPI_Alloc_mem): this rank's part is seg's part on this rank, all of it; sizes may
// differ per rank. dispUnit (bytes, > 0) scales the displacements that name this rank's window;
// ranks may pass different units. Collective over all ranks of rt. Errors: ErrArg (dispUnit ≤ 0,
// nil segment), errors of rma.Malloc/AllReduce. seg stays the caller's: Free does not free it.
func Create(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, dispUnit int, opts ...Option) (*Window, error) {
	if seg == nil {
		return nil, fmt.Errorf("%w: Create over a nil segment", ErrArg)
	}
	return create(ctx, rt, seg, false, dispUnit, opts)
}

// Allocate allocates a window of size bytes on this rank (MPI_Win_allocate; sizes may differ per
// rank, 0 allowed), zeroed, with displacement unit dispUnit bytes. Collective. Local returns the
// memory; Free releases it. Errors: ErrArg (size < 0, dispUnit ≤ 0), rma errors.
func Allocate(ctx context.Context, rt *rma.Runtime, size, dispUnit int, opts ...Option) (*Window, error) {
	if size < 0 || dispUnit <= 0 {
		return nil, fmt.Errorf("%w: Allocate(size %d, disp_unit %d)", ErrArg, size, dispUnit)
	}
	seg, err := rt.Malloc(ctx, size)
	if err != nil {
		return nil, fmt.Errorf("window: Allocate: %w", err)
	}
	w, err := create(ctx, rt, seg, true, dispUnit, opts)
	if err != nil {
		_ = seg.Free(ctx)
		return nil, err
	}
	return w, nil
}

func create(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, own bool, dispUnit int, opts []Option) (*Window, error) {
	if dispUnit <= 0 {
		return nil, fmt.Errorf("%w: disp_unit %d", ErrArg, dispUnit)
	}
	o := options{reorder: true, accOps: AccSameOpNoOp, depth: 64}
	for _, f := range opts {
		f(&o)
	}
	n, me := rt.Size(), rt.Rank()
	sync, err := rt.Malloc(ctx, syncBytes(n))
	if err != nil {
		return nil, fmt.Errorf("window: Create: %w", err)
	}
	// every rank learns every disp_unit: a sum over vectors with one non-zero slot each
	units := make([]byte, 8*n)
	binary.LittleEndian.PutUint64(units[8*me:], uint64(dispUnit))
	if err := rt.AllReduce(ctx, rma.AccInt64, rma.ReduceSum, units); err != nil {
		_ = sync.Free(ctx)
		return nil, fmt.Errorf("window: Create: %w", err)
	}
	w := &Window{
		rt: rt, data: seg, ownData: own, sync: sync, me: me, n: n, opt: o,
		tgt:      make([]targetState, n),
		ep:       *NewEpochs(n),
		postSeq:  make([]uint64, n),
		startSeq: make([]uint64, n),
		touched:  make([]bool, n),
	}
	machine := 0
	for p := 0; p < n; p++ {
		w.tgt[p].size = seg.Len(p)
		w.tgt[p].disp = int(binary.LittleEndian.Uint64(units[8*p:]))
		w.tgt[p].maxDisp = math.MaxInt / w.tgt[p].disp
		switch rt.TransportTo(p) {
		case "shm", "self":
			w.tgt[p].direct = true
		}
		if rt.SameNode(p) {
			machine++
		}
	}
	w.mapParts(ctx)
	w.spinMax = spinBudget(machine, runtime.NumCPU())
	w.spin = w.spinMax
	return w, nil
}

// Free releases the window (MPI_Win_free): collective; no epoch may be open (ErrRMASync, nothing
// changed). The memory of an Allocate'd window is freed; a Create'd window's segment is not.
func (w *Window) Free(ctx context.Context) error {
	if w.freed {
		return fmt.Errorf("%w: Free twice", ErrFreed)
	}
	if err := w.ep.Free(); err != nil {
		return err
	}
	w.freed = true
	err := w.sync.Free(ctx)
	if w.ownData {
		if e := w.data.Free(ctx); e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		return fmt.Errorf("window: Free: %w", err)
	}
	return nil
}

// Local is this rank's window memory (MPI_Win_shared_query on self / the base pointer).
// Local loads and stores to it follow MPI's rules: outside an exposure of it, or separated from
// remote accesses by the epoch calls.
func (w *Window) Local() []byte { return w.data.Local() }

// Len is the size in bytes of rank p's window (0 for a bad rank).
func (w *Window) Len(p int) int {
	if p < 0 || p >= w.n {
		return 0
	}
	return w.tgt[p].size
}

// DispUnit is rank p's displacement unit in bytes (0 for a bad rank).
func (w *Window) DispUnit(p int) int {
	if p < 0 || p >= w.n {
		return 0
	}
	return w.tgt[p].disp
}

// Runtime is the rma runtime the window lives on.
func (w *Window) Runtime() *rma.Runtime { return w.rt }

// Reordering reports whether the reordering policy is on.
func (w *Window) Reordering() bool { return w.opt.reorder }

func (w *Window) alive() error {
	if w.freed {
		return ErrFreed
	}
	return nil
}
