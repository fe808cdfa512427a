package rma_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// survivorTraffic checks that survivors still reach each other after a failure: each survivor
// puts into its own slot of the next survivor's part and reads it back.
func survivorTraffic(ctx context.Context, t testing.TB, rt *rma.Runtime, seg *rma.Segment, survivors []int) {
	t.Helper()
	me := -1
	for i, s := range survivors {
		if s == rt.Rank() {
			me = i
		}
	}
	require.GreaterOrEqual(t, me, 0)
	next := survivors[(me+1)%len(survivors)]
	want := []byte{byte(rt.Rank() + 1), 0xa5, byte(next), 0x5a, 1, 2, 3, 4}
	require.NoError(t, rt.Put(ctx, want, seg, next, 8*rt.Rank()), "put to surviving rank %d", next)
	require.NoError(t, rt.Fence(ctx, next))
	got := make([]byte, len(want))
	require.NoError(t, rt.Get(ctx, seg, next, 8*rt.Rank(), got), "get from surviving rank %d", next)
	require.Equal(t, want, got)
	survivorsDone(ctx, t, rt, seg, survivors)
}

// survivorsDone is a barrier of the survivors (no barrier of the job completes after a failure):
// two counters in the first survivor's part, so no survivor tears its runtime down while
// another still reaches it. seg's words 56 and 48 (bytes) hold the counters.
func survivorsDone(ctx context.Context, t testing.TB, rt *rma.Runtime, seg *rma.Segment, survivors []int) {
	t.Helper()
	host, n := survivors[0], int64(len(survivors))
	arrive := func(off int) {
		_, err := rt.Rmw(ctx, rma.FetchAndAddLong, seg, host, off, 1)
		require.NoError(t, err, "survivors' barrier at rank %d", host)
	}
	wait := func(off int) {
		for {
			v, err := rt.Rmw(ctx, rma.FetchAndAddLong, seg, host, off, 0)
			require.NoError(t, err, "survivors' barrier at rank %d", host)
			if v == n {
				return
			}
			require.NoError(t, ctx.Err())
			time.Sleep(time.Millisecond)
		}
	}
	arrive(56)
	wait(56)
	arrive(48)
	if rt.Rank() == host {
		wait(48) // the others' last operations reach this rank: it leaves last
	}
}

// requirePeerFailed checks err wraps rma.ErrPeerFailed and names rank.
func requirePeerFailed(t testing.TB, err error, rank int, what string) {
	t.Helper()
	require.Error(t, err, what)
	require.True(t, errors.Is(err, rma.ErrPeerFailed), "%s: %v", what, err)
	require.Contains(t, err.Error(), "rank "+string(rune('0'+rank))+" exited before Finalize", what)
}

// TestPeerFailureInjected: a failure reported by the bootstrap (rmatest's group stands in for
// the rendezvous) ends every survivor's barrier with ErrPeerFailed naming the rank, whether the
// survivor was already waiting or enters later; operations, fences and mutex locks aimed at the
// failed rank fail the same way at once, as do collectives, and survivors keep reaching each
// other.
func TestPeerFailureInjected(t *testing.T) {
	for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
		t.Run(string(tr), func(t *testing.T) {
			var g *rmatest.Group
			rmatest.Run(t, 4, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				seg, err := rt.Malloc(ctx, 64)
				require.NoError(t, err)
				require.NoError(t, rt.CreateMutexes(ctx, 1))
				require.NoError(t, rt.Barrier(ctx))
				if rt.Rank() == 1 {
					// Rank 1 "dies" once every survivor has left the barrier above (else theirs
					// may end with the failure too: a barrier is not uniform under failures): it
					// stops taking part, and the bootstrap reports it.
					for {
						v, err := rt.Rmw(ctx, rma.FetchAndAddLong, seg, 1, 40, 0)
						require.NoError(t, err)
						if v == 3 {
							break
						}
						time.Sleep(time.Millisecond)
					}
					g.Fail(1, nil)
					return
				}
				// (Over tcp its acknowledgment may still be on the way when rank 1 fails: the
				// operation then reports the failure.)
				if _, err = rt.Rmw(ctx, rma.FetchAndAddLong, seg, 1, 40, 1); err != nil {
					requirePeerFailed(t, err, 1, "arrival at rank 1")
				}
				// Survivors may be waiting in this barrier when the failure arrives, or enter
				// it after: either way it ends with the failure.
				requirePeerFailed(t, rt.Barrier(ctx), 1, "barrier")
				requirePeerFailed(t, rt.Barrier(ctx), 1, "second barrier")
				requirePeerFailed(t, rt.BarrierWith(ctx, rma.BarrierGatherBroadcast), 1, "gather barrier")
				requirePeerFailed(t, rt.AllReduce(ctx, rma.AccFloat64, rma.ReduceSum, make([]byte, 8)), 1, "all-reduce")
				requirePeerFailed(t, rt.AllGather(ctx, make([]byte, 4), []int{0, 1, 2, 3, 4}), 1, "all-gather")
				requirePeerFailed(t, rt.Broadcast(ctx, 0, make([]byte, 8)), 1, "broadcast")
				requirePeerFailed(t, rt.Put(ctx, []byte{1}, seg, 1, 0), 1, "put to the failed rank")
				requirePeerFailed(t, rt.Get(ctx, seg, 1, 0, make([]byte, 1)), 1, "get from the failed rank")
				requirePeerFailed(t, rt.Fence(ctx, 1), 1, "fence")
				require.NoError(t, rt.AllFence(ctx), "all-fence: nothing in flight to the failed rank")
				requirePeerFailed(t, rt.Lock(ctx, 0, 1), 1, "lock on the failed rank")
				require.Equal(t, []int{1}, rt.FailedRanks())
				survivorTraffic(ctx, t, rt, seg, []int{0, 2, 3})
				// A mutex of a survivor still works between survivors.
				require.NoError(t, rt.Lock(ctx, 0, rt.Rank()))
				require.NoError(t, rt.Unlock(ctx, 0, rt.Rank()))
			}, rmatest.Transport(tr), rmatest.UseGroup(func(gr *rmatest.Group) { g = gr }))
		})
	}
}
