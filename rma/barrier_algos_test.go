package rma_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// Every algorithm, mixed in one job and for power-of-two and other sizes, must hold every rank
// until all have arrived: each rank adds 1 to a counter at rank 0 before the barrier, and after
// it the counter must equal round·n.
func TestBarrierWithHoldsEveryRank(t *testing.T) {
	algs := []rma.BarrierAlg{rma.BarrierDissemination, rma.BarrierPairwise, rma.BarrierGatherBroadcast, rma.BarrierHierarchical}
	for _, n := range []int{1, 2, 3, 4, 6, 9} {
		rmatest.Run(t, n, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
			seg, err := rt.Malloc(ctx, 8)
			require.NoError(tb, err)
			for round := 1; round <= 12; round++ {
				alg := algs[round%len(algs)]
				_, err := rt.Rmw(ctx, rma.FetchAndAddLong, seg, 0, 0, 1)
				require.NoError(tb, err)
				require.NoError(tb, rt.BarrierWith(ctx, alg))
				v, err := rt.Rmw(ctx, rma.FetchAndAddLong, seg, 0, 0, 0)
				require.NoError(tb, err)
				assert.Equal(tb, int64(round*n), v, "rank %d after %v barrier %d of %d ranks", rt.Rank(), alg, round, n)
				require.NoError(tb, rt.BarrierWith(ctx, algs[(round+1)%len(algs)]))
			}
			assert.ErrorIs(tb, rt.BarrierWith(ctx, rma.BarrierAlg(99)), rma.ErrBadOp)
			require.NoError(tb, seg.Free(ctx))
		})
	}
}

// The RDMA barriers post their signals to network peers without waiting for them, and reap every
// completion before they return: after each barrier nothing of this rank is in flight, and the
// flags still hold every rank. 67 ranks make gather-broadcast's rank 0 post more releases than it
// keeps in flight (it reaps them midway).
func TestBarrierReapsSignals(t *testing.T) {
	algs := []rma.BarrierAlg{rma.BarrierDissemination, rma.BarrierPairwise, rma.BarrierGatherBroadcast, rma.BarrierRGM,
		rma.BarrierHierarchical}
	sizes := []int{2, 3, 8, 9}
	if !testing.Short() {
		sizes = append(sizes, 67)
	}
	for _, n := range sizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rmatest.RunFabric(t, n, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
					barrierRounds(ctx, tb, rt, algs, 2*len(algs))
					for _, alg := range algs {
						require.NoError(tb, rt.BarrierWith(ctx, alg))
						assert.Zero(tb, rma.PostedSignals(rt), "%v barrier of %d ranks", alg, n)
						for p := 0; p < n; p++ {
							assert.Zero(tb, rma.Outstanding(rt, p), "rank %d to rank %d after a %v barrier", rt.Rank(), p, alg)
						}
					}
				})
			})
		})
	}
}
