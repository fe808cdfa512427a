package window

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// each runs body with every rank count in nps over shm and tcp.
func each(t *testing.T, nps []int, body func(ctx context.Context, t testing.TB, rt *rma.Runtime)) {
	for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
		for _, np := range nps {
			t.Run(fmt.Sprintf("%s/np%d", tr, np), func(t *testing.T) {
				rmatest.Run(t, np, body, rmatest.Transport(tr), rmatest.Timeout(60*time.Second))
			})
		}
	}
}

var le = binary.LittleEndian

func i64(v int64) []byte { return le.AppendUint64(nil, uint64(v)) }
func geti64(b []byte, i int) int64 {
	return int64(le.Uint64(b[8*i:]))
}

// TestFence: puts and gets in fence epochs, every rank to every rank, with reordering on and off;
// NOSUCCEED ends the epochs; NOPRECEDE opens one without completing anything.
func TestFence(t *testing.T) {
	for _, reorder := range []bool{true, false} {
		t.Run(fmt.Sprintf("reorder=%v", reorder), func(t *testing.T) {
			each(t, []int{2, 3, 4}, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				const k = 64 // int64 per slot
				n, me := rt.Size(), rt.Rank()
				w, err := Allocate(ctx, rt, 2*n*k*8, 8, Reorder(reorder), QueueDepth(5))
				require.NoError(t, err)
				require.Equal(t, reorder, w.Reordering())
				loc := w.Local()
				for i := 0; i < n*k; i++ { // region B: the owner's values
					le.PutUint64(loc[8*(n*k+i):], uint64(me*100000+i))
				}
				require.NoError(t, w.Fence(ctx, ModeNoPrecede))
				src := make([]byte, 8*k)
				for i := 0; i < k; i++ {
					le.PutUint64(src[8*i:], uint64(me*1000+i))
				}
				got := make([][]byte, n)
				for p := 0; p < n; p++ {
					require.NoError(t, w.Put(ctx, src, p, me*k))
					got[p] = make([]byte, 8*k)
					require.NoError(t, w.Get(ctx, got[p], p, n*k+me*k))
				}
				require.NoError(t, w.Fence(ctx, 0))
				for q := 0; q < n; q++ {
					for i := 0; i < k; i++ {
						require.Equal(t, int64(q*1000+i), geti64(loc, q*k+i), "slot of rank %d", q)
					}
				}
				for p := 0; p < n; p++ {
					for i := 0; i < k; i++ {
						require.Equal(t, int64(p*100000+me*k+i), geti64(got[p], i), "from rank %d", p)
					}
				}
				require.Empty(t, w.q)
				// a second epoch, then NOSUCCEED: operations are then outside any epoch
				require.NoError(t, w.Put(ctx, i64(-1), (me+1)%n, n*k))
				require.NoError(t, w.Fence(ctx, ModeNoSucceed))
				require.Equal(t, int64(-1), geti64(loc, n*k))
				require.ErrorIs(t, w.Put(ctx, i64(1), 0, 0), ErrRMASync)
				// NOPRECEDE|NOSUCCEED: no synchronization at all
				require.NoError(t, w.Fence(ctx, ModeNoPrecede|ModeNoSucceed))
				require.NoError(t, w.Free(ctx))
				require.ErrorIs(t, w.Fence(ctx, 0), ErrFreed)
			})
		})
	}
}

// TestPSCW: a ring of partial groups (each rank exposes to its right neighbour and accesses its
// left one), then a star (rank 0 exposes to all others), then groups with the rank itself.
func TestPSCW(t *testing.T) {
	each(t, []int{2, 3, 4}, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		n, me := rt.Size(), rt.Rank()
		w, err := Allocate(ctx, rt, 8*(n+2), 8)
		require.NoError(t, err)
		loc := w.Local()
		left, right := (me+n-1)%n, (me+1)%n
		for round := 1; round <= 3; round++ {
			require.NoError(t, w.Post(ctx, []int{right}, 0))
			require.NoError(t, w.Start(ctx, []int{left}, 0))
			require.ErrorIs(t, w.Put(ctx, i64(1), me, 0), ErrRMASync, "self is not in the access group")
			require.NoError(t, w.Put(ctx, i64(int64(round*100+me)), left, n))
			require.NoError(t, w.Complete(ctx))
			require.NoError(t, w.Wait(ctx))
			require.Equal(t, int64(round*100+right), geti64(loc, n), "round %d", round)
		}
		// star: rank 0 exposes to everyone else, who each put into their own slot
		if me == 0 {
			others := make([]int, 0, n-1)
			for p := 1; p < n; p++ {
				others = append(others, p)
			}
			require.NoError(t, w.Post(ctx, others, 0))
			for {
				done, err := w.Test()
				require.NoError(t, err)
				if done {
					break
				}
				time.Sleep(50 * time.Microsecond)
			}
			for p := 1; p < n; p++ {
				require.Equal(t, int64(7000+p), geti64(loc, p))
			}
		} else {
			require.NoError(t, w.Start(ctx, []int{0}, 0))
			require.NoError(t, w.Accumulate(ctx, i64(7000+int64(me)), Int64, 0, me, OpSum))
			require.NoError(t, w.Complete(ctx))
		}
		// self in both groups, with NOCHECK on both sides for the self pair
		require.NoError(t, w.Post(ctx, []int{me}, ModeNoCheck))
		require.NoError(t, w.Start(ctx, []int{me}, ModeNoCheck))
		require.NoError(t, w.Put(ctx, i64(42), me, n+1))
		require.NoError(t, w.Complete(ctx))
		require.NoError(t, w.Wait(ctx))
		require.Equal(t, int64(42), geti64(loc, n+1))
		require.NoError(t, w.Free(ctx))
	})
}

// TestExclusiveLocksSerialize: every rank increments a counter on rank 0 by get, flush, put under
// an exclusive lock; the total is exact only if holders never overlap.
func TestExclusiveLocksSerialize(t *testing.T) {
	each(t, []int{2, 3, 4}, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		const iters = 15
		n := rt.Size()
		w, err := Allocate(ctx, rt, 8, 8)
		require.NoError(t, err)
		require.NoError(t, rt.Barrier(ctx))
		buf := make([]byte, 8)
		for i := 0; i < iters; i++ {
			require.NoError(t, w.Lock(ctx, LockExclusive, 0, 0))
			require.Equal(t, LockExclusive, w.Epochs().Locked(0))
			require.NoError(t, w.Get(ctx, buf, 0, 0))
			require.NoError(t, w.Flush(ctx, 0))
			v := geti64(buf, 0)
			require.NoError(t, w.Put(ctx, i64(v+1), 0, 0))
			require.NoError(t, w.Unlock(ctx, 0))
		}
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, w.Lock(ctx, LockShared, 0, 0))
		require.NoError(t, w.Get(ctx, buf, 0, 0))
		require.NoError(t, w.Unlock(ctx, 0))
		require.Equal(t, int64(n*iters), geti64(buf, 0))
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, w.Free(ctx))
	})
}

// TestSharedLocksOverlap: every rank takes a shared lock on rank 0, announces itself with a
// fetch-and-add and then waits, still holding the lock, until all ranks are in. If shared locks
// excluded each other this would never finish (the context would end it as a failure).
func TestSharedLocksOverlap(t *testing.T) {
	each(t, []int{2, 3, 4}, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		n := rt.Size()
		w, err := Allocate(ctx, rt, 8, 8)
		require.NoError(t, err)
		require.NoError(t, w.Lock(ctx, LockShared, 0, 0))
		res := make([]byte, 8)
		require.NoError(t, w.FetchAndOp(ctx, i64(1), res, Int64, 0, 0, OpSum))
		require.NoError(t, w.Flush(ctx, 0))
		in := geti64(res, 0)
		require.True(t, in >= 0 && in < int64(n))
		for {
			require.NoError(t, w.FetchAndOp(ctx, nil, res, Int64, 0, 0, OpNoOp))
			require.NoError(t, w.Flush(ctx, 0))
			if geti64(res, 0) == int64(n) {
				break // all n holders at once
			}
			time.Sleep(20 * time.Microsecond)
		}
		// the lock word shows the shared holders while they overlap; it is read atomically (a
		// fetch-and-add of 0): other ranks may be unlocking, and a plain Get racing with their
		// atomics is a conflicting access (the race detector said so for rank 0's own word)
		word, err := rt.Rmw(ctx, rma.FetchAndAddLong, w.sync, 0, offLock, 0)
		require.NoError(t, err)
		require.Equal(t, int64(0), word&lockWriter)
		require.GreaterOrEqual(t, word, int64(1))
		require.NoError(t, w.Unlock(ctx, 0))
		require.NoError(t, rt.Barrier(ctx))
		word, err = rt.Rmw(ctx, rma.FetchAndAddLong, w.sync, 0, offLock, 0)
		require.NoError(t, err)
		require.Equal(t, int64(0), word, "lock word after every unlock")
		require.NoError(t, w.Free(ctx))
	})
}
