package rma_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// TestFaultToleranceKnob: GOARMCI_FT decides whether network connections belong to the
// hybridft manager (default) or are plain RC connections; data moves correctly either way.
func TestFaultToleranceKnob(t *testing.T) {
	for _, ft := range []string{"true", "false"} {
		t.Run("GOARMCI_FT="+ft, func(t *testing.T) {
			t.Setenv("GOARMCI_FT", ft)
			t.Setenv("GOARMCI_ON_DEMAND_THRESHOLD", "64") // connected at Init: Channel is set
			rmatest.Run(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				seg, err := rt.Malloc(ctx, 1<<20)
				require.NoError(t, err)
				peer := 1 - rt.Rank()
				for _, c := range rt.Channel(peer).Subchannels() {
					require.Equal(t, ft == "true", c.FaultTolerant())
				}
				src := pattern(rt.Rank()+1, 1<<20)
				require.NoError(t, rt.Put(ctx, src, seg, peer, 0))
				require.NoError(t, rt.Barrier(ctx))
				require.Equal(t, pattern(peer+1, 1<<20), seg.Local())
				got := make([]byte, 1<<20)
				require.NoError(t, rt.Get(ctx, seg, peer, 0, got))
				require.Equal(t, src, got)
				require.NoError(t, rt.Barrier(ctx))
				require.NoError(t, seg.Free(ctx))
			}, rmatest.Transport(rma.TransportTCP))
		})
	}
}
