package rma_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// TestLargeBidirectionalTransfers: both ranks put 64 MiB to each other and get 64 MiB from each
// other at once over tcp. The responder's read-response flood delays the ACKs of the other
// direction far beyond the ACK timeout; on a stream transport that is queueing, not loss, and
// must not exhaust the retries (the engine's liveness timer, engine.Config.Reliable).
func TestLargeBidirectionalTransfers(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 256 MiB")
	}
	rmatest.Run(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		const n = 64 << 20
		seg, err := rt.Malloc(ctx, 2*n)
		require.NoError(t, err)
		me, peer := rt.Rank(), 1-rt.Rank()
		src := pattern(me, n)
		copy(seg.Local()[n:], pattern(10+me, n)) // what the peer will get from me
		require.NoError(t, rt.Barrier(ctx))
		got := make([]byte, n)
		hp, err := rt.NbPut(ctx, src, seg, peer, 0)
		require.NoError(t, err)
		hg, err := rt.NbGet(ctx, seg, peer, n, got)
		require.NoError(t, err)
		require.NoError(t, hp.Wait(ctx))
		require.NoError(t, hg.Wait(ctx))
		require.True(t, slices.Equal(pattern(10+peer, n), got), "get")
		require.NoError(t, rt.Barrier(ctx))
		require.True(t, slices.Equal(pattern(peer, n), seg.Local()[:n]), "put")
	}, rmatest.Transport(rma.TransportTCP))
}
