// Package window is goarmci's MPI-2/3 one-sided layer: windows (MPI_Win_create over runtime
// memory: Create; MPI_Win_allocate: Allocate; MPI_Win_free: Free) with access and exposure
// epochs, over the rma runtime ([MPI-3.1] ch. 11; [Vishnu07 ch. 5]).
//
// Synchronization: Fence with the asserts ModeNoPrecede, ModeNoSucceed, ModeNoStore, ModeNoPut
// (MPI_Win_fence); Post/Start/Complete/Wait/Test with groups (MPI_Win_post/start/complete/wait/
// test); Lock/Unlock shared or exclusive (MPI_Win_lock/unlock), LockAll/UnlockAll
// (MPI_Win_lock_all/unlock_all); Flush/FlushAll/FlushLocal/FlushLocalAll (MPI_Win_flush*).
// Operations: Put, Get (MPI_Put/MPI_Get), Accumulate with SUM, PROD, MAX, MIN, REPLACE
// (MPI_Accumulate), GetAccumulate (also NO_OP), FetchAndOp, CompareAndSwap
// (MPI_Get_accumulate, MPI_Fetch_and_op, MPI_Compare_and_swap), on the element types Int32,
// Int64, Float32, Float64, Complex64, Complex128 where MPI defines the op.
//
// The epoch rules live in a pure state machine (Epochs); misuse is an error wrapping ErrRMASync,
// ErrRMARange or ErrRMAConflict (MPI_ERR_RMA_SYNC/RANGE/CONFLICT), ErrRank, ErrArg, ErrType or
// ErrOp, and changes nothing.
//
// Mapping onto RDMA, with no thread at the target on any path:
//   - passive target: a readers/writer lock word in the target's synchronization segment, taken
//     with remote atomics (exclusive: compare-and-swap 0 → writer bit; shared: fetch-and-add 1,
//     undone and retried while the writer bit is set);
//   - PSCW: Post swaps a per-pair post count into each origin's "exposure granted" flag, which
//     Start polls locally; Complete adds one to a counter at each target, which Wait polls;
//   - fence: a dissemination barrier [Kini03 §3] on flags in the window's own segment;
//   - closing an epoch (Fence, Complete, Unlock, UnlockAll, Flush*) completes every operation at
//     its target: every queued operation is issued and waited for, and every target that carried
//     data gets an rma Fence, which completes every subchannel of its channel ([Vishnu07 §5.2.1]:
//     a completion on every subchannel used).
//
// Reordering [Vishnu07 §5.2.5, §5.3.4]: operations inside an epoch are queued (up to QueueDepth,
// then issued without waiting) and issued at the epoch's close; MPI orders nothing inside an
// epoch, so with the reordering policy on (Reorder(true), the default) puts and gets are
// interleaved, balancing the bytes on the two directions of the link (independent put and get
// queues, §5.2.2), so both directions carry data at once. Origin buffers must not change, and
// Get/fetch results must not be read, until the epoch closes or a Flush covers them (MPI rules).
//
// Operations at issue: to a rank reached through a mapped view or to this rank (rma transport
// "shm" or "self", where every rma operation completes inside its call), with nothing of the
// epoch queued for that rank, a Put or Get of up to 4 KiB and a one-element Accumulate,
// GetAccumulate, FetchAndOp or CompareAndSwap (at most 8 bytes) run inside the call, in the
// window's atomicity domain, without queue or allocation; a one-element FetchAndOp there is the
// accumulate lock, one load–combine–store, and the unlock. Anything behind a queued operation to
// the same rank is queued too, so accumulates still apply in program order.
//
// Same-node path: the window maps the parts of its direct ranks (its data and synchronization
// segments, rma's Runtime.Mapped) once, at Create, and while rma says they stay valid
// (MappedStable: runtime alive, segment not freed, no rank failed) every lock word, flag,
// counter, small copy and one-element operation to those ranks is the CPU's atomic instruction,
// load or store on the mapped memory, without rma's per-call dispatch. The instructions are the
// ones rma and the providers use for the same words (ibv.ApplyAtomic), so ranks on other nodes
// that reach the same words with atomic work requests stay consistent with them.
//
// Accumulate atomicity: see AccOps. Every accumulate-class operation runs under a per-target
// accumulate lock (a lock word taken with remote compare-and-swap), as Open MPI's osc/sm does:
// Accumulate(SUM) is an rma Acc under it, CompareAndSwap the target's compare-and-swap, the rest
// (GetAccumulate and FetchAndOp included) one get–combine–put of the operation's whole range.
// SingleIntrinsic windows use the target's native atomics per element for all of them instead.
// Accumulates from one origin to one target apply in program order, whether queued or run at
// issue.
//
// A Window is driven by one goroutine at a time.
package window
