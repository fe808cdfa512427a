package main

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/bench"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// The patterns over the tcp provider under each network transport: every put arrives (every
// rank's slots are what the last round left), and every rank reports the same figures.
func TestPatternsOverTCP(t *testing.T) {
	const n, messages = 4, 20
	for _, mode := range []string{rma.NetRC, rma.NetDC, rma.NetAdaptive} {
		t.Run(mode, func(t *testing.T) {
			slots := make([][]uint64, n)
			res := make([]Result, n)
			var mu sync.Mutex
			rmatest.Run(t, n, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				r, err := Run(ctx, rt, messages)
				require.NoError(t, err)
				mu.Lock()
				slots[rt.Rank()], res[rt.Rank()] = r.Slots, r
				mu.Unlock()
			}, rmatest.Transport(rma.TransportTCP), rmatest.Configure(func(_ int, c *rma.Config) { c.NetworkTransport = mode }))
			require.NoError(t, bench.CheckAQPSSlots(n, messages, slots))
			for r := 1; r < n; r++ {
				require.Equal(t, res[0].Repeat, res[r].Repeat, "rank %d's figures", r)
			}
			require.Positive(t, res[0].OneToAll)
			require.Positive(t, res[0].AllToOne)
		})
	}
}

func TestRunRejectsNoMessages(t *testing.T) {
	rmatest.Run(t, 1, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		_, err := Run(ctx, rt, 0)
		require.Error(t, err)
	})
}
