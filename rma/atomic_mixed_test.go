package rma_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// TestAtomicsMixedTransportsExact hammers the same words of rank 0 with atomics of both widths
// from its node peer (CPU atomics through the mapped view), from itself, and from two ranks of
// another node (atomic work requests over tcp, applied by rank 0's responder): 32- and 64-bit
// fetch-and-add, compare-and-swap increments of both widths, and swaps on a word that counts
// the swaps through the values returned. Every total is exact and every fetch-and-add returned a
// distinct old value.
func TestAtomicsMixedTransportsExact(t *testing.T) {
	const k = 300
	rmatest.Run(t, 4, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		seg, err := rt.Malloc(ctx, 64)
		require.NoError(t, err)
		me, n := rt.Rank(), rt.Size()
		if me == 1 {
			require.Equal(t, "shm", rt.TransportTo(0))
		}
		if me >= 2 {
			require.Equal(t, "tcp", rt.TransportTo(0))
		}
		var seen64, seen32 []int64
		for i := 0; i < k; i++ {
			old, err := rt.Rmw(ctx, rma.FetchAndAddLong, seg, 0, 0, 1)
			require.NoError(t, err)
			seen64 = append(seen64, old)
			old, err = rt.Rmw(ctx, rma.FetchAndAdd, seg, 0, 8, 1)
			require.NoError(t, err)
			seen32 = append(seen32, old)
			for { // 64-bit compare-and-swap increment
				cur, err := rt.Rmw(ctx, rma.FetchAndAddLong, seg, 0, 16, 0)
				require.NoError(t, err)
				got, err := rt.CompareSwap(ctx, seg, 0, 16, cur, cur+1)
				require.NoError(t, err)
				if got == cur {
					break
				}
			}
			for { // 32-bit compare-and-swap increment
				cur, err := rt.Rmw(ctx, rma.FetchAndAdd, seg, 0, 24, 0)
				require.NoError(t, err)
				got, err := rt.CompareSwap32(ctx, seg, 0, 24, int32(cur), int32(cur)+1)
				require.NoError(t, err)
				if int64(got) == cur {
					break
				}
			}
			// a swap chain: each swap's old value is another swap's new one (or the initial 0)
			_, err = rt.Rmw(ctx, rma.SwapLong, seg, 0, 32, int64(me*k+i+1))
			require.NoError(t, err)
			_, err = rt.Rmw(ctx, rma.Swap, seg, 0, 40, int32ID(me, i))
			require.NoError(t, err)
		}
		for i := 1; i < k; i++ {
			require.Less(t, seen64[i-1], seen64[i], "fetch-and-add 64 of one rank returns increasing values")
			require.Less(t, seen32[i-1], seen32[i], "fetch-and-add 32 of one rank returns increasing values")
		}
		require.NoError(t, rt.Barrier(ctx))
		if me == 0 {
			total := int64(n * k)
			for w, off := range []int{0, 8, 16, 24} {
				var v int64
				var err error
				if w%2 == 0 {
					v, err = rt.Rmw(ctx, rma.FetchAndAddLong, seg, 0, off, 0)
				} else {
					v, err = rt.Rmw(ctx, rma.FetchAndAdd, seg, 0, off, 0)
				}
				require.NoError(t, err)
				require.Equal(t, total, v, "word at byte %d", off)
			}
			last64, err := rt.Rmw(ctx, rma.FetchAndAddLong, seg, 0, 32, 0)
			require.NoError(t, err)
			require.Contains(t, []int64{k, 2 * k, 3 * k, 4 * k}, last64, "the last 64-bit swap is some rank's last")
			last32, err := rt.Rmw(ctx, rma.FetchAndAdd, seg, 0, 40, 0)
			require.NoError(t, err)
			require.Contains(t, []int64{int32ID(0, k-1), int32ID(1, k-1), int32ID(2, k-1), int32ID(3, k-1)}, last32)
		}
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, seg.Free(ctx))
	}, rmatest.Transport(rma.TransportAuto), rmatest.Hosts(func(rank int) string { return []string{"nodeA", "nodeA", "nodeB", "nodeB"}[rank] }))
}

func int32ID(rank, i int) int64 { return int64(rank<<16 | (i + 1)) }
