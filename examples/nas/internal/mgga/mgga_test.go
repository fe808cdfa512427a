package mgga

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/examples/nas/internal/mg"
	"github.com/goarmci/goarmci/examples/nas/internal/npb"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

func runRanks(t *testing.T, n int, p mg.Params, cfg Config, opts ...rmatest.Option) []mg.Result {
	t.Helper()
	return rmatest.Results(t, n, func(ctx context.Context, rt *rma.Runtime) (mg.Result, error) {
		return Run(ctx, rt, p, cfg, nil)
	}, opts...)
}

// check compares every rank's result with the serial reference's: the same verification, the
// same norm on every rank, equal to the serial one far inside NPB's tolerance (the stencils are
// the same arithmetic point by point; only the order of the norm's sum differs).
func check(t *testing.T, serial mg.Result, results []mg.Result) {
	t.Helper()
	for r, res := range results {
		assert.Equal(t, serial.Verified, res.Verified, "rank %d rnm2 %.13E", r, res.RNM2)
		assert.Equal(t, results[0].RNM2, res.RNM2, "rank %d", r)
		assert.InEpsilon(t, serial.RNM2, res.RNM2, 1e-13, "rank %d", r)
		assert.Equal(t, serial.RNMU, res.RNMU, "rank %d", r)
		assert.Greater(t, res.Seconds, 0.0)
	}
}

func TestProcGrid(t *testing.T) {
	for size, want := range map[int][3]int{1: {1, 1, 1}, 2: {2, 1, 1}, 3: {2, 1, 1}, 4: {2, 2, 1},
		8: {2, 2, 2}, 16: {4, 2, 2}, 32: {4, 4, 2}, 64: {4, 4, 4}} {
		assert.Equal(t, want, ProcGrid(size), "size %d", size)
	}
}

// Class S verifies on 1, 2, 3 (two active ranks, one idle) and 4 ranks over shared memory, with
// the default replicated bottom, with only the levels that must be replicated, and with all
// but the finest level replicated.
func TestRunClassS(t *testing.T) {
	p, _ := mg.ParamsFor(npb.ClassS)
	serial, err := mg.Serial(p, nil)
	require.NoError(t, err)
	require.True(t, serial.Verified)
	ranks := []int{1, 2, 3, 4}
	if raceEnabled {
		ranks = []int{2}
	}
	for _, n := range ranks {
		for _, repl := range []int{0, -1, 16} {
			t.Run(fmt.Sprintf("ranks=%d/replicate=%d", n, repl), func(t *testing.T) {
				check(t, serial, runRanks(t, n, p, Config{Replicate: repl}))
			})
		}
	}
}

// Over the network only (RC over TCP) on 2 and 4 ranks, then four ranks on two pretend nodes
// (shared memory inside a node, TCP between them).
func TestRunNetwork(t *testing.T) {
	p, _ := mg.ParamsFor(npb.ClassS)
	if raceEnabled {
		p.NIter = 1
	}
	serial, err := mg.Serial(p, nil)
	require.NoError(t, err)
	cases := []struct {
		name  string
		ranks int
		opts  []rmatest.Option
	}{
		{"tcp/ranks=2", 2, []rmatest.Option{rmatest.Transport(rma.TransportTCP)}},
		{"tcp/ranks=4", 4, []rmatest.Option{rmatest.Transport(rma.TransportTCP)}},
		{"two-nodes/ranks=4", 4, []rmatest.Option{rmatest.Transport(rma.TransportAuto),
			rmatest.Hosts(func(rank int) string { return fmt.Sprintf("node%d", rank/2) })}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check(t, serial, runRanks(t, c.ranks, p, Config{}, c.opts...))
		})
	}
}

// Class S on 16 ranks of the in-process fabric (ibv/fabric) under testing/synctest: blocks of
// (z, y, x) = 4×2×2, so the levels of 4³ and 2³ points are replicated whatever Replicate says.
func TestRunClassSFabric(t *testing.T) {
	p, _ := mg.ParamsFor(npb.ClassS)
	if raceEnabled {
		p.NIter = 1
	}
	serial, err := mg.Serial(p, nil)
	require.NoError(t, err)
	const n = 16
	results := make([]mg.Result, n)
	synctest.Test(t, func(t *testing.T) {
		rmatest.RunFabric(t, n, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
			res, err := Run(ctx, rt, p, Config{Replicate: -1}, nil)
			require.NoError(tb, err)
			results[rt.Rank()] = res
		})
	})
	check(t, serial, results)
}

// Too few V-cycles: the norm misses NPB's value on every rank.
func TestRunDetectsWrongNorm(t *testing.T) {
	p, _ := mg.ParamsFor(npb.ClassS)
	p.NIter = 1
	for _, res := range runRanks(t, 2, p, Config{}) {
		assert.False(t, res.Verified)
		assert.Greater(t, res.RelErr, mg.Epsilon)
	}
}

// Bad parameters and a grid too small for the ranks are refused on every rank before any
// collective.
func TestRunRefuses(t *testing.T) {
	p, _ := mg.ParamsFor(npb.ClassS)
	bad := p
	bad.N = 24
	rmatest.Run(t, 2, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
		_, err := Run(ctx, rt, bad, Config{}, nil)
		assert.ErrorIs(tb, err, mg.ErrRange)
	})
	small := p
	small.N = 4 // 16 ranks cut z in four: blocks of one point
	rmatest.Run(t, 16, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
		_, err := Run(ctx, rt, small, Config{}, nil)
		assert.ErrorIs(tb, err, ErrRanks)
	})
}
