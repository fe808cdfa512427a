package window

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/goarmci/goarmci/internal/accum"
	"github.com/goarmci/goarmci/internal/xunix"
)

// backoff paces a polling loop: it yields the processor to other processes (sched_yield) for a
// while, letting this process's other goroutines run (runtime.Gosched) every 16th wait, then
// sleeps, doubling up to 100 µs (poll briefly before parking, so ranks that
// outnumber the cores do not starve each other, and waking a parked process costs tens of µs).
// sched_yield rather than Gosched on most waits: a Gosched makes the Go scheduler wake an idle
// thread, which on a busy node takes the core from the rank being waited for (an order of
// magnitude on the rma barrier under load: bench/README.md, "Design measurements"; package rma's
// pollUntil).
//
// yields is the number of waits before sleeping: the zero value (retryYields) suits loops that
// retry a remote atomic (lock words), pollYields loops that read local memory.
type backoff struct {
	n      int
	d      time.Duration
	yields int
}

const (
	retryYields = 200  // each retry is a remote operation: back off to sleeps soon
	pollYields  = 4096 // a local load per poll: keep the core for a few ms before parking
)

func (b *backoff) wait(ctx context.Context) error {
	if b.yields == 0 {
		b.yields = retryYields
	}
	if b.n < b.yields {
		b.n++
		if b.n%64 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if b.n%16 == 0 {
			runtime.Gosched()
		} else {
			xunix.SchedYield()
		}
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.d == 0 {
		b.d = time.Microsecond
	}
	time.Sleep(b.d)
	b.d = min(2*b.d, 100*time.Microsecond)
	return nil
}

// pollLocal waits until the 8-byte word at byte offset off of this rank's synchronization
// segment reaches at least v (written by the ranks from with remote atomics). Once the wait has
// backed off to sleeps it probes those ranks every probeEvery (a fetch-and-add of 0 on their
// fence word): with nothing of its own in flight to them, a waiting rank would otherwise never
// learn that they can no longer reach it (a network partition ends the probe with
// rma.ErrPartition after GOARMCI_PARTITION_TIMEOUT), and would wait forever.
//
// It first spins on the word (only where the window's ranks on this machine have a core each:
// spinBudget), then backs off as above. A flag that another rank's core is about to write is then
// seen one cache-line transfer after the write, where each sched_yield is a system call (it was
// nearly half of a PSCW epoch's profile); with more ranks than cores a spinning rank would hold
// the core of the rank it waits for, so it yields at once there. The spin adapts between
// spinFloor and the window's budget: doubled after a wait the spin ended, back to spinFloor after
// one it did not. Other processes can take the cores the count of ranks promised, and then the
// rank waited for runs only when this one gives its core up. On a 2-core machine busy with other
// jobs a fixed spin of thousands of polls, or one only halved on failure, made small fence and
// PSCW epochs several times slower than no spin at all; falling back to the floor did not.
func (w *Window) pollLocal(ctx context.Context, off int, v uint64, from ...int) error {
	word := w.sync.Local()[off : off+8]
	if w.spinMax > 0 {
		n := w.spin
		for i := 0; i < n; i++ {
			if got, err := accum.Load64(word); err != nil || got >= v {
				if i > 0 { // the spin, not an early peer, ended the wait
					w.spin = min(2*n, w.spinMax)
				}
				return err
			}
		}
		w.spin = spinFloor
	}
	b := backoff{yields: pollYields}
	var probed time.Time
	for {
		got, err := accum.Load64(word)
		if err != nil {
			return err
		}
		if got >= v {
			return nil
		}
		if err := b.wait(ctx); err != nil {
			return err
		}
		if b.d == 0 || len(from) == 0 {
			continue // still yielding
		}
		if probed.IsZero() {
			probed = time.Now()
		} else if time.Since(probed) >= probeEvery {
			for _, t := range from {
				if t == w.me {
					continue
				}
				if _, err := w.faa(ctx, t, offFence, 0); err != nil {
					return fmt.Errorf("rank %d unreachable: %w", t, err)
				}
			}
			probed = time.Now()
		}
	}
}

// spinPolls is the most polls pollLocal spins before its first yield where ranks have cores of
// their own: some tens of microseconds, so that a rank keeps its core through the peer's side of
// a small epoch even when the peer is briefly descheduled (a yield on a busy machine can hand the
// core to another job for a whole time slice).
const spinPolls = 1 << 16

// spinFloor is the least spin of an adaptive wait (pollLocal): a few hundred nanoseconds, so a
// wait that stopped spinning learns when spinning pays again.
const spinFloor = 64

// spinBudget is the number of polls a local wait spins before it yields: spinPolls when the
// ranks on this machine have a core each (ranks ≤ cores), else 0.
func spinBudget(machineRanks, cores int) int {
	if machineRanks <= cores {
		return spinPolls
	}
	return 0
}

// probeEvery is how often a wait that has backed off to sleeps probes the ranks it waits for.
const probeEvery = 100 * time.Millisecond

// words is t's part of the synchronization segment as mapped at Create (targetState.words), while rma
// says the mapping is stable (MappedStable: a few loads); nil otherwise, and then the caller
// goes through rma, which checks and reports what changed.
func (w *Window) words(t int) []uint64 {
	if ws := w.tgt[t].words; ws != nil && w.rt.MappedStable(w.sync) {
		return ws
	}
	return nil
}

// faa, swap and cas are the atomics on the 8-byte words of t's synchronization segment at byte
// offset off (a multiple of 8): the CPU's atomic instructions on the words mapped at Create for a
// direct t (words), rma's otherwise (rmw).
func (w *Window) faa(ctx context.Context, t, off int, v int64) (int64, error) {
	if ws := w.words(t); ws != nil {
		return int64(atomic.AddUint64(&ws[off/8], uint64(v)) - uint64(v)), nil
	}
	return w.syncRMW(ctx, t, off, accum.OpFetchAdd64, v, 0)
}

func (w *Window) swap(ctx context.Context, t, off int, v uint64) error {
	if ws := w.words(t); ws != nil {
		atomic.StoreUint64(&ws[off/8], v) // an xchg: the store of a swap whose old value goes nowhere
		return nil
	}
	_, err := w.syncRMW(ctx, t, off, accum.OpSwap64, int64(v), 0)
	return err
}

func (w *Window) cas(ctx context.Context, t, off int, cmp, v int64) (int64, error) {
	if ws := w.words(t); ws != nil {
		for { // the old value: the one that made it fail, or cmp
			if old := atomic.LoadUint64(&ws[off/8]); old != uint64(cmp) {
				return int64(old), nil
			}
			if atomic.CompareAndSwapUint64(&ws[off/8], uint64(cmp), uint64(v)) {
				return cmp, nil
			}
		}
	}
	return w.syncRMW(ctx, t, off, accum.OpCmpSwap64, v, cmp)
}

// syncRMW is faa's, swap's and cas's path through rmw.
func (w *Window) syncRMW(ctx context.Context, t, off int, op accum.Op, v, cmp int64) (int64, error) {
	old, err := w.rmw(ctx, w.sync, t, off, op, uint64(v), uint64(cmp))
	return int64(old), err
}

// ---- fence ----

// Fence is MPI_Win_fence: collective over all ranks. It completes every operation this rank
// queued in the closing fence epoch at its target (with a completion on every subchannel that
// carried data, [Vishnu07 §5.2.1]), then runs a dissemination barrier on the window's own flags
// ([Kini03 §3]: in round k each rank swaps the fence's id into flag k of rank me+2^k and polls
// its own flag k; ids only grow, so flags are never reset). Unless a has ModeNoSucceed a new
// fence epoch opens.
//
// Asserts, as the optimizations they allow: ModeNoPrecede skips the completion step (it is
// ErrRMASync if operations were queued, nothing changed); ModeNoPrecede|ModeNoSucceed skips the
// barrier too, so the fence is free (no epoch closes or opens across ranks). ModeNoStore and
// ModeNoPut are accepted and validated but skip nothing here: the only synchronization they would
// allow to skip is this rank's share of the barrier, which is collective (every rank takes every
// round), so one rank cannot leave it alone.
//
// Errors: ErrRMAConflict inside a PSCW or passive-target epoch, ErrRMASync, ErrArg (asserts),
// ErrFreed, transport and ctx errors.
func (w *Window) Fence(ctx context.Context, a Assert) error {
	if err := w.alive(); err != nil {
		return err
	}
	if err := w.probe(func(e *Epochs) error { return e.Fence(a) }); err != nil {
		return err
	}
	if a&ModeNoPrecede == 0 {
		if err := w.completeAll(ctx); err != nil {
			return err
		}
	}
	if a&ModeNoPrecede == 0 || a&ModeNoSucceed == 0 {
		if err := w.barrier(ctx); err != nil {
			return err
		}
	}
	return w.ep.Fence(a)
}

func (w *Window) barrier(ctx context.Context) error {
	if w.n == 1 {
		return nil
	}
	w.fenceID++
	id := w.fenceID
	for k, dist := 0, 1; dist < w.n; k, dist = k+1, dist*2 {
		to := (w.me + dist) % w.n
		if err := w.swap(ctx, to, offFence+8*k, id); err != nil {
			return fmt.Errorf("window: fence round %d to rank %d: %w", k, to, err)
		}
		if err := w.pollLocal(ctx, offFence+8*k, id, (w.me-dist+w.n)%w.n); err != nil {
			return fmt.Errorf("window: fence round %d: waiting for rank %d: %w", k, (w.me-dist+w.n)%w.n, err)
		}
	}
	return nil
}

// ---- post / start / complete / wait ----

// Post is MPI_Win_post: it opens an exposure epoch of this rank's window to the origins in group
// (any subset of ranks, this rank included) and grants each of them access by swapping the count
// of Posts it made to that origin into the origin's "exposure granted" flag for this rank (an
// RDMA-written flag the origin's Start polls). With ModeNoCheck no flag is written (the origins'
// Start must pass ModeNoCheck too). Errors: ErrRMASync (an exposure epoch is open),
// ErrRMAConflict, ErrArg (group, asserts), ErrFreed, transport and ctx errors.
func (w *Window) Post(ctx context.Context, group []int, a Assert) error {
	if err := w.alive(); err != nil {
		return err
	}
	if err := w.probe(func(e *Epochs) error { return e.Post(group, a) }); err != nil {
		return err
	}
	if a&ModeNoCheck == 0 {
		for _, o := range group {
			w.postSeq[o]++
			if err := w.swap(ctx, o, offGrant+8*w.me, w.postSeq[o]); err != nil {
				w.postSeq[o]--
				return fmt.Errorf("window: Post: grant to rank %d: %w", o, err)
			}
		}
	}
	w.expectDone += uint64(len(group))
	return w.ep.Post(group, a)
}

// Start is MPI_Win_start: it opens an access epoch to the targets in group, waiting until each
// has posted to this rank (its grant flag reached the number of Starts this rank made to it).
// With ModeNoCheck it does not wait. Errors: ErrRMASync (an access epoch is open),
// ErrRMAConflict (passive epoch, or a fence epoch with operations), ErrArg, ErrFreed, ctx's.
func (w *Window) Start(ctx context.Context, group []int, a Assert) error {
	if err := w.alive(); err != nil {
		return err
	}
	if err := w.probe(func(e *Epochs) error { return e.Start(group, a) }); err != nil {
		return err
	}
	if a&ModeNoCheck == 0 {
		for _, t := range group {
			if err := w.pollLocal(ctx, offGrant+8*t, w.startSeq[t]+1, t); err != nil {
				return fmt.Errorf("window: Start: waiting for rank %d to post: %w", t, err)
			}
		}
		for _, t := range group {
			w.startSeq[t]++
		}
	}
	return w.ep.Start(group, a)
}

// Complete is MPI_Win_complete: it completes every operation of the access epoch at its target
// (a completion on every subchannel that carried data, [Vishnu07 §5.2.1]), then adds one to each
// target's completion counter with a remote fetch-and-add, and closes the epoch. Errors:
// ErrRMASync without Start, ErrFreed, transport and ctx errors (the epoch stays open).
func (w *Window) Complete(ctx context.Context) error {
	if err := w.alive(); err != nil {
		return err
	}
	if !w.ep.InStart() {
		return w.ep.Complete() // the ErrRMASync
	}
	group := w.ep.Started()
	if err := w.completeAll(ctx); err != nil {
		return err
	}
	for _, t := range group {
		if _, err := w.faa(ctx, t, offDone, 1); err != nil {
			return fmt.Errorf("window: Complete: notify rank %d: %w", t, err)
		}
	}
	return w.ep.Complete()
}

// Wait is MPI_Win_wait: it blocks until every origin of the exposure epoch has called Complete
// (the completion counter, polled locally, reaches the total the Posts so far expect), then
// closes the epoch; the origins' operations are then in this rank's window. Errors: ErrRMASync
// without Post, ErrFreed, ctx's.
func (w *Window) Wait(ctx context.Context) error {
	if err := w.alive(); err != nil {
		return err
	}
	if !w.ep.InPost() {
		return w.ep.Wait()
	}
	if err := w.pollLocal(ctx, offDone, w.expectDone, w.ep.Posted()...); err != nil {
		return fmt.Errorf("window: Wait: %w", err)
	}
	return w.ep.Wait()
}

// Test is MPI_Win_test: Wait's check without blocking. It reports true (and closes the exposure
// epoch) when every origin has completed. Errors: ErrRMASync without Post, ErrFreed.
func (w *Window) Test() (bool, error) {
	if err := w.alive(); err != nil {
		return false, err
	}
	if !w.ep.InPost() {
		return false, w.ep.Wait()
	}
	v, err := accum.Load64(w.sync.Local()[offDone : offDone+8])
	if err != nil {
		return false, err
	}
	if v < w.expectDone {
		return false, nil
	}
	return true, w.ep.Wait()
}

// ---- passive target ----

// Lock is MPI_Win_lock: it opens a passive-target epoch to target t, acquiring t's lock word with
// remote atomics and no thread at the target: exclusive = compare-and-swap 0 → writer bit,
// retried with backoff; shared = fetch-and-add 1, undone and retried while the writer bit is set.
// It returns once the lock is held (shared holders overlap; exclusive ones exclude everyone).
// Shared holders can starve a waiting exclusive one. ModeNoCheck skips the lock word.
// Errors: ErrRMASync (t already locked, by Lock or LockAll), ErrRMAConflict, ErrRank, ErrArg,
// ErrFreed, transport and ctx errors (then nothing is held).
func (w *Window) Lock(ctx context.Context, l LockType, t int, a Assert) error {
	if err := w.alive(); err != nil {
		return err
	}
	// Epochs.Lock validates completely before it changes anything, and changes only fence,
	// nLocks and locks[t] (0 before): undone if the lock word cannot be taken. (probe would copy
	// every per-rank slice, O(ranks) per Lock.)
	fence, nLocks := w.ep.fence, w.ep.nLocks
	if w.ep.lockable(t, l, a) { // Epochs.Lock, its usual case inlined
		w.ep.locked(t, l)
	} else if err := w.ep.lock(t, l, a); err != nil {
		return err
	}
	if a&ModeNoCheck == 0 {
		// to a direct target the first attempt runs here, one atomic on the mapped word
		if ws := w.words(t); ws == nil || !tryLockWord(&ws[offLock/8], l) {
			if err := w.acquire(ctx, l, t); err != nil {
				w.ep.fence, w.ep.nLocks = fence, nLocks
				w.ep.locks[t] = 0
				return err
			}
		}
	}
	w.tgt[t].noCheck = a&ModeNoCheck != 0
	return nil
}

// acquire takes t's lock word, retrying with backoff.
func (w *Window) acquire(ctx context.Context, l LockType, t int) error {
	var b backoff
	for {
		ok, err := w.tryLock(ctx, l, t)
		if err != nil || ok {
			return err
		}
		if err := b.wait(ctx); err != nil {
			return fmt.Errorf("window: Lock(%v, %d): %w", l, t, err)
		}
	}
}

// tryLock makes one attempt at t's lock word (Lock's protocol): through the mapping
// (tryLockWord) or with rma's atomics.
func (w *Window) tryLock(ctx context.Context, l LockType, t int) (bool, error) {
	if ws := w.words(t); ws != nil {
		return tryLockWord(&ws[offLock/8], l), nil
	}
	if l == LockExclusive {
		old, err := w.syncRMW(ctx, t, offLock, accum.OpCmpSwap64, lockWriter, 0)
		if err != nil {
			return false, fmt.Errorf("window: Lock(exclusive, %d): %w", t, err)
		}
		return old == 0, nil
	}
	old, err := w.syncRMW(ctx, t, offLock, accum.OpFetchAdd64, 1, 0)
	if err != nil {
		return false, fmt.Errorf("window: Lock(shared, %d): %w", t, err)
	}
	if old&lockWriter == 0 {
		return true, nil
	}
	if _, err := w.faa(context.WithoutCancel(ctx), t, offLock, -1); err != nil {
		return false, fmt.Errorf("window: Lock(shared, %d): back off: %w", t, err)
	}
	return false, nil
}

// tryLockWord makes one attempt at a lock word this process maps: exclusive = compare-and-swap
// 0 → writer bit; shared = fetch-and-add 1, undone when the writer bit is set.
func tryLockWord(p *uint64, l LockType) bool {
	if l == LockExclusive {
		return atomic.CompareAndSwapUint64(p, 0, uint64(lockWriter))
	}
	if (atomic.AddUint64(p, 1)-1)&uint64(lockWriter) == 0 {
		return true
	}
	atomic.AddUint64(p, ^uint64(0))
	return false
}

// release gives back the lock l on t's lock word: fetch-and-add −1 (shared) or −writer bit.
func (w *Window) release(ctx context.Context, l LockType, t int) error {
	if ws := w.words(t); ws != nil {
		atomic.AddUint64(&ws[offLock/8], uint64(unlockDelta(l)))
		return nil
	}
	if _, err := w.syncRMW(ctx, t, offLock, accum.OpFetchAdd64, unlockDelta(l), 0); err != nil {
		return fmt.Errorf("window: Unlock(%d): %w", t, err)
	}
	return nil
}

// unlockDelta is what release adds to the lock word to give back l.
func unlockDelta(l LockType) int64 {
	if l == LockExclusive {
		return -lockWriter
	}
	return -1
}

// Unlock is MPI_Win_unlock: it completes every operation to t at t [Vishnu07 §5.2.1], releases
// t's lock word and closes the epoch. Errors: ErrRMASync (t not locked by Lock), ErrRank,
// ErrFreed, transport and ctx errors (the epoch stays open).
func (w *Window) Unlock(ctx context.Context, t int) error {
	if err := w.alive(); err != nil {
		return err
	}
	// As in Lock: Epochs.Unlock validates first and changes only nLocks and locks[t], undone when
	// completion or the release fails (the epoch stays open).
	l, nLocks := w.ep.Locked(t), w.ep.nLocks
	if l == 0 { // Epochs.Unlock, inlined
		return w.ep.unlockErr(t)
	}
	w.ep.unlocked(t)
	err := w.complete(ctx, t)
	if err == nil && !w.tgt[t].noCheck {
		if ws := w.words(t); ws != nil { // release's mapped path, inlined
			atomic.AddUint64(&ws[offLock/8], uint64(unlockDelta(l)))
		} else {
			err = w.release(ctx, l, t)
		}
	}
	if err != nil {
		w.ep.nLocks = nLocks
		w.ep.locks[t] = l
		return err
	}
	w.tgt[t].noCheck = false
	return nil
}

// LockAll is MPI_Win_lock_all: a shared lock on every rank's window, taken rank by rank as Lock
// does (ModeNoCheck: none taken). Errors as Lock's; on failure the locks taken are released.
func (w *Window) LockAll(ctx context.Context, a Assert) error {
	if err := w.alive(); err != nil {
		return err
	}
	if err := w.probe(func(e *Epochs) error { return e.LockAll(a) }); err != nil {
		return err
	}
	if a&ModeNoCheck == 0 {
		for t := 0; t < w.n; t++ {
			if err := w.acquire(ctx, LockShared, t); err != nil {
				for u := 0; u < t; u++ {
					_ = w.release(context.WithoutCancel(ctx), LockShared, u)
				}
				return err
			}
		}
	}
	w.allNoCheck = a&ModeNoCheck != 0
	return w.ep.LockAll(a)
}

// UnlockAll is MPI_Win_unlock_all: it completes every operation at its target, releases every
// shared lock and closes the epoch. Errors: ErrRMASync without LockAll, transport, ctx.
func (w *Window) UnlockAll(ctx context.Context) error {
	if err := w.alive(); err != nil {
		return err
	}
	if !w.ep.LockedAll() {
		return w.ep.UnlockAll()
	}
	if err := w.completeAll(ctx); err != nil {
		return err
	}
	if !w.allNoCheck {
		for t := 0; t < w.n; t++ {
			if err := w.release(ctx, LockShared, t); err != nil {
				return err
			}
		}
	}
	w.allNoCheck = false
	return w.ep.UnlockAll()
}

// Flush is MPI_Win_flush: it completes every operation to t at t (results of Get and the fetching
// operations are then in their buffers), inside a passive-target epoch to t. Errors: ErrRMASync
// outside one, ErrRank, ErrFreed, transport and ctx errors.
func (w *Window) Flush(ctx context.Context, t int) error {
	if err := w.alive(); err != nil {
		return err
	}
	if !w.ep.passiveTo(t) { // Epochs.Flush, inlined
		return w.ep.flushErr(t)
	}
	return w.complete(ctx, t)
}

// FlushAll is MPI_Win_flush_all: Flush for every target. ErrRMASync outside a passive epoch.
func (w *Window) FlushAll(ctx context.Context) error {
	if err := w.alive(); err != nil {
		return err
	}
	if err := w.ep.FlushAll(); err != nil {
		return err
	}
	return w.completeAll(ctx)
}

// FlushLocal is MPI_Win_flush_local: the origin buffers of the operations to t may be reused.
// Here it is Flush: an RC completion already means the data is placed at the target
// ([IBA] RC semantics), so local completion costs the same as remote completion.
func (w *Window) FlushLocal(ctx context.Context, t int) error { return w.Flush(ctx, t) }

// FlushLocalAll is MPI_Win_flush_local_all (FlushAll, for the reason FlushLocal gives).
func (w *Window) FlushLocalAll(ctx context.Context) error { return w.FlushAll(ctx) }

// probe checks a state transition on a copy of the machine, so the network work can run before
// the real machine commits (a failed network step leaves the epochs as they were).
// It reuses one scratch machine, so it allocates nothing.
func (w *Window) probe(f func(e *Epochs) error) error {
	if w.epScratch == nil {
		w.epScratch = NewEpochs(w.n)
	}
	w.ep.copyTo(w.epScratch)
	return f(w.epScratch)
}
