package ftga

import (
	"context"
	"fmt"
	"math/cmplx"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/examples/nas/internal/ft"
	"github.com/goarmci/goarmci/examples/nas/internal/npb"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

func runRanks(t *testing.T, n int, p ft.Params, opts ...rmatest.Option) []ft.Result {
	t.Helper()
	return rmatest.Results(t, n, func(ctx context.Context, rt *rma.Runtime) (ft.Result, error) {
		return Run(ctx, rt, p, nil)
	}, opts...)
}

// check compares every rank's result with the serial reference's: the same verification, the
// same checksums on every rank, equal to the serial ones far inside NPB's tolerance (every 1-D
// transform is the same arithmetic on the same line; only the order of the checksum's sum
// differs).
func check(t *testing.T, serial ft.Result, results []ft.Result) {
	t.Helper()
	for r, res := range results {
		assert.Equal(t, serial.Verified, res.Verified, "rank %d: largest error %g", r, res.RelErr)
		require.Len(t, res.Sums, len(serial.Sums), "rank %d", r)
		assert.Equal(t, results[0].Sums, res.Sums, "rank %d", r)
		for i, s := range res.Sums {
			assert.Less(t, cmplx.Abs(s-serial.Sums[i])/cmplx.Abs(serial.Sums[i]), 1e-14, "rank %d step %d", r, i+1)
		}
		assert.Greater(t, res.Seconds, 0.0)
	}
}

func serialS(t *testing.T) (ft.Params, ft.Result) {
	t.Helper()
	p, _ := ft.ParamsFor(npb.ClassS)
	if raceEnabled {
		p.NIter = 1
	}
	serial, err := ft.Serial(p, nil)
	require.NoError(t, err)
	require.Equal(t, !raceEnabled, serial.Verified)
	return p, serial
}

// Class S verifies on 1, 2, 3 (uneven slabs) and 4 ranks over shared memory.
func TestRunClassS(t *testing.T) {
	p, serial := serialS(t)
	ranks := []int{1, 2, 3, 4}
	if raceEnabled {
		ranks = []int{2}
	}
	for _, n := range ranks {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			check(t, serial, runRanks(t, n, p))
		})
	}
}

// Over the network only (RC over TCP) on 2 and 4 ranks, then four ranks on two pretend nodes
// (shared memory inside a node, TCP between them).
func TestRunNetwork(t *testing.T) {
	p, serial := serialS(t)
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
			check(t, serial, runRanks(t, c.ranks, p, c.opts...))
		})
	}
}

// Class S on 16 ranks of the in-process fabric (ibv/fabric) under testing/synctest: slabs of
// four planes.
func TestRunClassSFabric(t *testing.T) {
	p, serial := serialS(t)
	const n = 16
	results := make([]ft.Result, n)
	synctest.Test(t, func(t *testing.T) {
		rmatest.RunFabric(t, n, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
			res, err := Run(ctx, rt, p, nil)
			require.NoError(tb, err)
			results[rt.Rank()] = res
		})
	})
	check(t, serial, results)
}

// A wrong checksum is seen on every rank: a class S run with W's references fails everywhere.
func TestRunDetectsWrongChecksum(t *testing.T) {
	p, _ := ft.ParamsFor(npb.ClassS)
	w, _ := ft.ParamsFor(npb.ClassW)
	p.NIter, p.Ref = 1, w.Ref[:1]
	for _, res := range runRanks(t, 2, p) {
		assert.False(t, res.Verified)
		assert.Greater(t, res.RelErr, ft.Epsilon)
	}
}

// Bad parameters and more ranks than planes are refused on every rank before any collective.
func TestRunRefuses(t *testing.T) {
	bad := ft.Params{NX: 8, NY: 6, NZ: 8, NIter: 1}
	rmatest.Run(t, 2, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
		_, err := Run(ctx, rt, bad, nil)
		assert.ErrorIs(tb, err, ft.ErrRange)
	})
	small := ft.Params{NX: 8, NY: 2, NZ: 8, NIter: 1} // three ranks, two y-rows
	rmatest.Run(t, 3, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
		_, err := Run(ctx, rt, small, nil)
		assert.ErrorIs(tb, err, ErrRanks)
	})
}
