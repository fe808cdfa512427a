package rma_test

import (
	"context"
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// TestAccumulateMixedTransportsExact: 4 ranks on 2 pretend nodes accumulate into the same
// elements of rank 0 at once — rank 0 itself, rank 1 through shared memory (through its direct
// view of rank 0's part, under the region's lock word), ranks 2 and 3 through tcp (rank 0's
// responder applies). Every path
// must take the same accumulate lock, so the sums are exact.
func TestAccumulateMixedTransportsExact(t *testing.T) {
	rmatest.Run(t, 4, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		const elems, rounds = 2048, 400
		seg, err := rt.Malloc(ctx, elems*8)
		require.NoError(t, err)
		ones := make([]byte, elems*8)
		for i := 0; i < elems; i++ {
			binary.LittleEndian.PutUint64(ones[8*i:], math.Float64bits(1))
		}
		require.NoError(t, rt.Barrier(ctx))
		for r := 0; r < rounds; r++ {
			require.NoError(t, rt.Acc(ctx, rma.AccFloat64, 0.5, ones, seg, 0, 0))
			// small ones too, on the first elements, mixing sizes on the same words
			require.NoError(t, rt.Acc(ctx, rma.AccFloat64, 0.5, ones[:8], seg, 0, 0))
		}
		if rt.Rank() == 1 {
			require.True(t, seg.HasView(0), "rank 1 accumulates through its view of rank 0's part")
		}
		require.NoError(t, rt.Barrier(ctx))
		if rt.Rank() == 0 {
			loc := seg.Local()
			require.Equal(t, 2*0.5*rounds*4.0, math.Float64frombits(binary.LittleEndian.Uint64(loc)), "element 0")
			for i := 1; i < elems; i++ {
				require.Equal(t, 0.5*rounds*4.0, math.Float64frombits(binary.LittleEndian.Uint64(loc[8*i:])), "element %d", i)
			}
		}
		require.NoError(t, rt.Barrier(ctx))
	}, rmatest.Transport(rma.TransportAuto), rmatest.Hosts(func(rank int) string { return []string{"nodeA", "nodeA", "nodeB", "nodeB"}[rank] }))
}
