package window

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
)

// TestMappedParts: a window keeps the parts of its direct ranks (this rank, and same-node ranks
// over shm) mapped from Create, and none of the others (tcp).
func TestMappedParts(t *testing.T) {
	each(t, []int{3}, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		w, err := Allocate(ctx, rt, 64, 8)
		require.NoError(t, err)
		for p := 0; p < rt.Size(); p++ {
			direct := p == rt.Rank() || rt.TransportTo(p) == "shm"
			require.Equal(t, direct, w.tgt[p].words != nil, "sync part of rank %d", p)
			require.Equal(t, direct, w.tgt[p].data != nil, "data part of rank %d", p)
			if direct {
				require.Len(t, w.tgt[p].data, 64)
				require.Len(t, w.tgt[p].words, syncBytes(rt.Size())/8)
			}
		}
		require.NoError(t, w.Free(ctx))
	})
}

// TestMappedLocksAndAtomicsExact: ranks update the same Int64 and Int32 words of rank 0, each
// with another mechanism, all at once: an exclusive lock around a Get, an add and a Put (the lock
// word taken with CPU atomics on shm); a CompareAndSwap retry loop under a shared lock; a
// FetchAndOp(SUM) and an Accumulate(SUM) of an array covering the words under a shared lock.
// Every update is applied exactly once (the words end with the sum of all of them), and the
// lock word is free at the end.
func TestMappedLocksAndAtomicsExact(t *testing.T) {
	each(t, []int{2, 3}, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		const rounds = 300
		const w64, w32 = 0, 8 // byte offsets: an int64 word, an int32 word
		n, me := rt.Size(), rt.Rank()
		w, err := Allocate(ctx, rt, 16, 1)
		require.NoError(t, err)
		require.NoError(t, rt.Barrier(ctx))
		buf, res, res4 := make([]byte, 16), make([]byte, 8), make([]byte, 4)
		ones := make([]byte, 16)
		le.PutUint64(ones, 1)
		le.PutUint32(ones[8:], 1)
		for k := 0; k < rounds; k++ {
			switch me % 3 {
			case 0: // exclusive lock: read, add one to each word, write
				require.NoError(t, w.Lock(ctx, LockExclusive, 0, 0))
				require.NoError(t, w.Get(ctx, buf, 0, 0))
				require.NoError(t, w.Flush(ctx, 0))
				le.PutUint64(buf, le.Uint64(buf)+1)
				le.PutUint32(buf[8:], le.Uint32(buf[8:])+1)
				require.NoError(t, w.Put(ctx, buf, 0, 0))
				require.NoError(t, w.Unlock(ctx, 0))
			case 1: // compare-and-swap increments
				require.NoError(t, w.Lock(ctx, LockShared, 0, 0))
				for {
					require.NoError(t, w.FetchAndOp(ctx, nil, res, Int64, 0, w64, OpNoOp))
					require.NoError(t, w.Flush(ctx, 0))
					old := le.Uint64(res)
					require.NoError(t, w.CompareAndSwap(ctx, le.AppendUint64(nil, old+1), le.AppendUint64(nil, old), res, Int64, 0, w64))
					require.NoError(t, w.Flush(ctx, 0))
					if le.Uint64(res) == old {
						break
					}
				}
				for {
					require.NoError(t, w.FetchAndOp(ctx, nil, res4, Int32, 0, w32, OpNoOp))
					require.NoError(t, w.Flush(ctx, 0))
					old := le.Uint32(res4)
					require.NoError(t, w.CompareAndSwap(ctx, le.AppendUint32(nil, old+1), le.AppendUint32(nil, old), res4, Int32, 0, w32))
					require.NoError(t, w.Flush(ctx, 0))
					if le.Uint32(res4) == old {
						break
					}
				}
				require.NoError(t, w.Unlock(ctx, 0))
			case 2: // fetch-and-add of one to each word, then an array accumulate of one to each
				require.NoError(t, w.Lock(ctx, LockShared, 0, 0))
				require.NoError(t, w.FetchAndOp(ctx, i64(1), res, Int64, 0, w64, OpSum))
				require.NoError(t, w.FetchAndOp(ctx, le.AppendUint32(nil, 1), res4, Int32, 0, w32, OpSum))
				require.NoError(t, w.Accumulate(ctx, ones[:8], Int64, 0, w64, OpSum))
				require.NoError(t, w.Accumulate(ctx, ones[8:], Int32, 0, w32, OpSum))
				require.NoError(t, w.Unlock(ctx, 0))
			}
		}
		require.NoError(t, rt.Barrier(ctx))
		if me == 0 {
			var want uint64
			for p := 0; p < n; p++ {
				want += rounds
				if p%3 == 2 {
					want += rounds
				}
			}
			loc := w.Local()
			require.Equal(t, want, le.Uint64(loc[w64:]), "int64 word")
			require.Equal(t, uint32(want), le.Uint32(loc[w32:]), "int32 word")
			word, err := rt.Rmw(ctx, rma.FetchAndAddLong, w.sync, 0, offLock, 0)
			require.NoError(t, err)
			require.Zero(t, word, "lock word after every unlock")
		}
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, w.Free(ctx))
	})
}

// TestMappedDataFreed: a window made with Create over a segment that was freed under it (an
// erroneous program) reports rma.ErrFreed for an operation to a direct rank instead of touching
// the memory through the part it mapped at Create.
func TestMappedDataFreed(t *testing.T) {
	each(t, []int{2}, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		seg, err := rt.Malloc(ctx, 64)
		require.NoError(t, err)
		w, err := Create(ctx, rt, seg, 8)
		require.NoError(t, err)
		require.NoError(t, seg.Free(ctx))
		me := rt.Rank()
		require.NoError(t, w.Lock(ctx, LockShared, me, 0))
		require.ErrorIs(t, w.Put(ctx, i64(1), me, 0), rma.ErrFreed)
		require.ErrorIs(t, w.FetchAndOp(ctx, i64(1), make([]byte, 8), Int64, me, 0, OpSum), rma.ErrFreed)
		require.NoError(t, w.Unlock(ctx, me))
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, w.Free(ctx))
	})
}
