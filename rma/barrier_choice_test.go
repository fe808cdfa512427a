package rma_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// holdsEveryRank runs rounds of Barrier (the job's algorithm): each rank adds 1 to a counter at
// rank 0 before the barrier, and after it the counter must equal round·n.
func holdsEveryRank(ctx context.Context, tb testing.TB, rt *rma.Runtime, rounds int) {
	seg, err := rt.Malloc(ctx, 8)
	require.NoError(tb, err)
	for round := 1; round <= rounds; round++ {
		_, err := rt.Rmw(ctx, rma.FetchAndAddLong, seg, 0, 0, 1)
		require.NoError(tb, err)
		require.NoError(tb, rt.Barrier(ctx))
		v, err := rt.Rmw(ctx, rma.FetchAndAddLong, seg, 0, 0, 0)
		require.NoError(tb, err)
		assert.Equal(tb, int64(round*rt.Size()), v, "rank %d after %v barrier %d", rt.Rank(), rt.BarrierAlg(), round)
		require.NoError(tb, rt.Barrier(ctx))
	}
	require.NoError(tb, seg.Free(ctx))
}

// GOARMCI_BARRIER=auto chooses at Init from the job's shape, the same on every rank, and
// Barrier then runs that algorithm correctly: one node over shared memory, tcp on one node, pretend
// nodes over tcp (rmatest.Hosts), and the simulated fabric.
func TestBarrierAutoByJobShape(t *testing.T) {
	two := func(rank int) string { return []string{"nodeA", "nodeA", "nodeB", "nodeB"}[rank] }
	cases := []struct {
		name string
		n    int
		opts []rmatest.Option
		want rma.BarrierAlg
	}{
		{"shm", 3, []rmatest.Option{rmatest.Transport(rma.TransportShm)}, rma.BarrierDissemination},
		{"tcp/2", 2, []rmatest.Option{rmatest.Transport(rma.TransportTCP)}, rma.BarrierMessagePairwise},
		{"tcp/4", 4, []rmatest.Option{rmatest.Transport(rma.TransportTCP)}, rma.BarrierMessage},
		{"2 nodes of 2", 4, []rmatest.Option{rmatest.Transport(rma.TransportAuto), rmatest.Hosts(two)}, rma.BarrierHierarchical},
		{"2 nodes of 2, tcp", 4, []rmatest.Option{rmatest.Transport(rma.TransportTCP), rmatest.Hosts(two)}, rma.BarrierMessage},
		{"3 nodes of 3, 2, 1", 6, []rmatest.Option{rmatest.Transport(rma.TransportAuto), rmatest.Hosts(func(rank int) string {
			return []string{"nodeA", "nodeB", "nodeA", "nodeC", "nodeB", "nodeA"}[rank]
		})}, rma.BarrierHierarchical},
		// 18 ranks on node A: its leader's gather tree has two levels (fan-in 16)
		{"nodes of 18 and 2", 20, []rmatest.Option{rmatest.Transport(rma.TransportAuto), rmatest.Hosts(func(rank int) string {
			return map[bool]string{true: "nodeA", false: "nodeB"}[rank%10 != 3]
		})}, rma.BarrierHierarchical},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := append(c.opts, rmatest.Configure(func(_ int, cfg *rma.Config) { cfg.Barrier = "auto" }))
			rmatest.Run(t, c.n, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
				assert.Equal(tb, c.want, rt.BarrierAlg())
				holdsEveryRank(ctx, tb, rt, 8)
			}, opts...)
		})
	}
	t.Run("fabric/5", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rmatest.RunFabric(t, 5, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
				assert.Equal(tb, rma.BarrierMessagePairwise, rt.BarrierAlg())
				holdsEveryRank(ctx, tb, rt, 8)
			}, rmatest.Configure(func(_ int, cfg *rma.Config) { cfg.Barrier = "auto" }))
		})
	})
}

// An algorithm named in Config.Barrier (GOARMCI_BARRIER) is Barrier's whatever the shape; an
// unknown name fails Init with ErrConfig; a datagram barrier in a job without a network gives
// way to auto's choice.
func TestBarrierKnobChoosesAlgorithm(t *testing.T) {
	for _, name := range []string{"dissemination", "pairwise", "gather-broadcast", "rgm", "message", "message-pairwise", "hierarchical"} {
		t.Run(name, func(t *testing.T) {
			rmatest.Run(t, 3, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
				assert.Equal(tb, name, rt.BarrierAlg().String())
				holdsEveryRank(ctx, tb, rt, 4)
			}, rmatest.Transport(rma.TransportTCP), rmatest.Configure(func(_ int, cfg *rma.Config) { cfg.Barrier = name }))
		})
	}
	_, err := rma.Init(context.Background(), &rma.Config{Barrier: "tournament"})
	assert.ErrorIs(t, err, rma.ErrConfig)
	assert.ErrorContains(t, err, "GOARMCI_BARRIER")
	rmatest.Run(t, 2, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
		assert.Equal(tb, rma.BarrierDissemination, rt.BarrierAlg(), "a message barrier without a network")
		holdsEveryRank(ctx, tb, rt, 4)
	}, rmatest.Transport(rma.TransportShm), rmatest.Configure(func(_ int, cfg *rma.Config) { cfg.Barrier = "message" }))
}
