//go:build !race

// Allocation counts are meaningless under the race detector (sync.Pool drops items on purpose).

package globalarray

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/globalarray/dist"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// TestPatchAddsNoAllocations checks that a blocking patch Put/Get allocates no more than the
// rma operations it is made of: the patch math, the descriptors and the handles of a blocking
// call stay on the stack.
func TestPatchAddsNoAllocations(t *testing.T) {
	rmatest.Run(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		a, err := Create[float64](ctx, rt, "alloc", []int{64, 64}) // rows 0..31 on rank 0, 32..63 on rank 1
		require.NoError(t, err)
		buf := make([]float64, 64*64)
		bytes := asBytes(buf)
		if rt.Rank() == 0 {
			// one owner, strided: 11 rows of 18 elements in rank 1's block
			lo, hi := []int{40, 3}, []int{50, 20}
			ga := testing.AllocsPerRun(20, func() { _ = a.Put(ctx, lo, hi, buf, nil) })
			direct := testing.AllocsPerRun(20, func() {
				_ = rt.PutS(ctx, bytes, []int{18 * 8}, a.seg, 1, (8*64+3)*8, []int{64 * 8}, []int{18 * 8, 11})
			})
			require.LessOrEqual(t, ga, direct, "NGA_Put over one owner")
			// two owners: rows 10..50
			lo, hi = []int{10, 3}, []int{50, 20}
			ga = testing.AllocsPerRun(20, func() { _ = a.Get(ctx, lo, hi, buf, nil) })
			direct = testing.AllocsPerRun(20, func() {
				var s dist.Strided
				s.Levels, s.Count[0], s.Count[1], s.RemoteStride[0], s.BufStride[0] = 1, 18*8, 22, 64*8, 18*8
				h0, _ := rt.NbGetS(ctx, a.seg, 0, (10*64+3)*8, s.RemoteStrides(), bytes, s.BufStrides(), s.Counts())
				s.Count[1] = 19
				h1, _ := rt.NbGetS(ctx, a.seg, 1, 3*8, s.RemoteStrides(), bytes[22*18*8:], s.BufStrides(), s.Counts())
				_ = h0.Wait(ctx)
				_ = h1.Wait(ctx)
			})
			require.LessOrEqual(t, ga, direct, "NGA_Get over two owners")
		}
		require.NoError(t, a.Destroy(ctx))
	})
}

// TestReadIncSyncAllocateNothing checks that NGA_Read_inc and GA_Sync on shm allocate nothing
// (no escaping result buffer, no closure), and that the counter still counts.
func TestReadIncSyncAllocateNothing(t *testing.T) {
	rmatest.Run(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		c, err := Create[int64](ctx, rt, "counter", []int{2})
		require.NoError(t, err)
		sub := []int{1}
		if rt.Rank() == 0 {
			n := testing.AllocsPerRun(50, func() { _, _ = c.ReadInc(ctx, sub, 2) })
			require.Zero(t, n, "NGA_Read_inc allocations")
			old, err := c.ReadInc(ctx, sub, 0)
			require.NoError(t, err)
			require.EqualValues(t, 2*51, old, "AllocsPerRun runs the function once more")
		}
		// Both ranks run the same number of syncs: AllocsPerRun runs 1 + 20.
		n := testing.AllocsPerRun(20, func() { _ = c.Sync(ctx) })
		require.Zero(t, n, "GA_Sync allocations")
		require.NoError(t, c.Destroy(ctx))
	})
}
