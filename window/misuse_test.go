package window

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
)

// TestMisuseChangesNothing: every misuse returns its MPI error class, queues nothing, holds no
// lock and leaves the target memory as it was.
func TestMisuseChangesNothing(t *testing.T) {
	each(t, []int{2, 3}, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		n, me := rt.Size(), rt.Rank()
		peer := (me + 1) % n
		w, err := Allocate(ctx, rt, 64, 8)
		require.NoError(t, err)
		word := make([]byte, 8)
		lockWord := func() int64 { // read atomically, as the lock's own atomics write it
			v, err := rt.Rmw(ctx, rma.FetchAndAddLong, w.sync, peer, offLock, 0)
			require.NoError(t, err)
			return v
		}

		// outside any epoch
		require.ErrorIs(t, w.Put(ctx, i64(1), peer, 0), ErrRMASync)
		require.ErrorIs(t, w.Get(ctx, word, peer, 0), ErrRMASync)
		require.ErrorIs(t, w.Accumulate(ctx, i64(1), Int64, peer, 0, OpSum), ErrRMASync)
		require.ErrorIs(t, w.Complete(ctx), ErrRMASync)
		require.ErrorIs(t, w.Wait(ctx), ErrRMASync)
		_, err = w.Test()
		require.ErrorIs(t, err, ErrRMASync)
		require.ErrorIs(t, w.Unlock(ctx, peer), ErrRMASync)
		require.ErrorIs(t, w.UnlockAll(ctx), ErrRMASync)
		require.ErrorIs(t, w.Flush(ctx, peer), ErrRMASync)
		require.ErrorIs(t, w.FlushAll(ctx), ErrRMASync)
		require.Empty(t, w.q)

		// inside a fence epoch: range, rank, type and op errors
		require.NoError(t, w.Fence(ctx, 0))
		require.ErrorIs(t, w.Put(ctx, make([]byte, 16), peer, 7), ErrRMARange)
		require.ErrorIs(t, w.Put(ctx, i64(1), peer, -1), ErrRMARange)
		require.ErrorIs(t, w.Get(ctx, make([]byte, 72), peer, 0), ErrRMARange)
		require.ErrorIs(t, w.Put(ctx, i64(1), n, 0), ErrRank)
		require.ErrorIs(t, w.Put(ctx, i64(1), -1, 0), ErrRank)
		require.ErrorIs(t, w.Accumulate(ctx, make([]byte, 16), Complex64, peer, 0, OpMax), ErrOp)
		require.ErrorIs(t, w.Accumulate(ctx, i64(1), Int64, peer, 0, OpNoOp), ErrOp)
		require.ErrorIs(t, w.Accumulate(ctx, i64(1), Int64, peer, 0, Op(99)), ErrOp)
		require.ErrorIs(t, w.Accumulate(ctx, i64(1), Type(99), peer, 0, OpSum), ErrType)
		require.ErrorIs(t, w.Accumulate(ctx, make([]byte, 6), Int32, peer, 0, OpSum), ErrType)
		require.ErrorIs(t, w.FetchAndOp(ctx, make([]byte, 16), make([]byte, 16), Int64, peer, 0, OpSum), ErrType)
		require.ErrorIs(t, w.GetAccumulate(ctx, make([]byte, 8), make([]byte, 16), Int64, peer, 0, OpSum), ErrType)
		require.ErrorIs(t, w.CompareAndSwap(ctx, i64(1), i64(0), word, Float64, peer, 0), ErrOp)
		require.ErrorIs(t, w.CompareAndSwap(ctx, i64(1), i64(0), word[:4], Int64, peer, 0), ErrType)
		require.Empty(t, w.q, "nothing queued by misuse")
		require.False(t, w.Epochs().fenceUsed, "misuse does not count as an operation in the fence epoch")
		// a misaligned accumulate (window with byte displacements)
		w1, err := Allocate(ctx, rt, 64, 1)
		require.NoError(t, err)
		require.NoError(t, w1.Fence(ctx, 0))
		require.ErrorIs(t, w1.Accumulate(ctx, i64(1), Int64, peer, 3, OpSum), ErrRMARange)
		require.NoError(t, w1.Fence(ctx, ModeNoSucceed))
		require.NoError(t, w1.Free(ctx))

		// a fence epoch with an operation conflicts with other epochs; NOPRECEDE is a sync error
		require.NoError(t, w.Put(ctx, i64(5), peer, 1))
		require.ErrorIs(t, w.Lock(ctx, LockShared, peer, 0), ErrRMAConflict)
		require.ErrorIs(t, w.Start(ctx, []int{peer}, 0), ErrRMAConflict)
		require.ErrorIs(t, w.Post(ctx, []int{peer}, 0), ErrRMAConflict)
		require.ErrorIs(t, w.Fence(ctx, ModeNoPrecede), ErrRMASync)
		require.ErrorIs(t, w.Free(ctx), ErrRMASync)
		if w.tgt[peer].direct { // applied at issue (Put to a same-node rank): nothing to survive in the queue
			require.Empty(t, w.q, "the put to a direct target ran at issue")
		} else {
			require.Len(t, w.q, 1, "the queued put survives the misuse")
		}
		require.ErrorIs(t, w.Fence(ctx, ModeNoCheck), ErrArg)
		require.NoError(t, w.Fence(ctx, ModeNoSucceed))
		require.Equal(t, int64(5), geti64(w.Local(), 1))
		for i := 0; i < 8; i++ {
			if i != 1 {
				require.Equal(t, int64(0), geti64(w.Local(), i), "element %d untouched by the rejected operations", i)
			}
		}
		require.NoError(t, rt.Barrier(ctx)) // everyone has checked before locks start

		// passive target: nested lock, conflicts, and the lock word never moves on misuse
		require.NoError(t, w.Lock(ctx, LockExclusive, peer, 0))
		held := lockWord()
		require.Equal(t, lockWriter, held&lockWriter)
		require.ErrorIs(t, w.Lock(ctx, LockShared, peer, 0), ErrRMASync)
		require.ErrorIs(t, w.LockAll(ctx, 0), ErrRMASync)
		require.ErrorIs(t, w.Fence(ctx, 0), ErrRMAConflict)
		require.ErrorIs(t, w.Start(ctx, []int{peer}, 0), ErrRMAConflict)
		require.ErrorIs(t, w.Free(ctx), ErrRMASync)
		require.ErrorIs(t, w.Lock(ctx, 3, me, 0), ErrArg)
		require.ErrorIs(t, w.Lock(ctx, LockShared, me, ModeNoPut), ErrArg)
		require.ErrorIs(t, w.Unlock(ctx, me), ErrRMASync)
		require.ErrorIs(t, w.Flush(ctx, me), ErrRMASync)
		require.Equal(t, LockExclusive, w.Epochs().Locked(peer))
		require.Equal(t, LockType(0), w.Epochs().Locked(me))
		require.NoError(t, w.Unlock(ctx, peer))
		require.NoError(t, rt.Barrier(ctx))
		require.Equal(t, int64(0), lockWord(), "lock word after unlock")

		// PSCW: nested start/post, bad groups
		require.ErrorIs(t, w.Post(ctx, []int{peer, peer}, 0), ErrArg)
		require.ErrorIs(t, w.Start(ctx, []int{n}, 0), ErrArg)
		require.NoError(t, w.Post(ctx, []int{peer}, 0))
		require.ErrorIs(t, w.Post(ctx, []int{peer}, 0), ErrRMASync)
		require.NoError(t, w.Start(ctx, []int{(me + n - 1) % n}, 0))
		require.ErrorIs(t, w.Start(ctx, []int{peer}, 0), ErrRMASync)
		require.ErrorIs(t, w.Lock(ctx, LockShared, peer, 0), ErrRMAConflict)
		require.NoError(t, w.Complete(ctx))
		require.NoError(t, w.Wait(ctx))
		require.True(t, w.Epochs().Idle())
		require.NoError(t, w.Free(ctx))
		require.ErrorIs(t, w.Free(ctx), ErrFreed)
		require.ErrorIs(t, w.Put(ctx, i64(1), peer, 0), ErrFreed)
	})
}

// TestFlushCompletesAtTarget: data put under a lock and flushed is in the target's memory when
// the target sees a flag set after the flush.
func TestFlushCompletesAtTarget(t *testing.T) {
	each(t, []int{2, 3}, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		seg := mustMalloc(ctx, t, rt, 4096)
		w, err := Create(ctx, rt, seg, 8)
		require.NoError(t, err)
		require.Equal(t, 4096, w.Len(1))
		require.Equal(t, 8, w.DispUnit(0))
		const words = 256
		switch rt.Rank() {
		case 0:
			data := make([]byte, 8*words)
			for i := 0; i < words; i++ {
				le.PutUint64(data[8*i:], uint64(1000+i))
			}
			require.NoError(t, w.LockAll(ctx, 0))
			require.NoError(t, w.Put(ctx, data, 1, 1))
			require.NoError(t, w.Flush(ctx, 1))
			res := make([]byte, 8)
			require.NoError(t, w.FetchAndOp(ctx, i64(1), res, Int64, 1, 0, OpSum))
			require.NoError(t, w.FlushLocal(ctx, 1))
			require.Equal(t, int64(0), geti64(res, 0))
			require.NoError(t, w.UnlockAll(ctx))
		case 1:
			res := make([]byte, 8)
			require.NoError(t, w.Lock(ctx, LockShared, 1, 0))
			for {
				require.NoError(t, w.FetchAndOp(ctx, nil, res, Int64, 1, 0, OpNoOp))
				require.NoError(t, w.FlushLocalAll(ctx))
				if geti64(res, 0) == 1 {
					break
				}
			}
			require.NoError(t, w.Unlock(ctx, 1))
			for i := 0; i < words; i++ {
				require.Equal(t, int64(1000+i), geti64(w.Local(), 1+i))
			}
		}
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, w.Free(ctx))
		require.NoError(t, seg.Free(ctx), "Free leaves a Create'd window's segment to its owner")
	})
}

func mustMalloc(ctx context.Context, t testing.TB, rt *rma.Runtime, n int) *rma.Segment {
	seg, err := rt.Malloc(ctx, n)
	require.NoError(t, err)
	return seg
}
