package cgga

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/examples/nas/internal/cg"
	"github.com/goarmci/goarmci/examples/nas/internal/npb"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

func runRanks(t *testing.T, n int, p cg.Params, opts ...rmatest.Option) []cg.Result {
	t.Helper()
	return rmatest.Results(t, n, func(ctx context.Context, rt *rma.Runtime) (cg.Result, error) {
		return Run(ctx, rt, p, nil)
	}, opts...)
}

// checkAgainstSerial runs p on each rank count and checks that every rank reports the same zeta,
// equal to the serial reference's far inside NPB's tolerance, and the same nonzero count.
func checkAgainstSerial(t *testing.T, p cg.Params, ranks []int) {
	serial, err := cg.Serial(p, nil)
	require.NoError(t, err)
	for _, n := range ranks {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			results := runRanks(t, n, p)
			for r, res := range results {
				assert.Equal(t, serial.Verified, res.Verified, "rank %d zeta %.13E", r, res.Zeta)
				assert.Equal(t, results[0].Zeta, res.Zeta, "rank %d", r)
				assert.InEpsilon(t, serial.Zeta, res.Zeta, 1e-12)
				assert.Equal(t, serial.NNZ, res.NNZ, "nonzeros summed over ranks")
				assert.Greater(t, res.Seconds, 0.0)
			}
		})
	}
}

// Class S verifies against the official zeta on 1 to 4 ranks (3 does not divide the rows evenly).
func TestRunClassS(t *testing.T) {
	if raceEnabled {
		t.Skip("full class S under the race detector: see TestRunFewIterations")
	}
	p, _ := cg.ParamsFor(npb.ClassS)
	serial, err := cg.Serial(p, nil)
	require.NoError(t, err)
	require.True(t, serial.Verified)
	checkAgainstSerial(t, p, []int{1, 2, 3, 4}) // Verified equals the serial run's: true
}

// The class S matrix with three outer iterations: the distributed zeta equals the serial one
// (short enough for the race detector).
func TestRunFewIterations(t *testing.T) {
	p, _ := cg.ParamsFor(npb.ClassS)
	p.NIter = 3
	checkAgainstSerial(t, p, []int{2, 3})
}

// After too few iterations zeta is not the official value: the verification must fail on every
// rank.
func TestRunDetectsWrongZeta(t *testing.T) {
	p, _ := cg.ParamsFor(npb.ClassS)
	p.NIter = 1
	for _, res := range runRanks(t, 2, p) {
		assert.False(t, res.Verified)
		assert.Greater(t, res.RelErr, cg.Epsilon)
	}
}

// Bad parameters are refused on every rank before any collective.
func TestRunBadParams(t *testing.T) {
	p, _ := cg.ParamsFor(npb.ClassS)
	p.NonZer = p.NA + 1
	rmatest.Run(t, 2, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
		_, err := Run(ctx, rt, p, nil)
		assert.ErrorIs(tb, err, cg.ErrRange)
	})
}

// Four ranks on two pretend nodes: shared memory inside a node, the network (RC over TCP)
// between them. Few iterations, checked against the serial zeta.
func TestRunTwoNodes(t *testing.T) {
	p, _ := cg.ParamsFor(npb.ClassS)
	p.NIter = 2
	serial, err := cg.Serial(p, nil)
	require.NoError(t, err)
	results := runRanks(t, 4, p, rmatest.Transport(rma.TransportAuto),
		rmatest.Hosts(func(rank int) string { return fmt.Sprintf("node%d", rank/2) }))
	for r, res := range results {
		assert.InEpsilon(t, serial.Zeta, res.Zeta, 1e-12, "rank %d", r)
	}
}

// Class S verifies on 16 ranks on the in-process fabric (ibv/fabric), one rank per node, every
// peer a network peer, under testing/synctest (virtual time): the same Run as on real processes.
// Under the race detector three outer iterations (zeta equal to the serial run's).
func TestRunClassSFabric(t *testing.T) {
	p, _ := cg.ParamsFor(npb.ClassS)
	if raceEnabled {
		p.NIter = 3
	}
	serial, err := cg.Serial(p, nil)
	require.NoError(t, err)
	require.Equal(t, !raceEnabled, serial.Verified)
	const n = 16
	results := make([]cg.Result, n)
	synctest.Test(t, func(t *testing.T) {
		rmatest.RunFabric(t, n, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
			res, err := Run(ctx, rt, p, nil)
			require.NoError(tb, err)
			results[rt.Rank()] = res
		})
	})
	for r, res := range results {
		assert.Equal(t, serial.Verified, res.Verified, "rank %d zeta %.13E", r, res.Zeta)
		assert.Equal(t, results[0].Zeta, res.Zeta, "rank %d", r)
		assert.InEpsilon(t, serial.Zeta, res.Zeta, 1e-12)
		assert.Equal(t, serial.NNZ, res.NNZ, "nonzeros summed over ranks")
	}
}
