package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

func TestExactClosedForm(t *testing.T) {
	n := 7
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			s := 0.0
			for k := 0; k < n; k++ {
				s += a(i, k) * b(k, j)
			}
			require.Equal(t, s, exact(n, i, j), "(%d,%d)", i, j)
		}
	}
}

func TestMultiplyVerifiesOnSeveralRankCounts(t *testing.T) {
	for _, np := range []int{1, 2, 3, 4} {
		for _, c := range []struct{ n, kb int }{{50, 16}, {97, 128}, {128, 7}} {
			rmatest.Run(t, np, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				res, err := Run(ctx, rt, c.n, c.kb)
				require.NoError(t, err, "np %d n %d kb %d", np, c.n, c.kb)
				require.Zero(t, res.MaxErr)
				require.Equal(t, np, res.Ranks)
			})
		}
	}
}

func TestMultiplyOverTCP(t *testing.T) {
	rmatest.Run(t, 3, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		res, err := Run(ctx, rt, 64, 10)
		require.NoError(t, err)
		require.Zero(t, res.MaxErr)
	}, rmatest.Transport(rma.TransportTCP))
}

func TestBadArguments(t *testing.T) {
	rmatest.Run(t, 1, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		_, err := Run(ctx, rt, 0, 8)
		require.Error(t, err)
		_, err = Run(ctx, rt, 8, 0)
		require.Error(t, err)
	})
}
