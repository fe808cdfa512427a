package rma_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
)

// TestCompareSwap: every rank competes to claim a word on every rank with CompareSwap(0 → me+1);
// exactly one wins per word, the others see the winner's value; 32-bit variant the same; bad
// alignment and range errors change nothing.
func TestCompareSwap(t *testing.T) {
	for _, np := range []int{1, 3} {
		transports(t, np, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
			seg, err := rt.Malloc(ctx, 16)
			require.NoError(t, err)
			me := int64(rt.Rank())
			for p := 0; p < rt.Size(); p++ {
				old, err := rt.CompareSwap(ctx, seg, p, 0, 0, me+1)
				require.NoError(t, err)
				if old != 0 {
					require.True(t, old >= 1 && old <= int64(rt.Size()), "old %d", old)
				}
				old32, err := rt.CompareSwap32(ctx, seg, p, 8, 0, int32(me+100))
				require.NoError(t, err)
				if old32 != 0 {
					require.True(t, old32 >= 100 && old32 < int32(100+rt.Size()), "old32 %d", old32)
				}
			}
			require.NoError(t, rt.Barrier(ctx))
			// every rank reads the winner; a failing compare returns it unchanged
			for p := 0; p < rt.Size(); p++ {
				w, err := rt.CompareSwap(ctx, seg, p, 0, -1, 77)
				require.NoError(t, err)
				require.True(t, w >= 1 && w <= int64(rt.Size()))
				w32, err := rt.CompareSwap32(ctx, seg, p, 8, -1, 77)
				require.NoError(t, err)
				require.True(t, w32 >= 100 && w32 < int32(100+rt.Size()))
			}
			_, err = rt.CompareSwap(ctx, seg, 0, 4, 0, 1)
			require.ErrorIs(t, err, rma.ErrType)
			_, err = rt.CompareSwap(ctx, seg, 0, 16, 0, 1)
			require.ErrorIs(t, err, rma.ErrOutOfRange)
			_, err = rt.CompareSwap32(ctx, seg, rt.Size(), 0, 0, 1)
			require.ErrorIs(t, err, rma.ErrBadRank)
			require.NoError(t, rt.Barrier(ctx))
			require.NoError(t, seg.Free(ctx))
		})
	}
}
