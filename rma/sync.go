package rma

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/internal/accum"
	"github.com/goarmci/goarmci/internal/xunix"
)

// Fence blocks until every operation this rank issued to proc has completed at proc
// (ARMCI_Fence). To a network peer it then flushes the peer's multirail channel: every work
// request posted on each of its subchannels has completed (the multi-rail flush of
// [Vishnu07 §5.2.1], a completion on every subchannel used). Errors: those of the peer's rank
// check, ErrPeerFailed, and ctx's.
func (r *Runtime) Fence(ctx context.Context, proc int) error {
	pe, err := r.peer(ctx, proc)
	if err != nil {
		return err
	}
	if pe.net < 0 {
		return nil // nothing in flight (blocking operations on shm complete inside the call)
	}
	if pe.outstanding.Load() == 0 {
		return r.flush(ctx, proc)
	}
	n := r.nets[pe.net].net
	err = r.pollUntil(ctx, func() bool {
		if pe.outstanding.Load() == 0 || r.failedErr(proc) != nil {
			return true
		}
		n.Progress()
		return pe.outstanding.Load() == 0
	})
	if err == nil && pe.outstanding.Load() != 0 {
		err = r.failedErr(proc) // the wait ended because proc failed
	}
	if err != nil {
		return err
	}
	return r.flush(ctx, proc)
}

// flush is the multi-rail flush of Fence: it waits for every work request posted on every
// subchannel of the channel to network peer p [Vishnu07 §5.2.1] (nothing without a channel).
func (r *Runtime) flush(ctx context.Context, p int) error {
	ch := r.channel(p)
	if ch == nil {
		return nil
	}
	if err := ch.Flush(ctx); err != nil {
		return fmt.Errorf("rma: flush of the channel to rank %d: %w", p, err)
	}
	return nil
}

// AllFence blocks until every operation this rank issued has completed at its target
// (ARMCI_AllFence).
func (r *Runtime) AllFence(ctx context.Context) error {
	if err := r.check(); err != nil {
		return err
	}
	if len(r.nets) == 0 && !r.fail.any.Load() {
		return nil // every operation to a same-node rank completes inside its call
	}
	var failed error // a failed rank's: the survivors are fenced all the same
	for p := range r.peers {
		if r.failedErr(p) != nil && r.peers[p].outstanding.Load() == 0 {
			continue // a failed rank this rank has nothing in flight to
		}
		if err := r.Fence(ctx, p); err != nil {
			if !errors.Is(err, ErrPeerFailed) {
				return err
			}
			if failed == nil {
				failed = err
			}
		}
	}
	return failed
}

// WaitAll completes every outstanding non-blocking operation of this rank (ARMCI_WaitAll).
func (r *Runtime) WaitAll(ctx context.Context) error { return r.AllFence(ctx) }

// Barrier synchronizes all ranks (ARMCI_Barrier): it first completes this rank's outstanding
// operations (AllFence), then runs the job's barrier algorithm, chosen once at Init from
// GOARMCI_BARRIER (Config.Barrier): by default ("auto") from the job's shape — every rank on
// one node: the RDMA dissemination barrier over shared memory; several ranks on each of several
// nodes: the hierarchical barrier (shared memory within a node, the nodes' leaders over the
// network); one rank per node (or GOARMCI_TRANSPORT=tcp): a datagram barrier, or RGM where the
// network carries multicast and the job is large (barrier_choice.go; the measurements behind
// the policy are in bench/README.md, "Barrier choice"). BarrierAlg reports the choice;
// BarrierWith runs another.
//
// The dissemination barrier is [Kini03 §3]'s "RDS": in round k every rank writes the barrier's id
// into flag k of rank (me+2^k) mod N and polls its own flag k until the id written by rank (me−2^k)
// mod N arrives. The ids only grow, so the flags never need resetting ([Kini03 §4], "barrier_id").
// The polled word is never read torn: a same-node rank writes it with a release store, a network
// rank with an 8-byte atomic swap rather than an RDMA write, posted as [Kini03 §3]'s write, whose
// completion the barrier reaps before returning (signal.go). Errors: ErrPeerFailed naming a failed
// rank, ErrPartition, ctx's, transport errors.
func (r *Runtime) Barrier(ctx context.Context) error {
	if err := r.AllFence(ctx); err != nil {
		return err
	}
	return r.barrier(ctx)
}

// barrier is Barrier without its AllFence, for the collectives that complete their own
// operations first.
func (r *Runtime) barrier(ctx context.Context) error { return r.barrierOf(ctx, r.barrierAlg) }

// barrierOf runs one barrier of algorithm alg (checked by checkBarrierAlg) and reaps the
// signals the RDMA algorithms posted to network peers.
func (r *Runtime) barrierOf(ctx context.Context, alg BarrierAlg) error {
	if err := r.anyFailedErr(); err != nil {
		return fmt.Errorf("rma: barrier: %w", err) // it can no longer complete
	}
	if r.size == 1 {
		return nil
	}
	r.barrierID++
	id := r.barrierID
	var err error
	switch alg {
	case BarrierDissemination:
		err = r.disseminationBarrier(ctx, id)
	case BarrierPairwise:
		err = r.pairwiseBarrier(ctx, id)
	case BarrierRGM:
		err = r.rgmBarrier(ctx, id)
	case BarrierMessage:
		err = r.messageBarrier(ctx, id, nil, r.rank)
	case BarrierMessagePairwise:
		err = r.messagePairwiseBarrier(ctx, id, nil, r.rank)
	case BarrierHierarchical:
		err = r.hierarchicalBarrier(ctx, id)
	default:
		err = r.gatherBarrier(ctx, id)
	}
	return r.reaped(ctx, err) // the signals to network peers were posted, not waited for (signal.go)
}

func (r *Runtime) disseminationBarrier(ctx context.Context, id uint64) error {
	for k, dist := 0, 1; dist < r.size; k, dist = k+1, dist*2 {
		to := (r.rank + dist) % r.size
		if err := r.signal(ctx, to, k, id); err != nil {
			return fmt.Errorf("rma: barrier round %d to rank %d: %w", k, to, err)
		}
		from := (r.rank - dist + r.size) % r.size
		if err := r.await(ctx, k, id, from); err != nil {
			return fmt.Errorf("rma: barrier round %d: waiting for rank %d: %w", k, from, err)
		}
	}
	return nil
}

// pollUntil waits for cond: it first spins on cond for r.spin polls (only where every rank of
// this machine has a core to itself: spinRanks), then yields the processor to other processes
// (sched_yield) between polls, letting this process's other goroutines run (runtime.Gosched)
// every pollGoschedEvery polls, and after a while backs off to short sleeps (waking a parked
// process costs tens of µs, so park only after yielding for a while).
//
// Spinning first: a rank waiting for a flag that another rank's core is about to write sees it
// one cache-line transfer after the write, where a sched_yield costs a system call per poll. With
// more ranks than cores a spinning rank would take the core of the rank it waits for, so the spin
// budget is decided at Init from the ranks on this machine.
//
// sched_yield rather than runtime.Gosched on most polls: a Gosched hands the goroutine to the Go
// scheduler, which wakes an idle thread (wakep) to look for work; on a node whose cores are all
// busy that thread takes the core from the rank being waited for. The occasional Gosched keeps
// ranks that are goroutines of one process (tests) and the tcp reader goroutines making progress;
// before it, the tcp devices' progress calls wake the readers whose sockets have data, which the
// Go scheduler would otherwise leave parked while this wait keeps the rank's processor busy: a
// wait with tcp devices makes the calls once every pollProgressEvery polls of its spin and on
// every yield. A wait whose progress call woke a reader hands it the processor (Gosched) and
// starts its yields over: a rank that serves other ranks' operations while it waits (the target
// of a stream of puts, waiting in a barrier) keeps answering them within a yield, where a
// sleeping one would answer a thread wake-up later. The sleeps at the end park (park): a
// tcp reader that delivers frames ends them at once.
func (r *Runtime) pollUntil(ctx context.Context, cond func() bool) error {
	return r.pollUntilProbe(ctx, cond, nil)
}

// pollUntilProbe is pollUntil that, once it has backed off to sleeps, calls probe every
// probeEvery and ends the wait with probe's error. Barriers probe the rank whose flag they wait
// for: with nothing of its own in flight to that rank, a waiting rank would never learn that the
// rank it waits for can no longer reach it (a network partition: the probe fails with
// ErrPartition after GOARMCI_PARTITION_TIMEOUT), and would wait forever.
func (r *Runtime) pollUntilProbe(ctx context.Context, cond func() bool, probe func() error) error {
	if r.stats {
		t0 := time.Now()
		defer func() { r.syncWaitNS.Add(int64(time.Since(t0))) }()
	}
	for i := 0; i < r.spin; i++ {
		if cond() {
			return nil
		}
		if i%pollProgressEvery == pollProgressEvery-1 && r.progressCall() {
			runtime.Gosched() // a reader woke: it places its frames
		}
	}
	return r.yieldUntil(ctx, cond, probe)
}

// progressCall makes the tcp devices' progress calls and reports whether one woke a reader.
func (r *Runtime) progressCall() bool {
	woke := false
	for _, pr := range r.progress {
		woke = pr() || woke // readers parked while their frames arrived (tcp.Progress)
	}
	return woke
}

// yieldUntil is pollUntilProbe after its spin: the yields, then the sleeps with probes.
func (r *Runtime) yieldUntil(ctx context.Context, cond func() bool, probe func() error) error {
	for i := 0; i < r.yields; i++ {
		if cond() {
			return nil
		}
		if i%64 == 63 && ctx.Err() != nil {
			return ctx.Err()
		}
		if r.progressCall() {
			i = 0 // frames are arriving: this rank serves them, so it keeps yielding
			runtime.Gosched()
			continue
		}
		if i%pollGoschedEvery == pollGoschedEvery-1 {
			runtime.Gosched()
			continue
		}
		xunix.SchedYield()
	}
	d := r.pollSleep
	probed := time.Now()
	var t *time.Timer
	for !cond() {
		if err := ctx.Err(); err != nil {
			return err
		}
		r.park(ctx, cond, d, &t)
		d = min(2*d, r.pollSleepMax)
		if probe != nil && time.Since(probed) >= probeEvery {
			if err := probe(); err != nil {
				return err
			}
			probed = time.Now()
		}
	}
	return nil
}

// park is yieldUntil's sleep of d: without tcp devices a plain sleep; with them the wait also
// ends when a reader has delivered frames (onArrival), so that a wait for the network costs no
// core while it waits and a wake-up when its frame comes, not a timer's period later. t is the
// caller's timer, made on first use.
func (r *Runtime) park(ctx context.Context, cond func() bool, d time.Duration, t **time.Timer) {
	if r.arrived == nil {
		time.Sleep(d)
		return
	}
	r.parkers.Add(1)
	defer r.parkers.Add(-1)
	if cond() { // frames delivered before this wait was counted did not wake it
		return
	}
	if *t == nil {
		*t = time.NewTimer(d)
	} else {
		(*t).Reset(d)
	}
	select {
	case <-r.arrived:
	case <-(*t).C:
	case <-ctx.Done():
	}
}

// onArrival is the tcp devices' arrival hook (tcp.OnArrival): it wakes a parked wait, if any.
func (r *Runtime) onArrival() {
	if r.parkers.Load() > 0 {
		select {
		case r.arrived <- struct{}{}:
		default:
		}
	}
}

// awaitCount waits until the counter word, which rank p advances (a notify or an AllReduce
// flag), reaches want, polling with probes of p; it ends with failed's error when failed reports
// one first (nil: p's failure). Errors: a failure (ErrPeerFailed), ErrPartition, ctx's.
func (r *Runtime) awaitCount(ctx context.Context, p int, word []byte, want uint64, failed func() error) error {
	arrived := func() bool {
		v, _ := accum.Load64(word)
		return v >= want
	}
	if arrived() {
		return nil
	}
	if failed == nil {
		failed = func() error { return r.failedErr(p) }
	}
	err := r.pollUntilProbe(ctx, func() bool { return arrived() || failed() != nil }, r.liveness(ctx, p))
	if err == nil && !arrived() {
		err = failed()
	}
	return err
}

// probeEvery is how often a barrier that has backed off to sleeps probes the rank it waits for.
const probeEvery = 100 * time.Millisecond

// liveness returns the probe of rank from for pollUntilProbe: an atomic fetch-and-add of 0 on
// its first barrier flag (it reads, changes nothing), which completes while a path to from exists
// and fails with the transport's error (ErrPartition) when none does.
func (r *Runtime) liveness(ctx context.Context, from int) func() error {
	if from == r.rank {
		return nil
	}
	return func() error {
		if _, err := r.atomicOp(ctx, ibv.OpAtomicFetchAdd, r.sys, from, 0, 0, 0); err != nil {
			return fmt.Errorf("rank %d unreachable: %w", from, err)
		}
		return nil
	}
}

// pollUntil's sleeps between polls once it backed off (Runtime.pollSleep): the first, doubling to
// the last.
const (
	pollSleepFirst = 20 * time.Microsecond
	pollSleepLast  = time.Millisecond
)

// pollUntil's budget: polls before sleeping, and one Gosched in every pollGoschedEvery polls;
// pollSpins polls before the first yield where ranks have cores of their own (spinBudget).
const (
	pollYields       = 4096 + 64
	pollGoschedEvery = 16
	// pollProgressEvery: a spinning wait makes the progress calls once in so many polls (a
	// poll(2) each: a frame waits some microseconds, not the whole spin, for its reader; every
	// poll or every 4th was slower: bench/README.md, "Design measurements").
	pollProgressEvery = 16
	pollSpins         = 1 << 9
)

// spinBudget is the number of polls a wait spins before it yields: pollSpins when the ranks on
// this machine have a core each (ranks ≤ cores), else 0. It is decided once, at Init.
func spinBudget(machineRanks, cores int) int {
	if machineRanks <= cores {
		return pollSpins
	}
	return 0
}
