package rma

import (
	"context"
	"fmt"

	"github.com/goarmci/goarmci/ibv"
)

// Notify tells rank proc that every operation this rank issued to it so far is complete at proc
// (armci_notify): it fences proc, then adds one to this rank's notify counter in proc's memory. It
// returns how many notifies this rank has sent to proc (1 for the first). Calls for one proc are
// made by one goroutine at a time. Errors: those of Fence and Rmw (ErrBadRank, ErrPeerFailed,
// transport and context errors).
func (r *Runtime) Notify(ctx context.Context, proc int) (int64, error) {
	if err := r.Fence(ctx, proc); err != nil {
		return 0, err
	}
	if _, err := r.atomicOp(ctx, ibv.OpAtomicFetchAdd, r.notify, proc, 8*r.rank, 1, 0); err != nil {
		return 0, fmt.Errorf("rma: notify rank %d: %w", proc, err)
	}
	r.notified[proc]++
	return r.notified[proc], nil
}

// NotifyWait waits for the next notify from rank proc (armci_notify_wait): when it returns, every
// operation proc issued to this rank before that Notify is complete here. It returns how many
// notifies from proc this rank has now waited for. Calls for one proc are made by one goroutine
// at a time. Errors: ErrBadRank, ErrPeerFailed (proc failed before its notify arrived), ctx's;
// ErrPartition when proc cannot be reached.
func (r *Runtime) NotifyWait(ctx context.Context, proc int) (int64, error) {
	if _, err := r.peer(ctx, proc); err != nil {
		return 0, err
	}
	want := r.awaited[proc] + 1
	if err := r.awaitCount(ctx, proc, r.notify.local[8*proc:8*proc+8], uint64(want), nil); err != nil {
		return 0, fmt.Errorf("rma: notify wait for rank %d: %w", proc, err)
	}
	r.awaited[proc] = want
	return want, nil
}
