package rma_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/internal/testutil"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// TestFinalizeStopsEveryGoroutine: after Init, traffic on every transport and Finalize, no
// goroutine the runtime started is left, and the runtime refuses further use.
func TestFinalizeStopsEveryGoroutine(t *testing.T) {
	for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
		t.Run(string(tr), func(t *testing.T) {
			testutil.CheckGoroutines(t)
			var kept []*rma.Runtime
			var segs []*rma.Segment
			rmatest.Run(t, 3, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				const slot = 1 << 18
				seg, err := rt.Malloc(ctx, slot*rt.Size())
				require.NoError(t, err)
				buf := make([]byte, slot)
				for p := 0; p < rt.Size(); p++ { // each rank writes only its own slot
					require.NoError(t, rt.Put(ctx, buf, seg, p, rt.Rank()*slot))
					require.NoError(t, rt.Get(ctx, seg, p, rt.Rank()*slot, buf))
				}
				require.NoError(t, rt.CreateMutexes(ctx, 1))
				require.NoError(t, rt.Lock(ctx, 0, 0))
				require.NoError(t, rt.Unlock(ctx, 0, 0))
				require.NoError(t, rt.Barrier(ctx))
				if rt.Rank() == 0 {
					kept = append(kept, rt)
					segs = append(segs, seg)
				}
			}, rmatest.Transport(tr))
			require.Len(t, kept, 1)
			ctx := context.Background()
			require.True(t, errors.Is(kept[0].Put(ctx, []byte{1}, segs[0], 0, 0), rma.ErrFinalized))
			require.True(t, errors.Is(kept[0].Barrier(ctx), rma.ErrFinalized))
			require.True(t, errors.Is(kept[0].Finalize(ctx), rma.ErrFinalized))
		})
	}
}

// TestInitFromEnvironmentSingleRank: with no launcher, Init makes a one-rank job through the
// real bootstrap, and Finalize leaves no goroutine behind.
func TestInitFromEnvironmentSingleRank(t *testing.T) {
	testutil.CheckGoroutines(t)
	ctx := context.Background()
	rt, err := rma.Init(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, 0, rt.Rank())
	require.Equal(t, 1, rt.Size())
	seg, err := rt.Malloc(ctx, 64)
	require.NoError(t, err)
	require.NoError(t, rt.Put(ctx, []byte("self"), seg, 0, 8))
	require.Equal(t, "self", string(seg.Local()[8:12]))
	old, err := rt.Rmw(ctx, rma.FetchAndAdd, seg, 0, 0, 5)
	require.NoError(t, err)
	require.Zero(t, old)
	require.NoError(t, rt.Finalize(ctx))
}
