package cgga

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/examples/nas/internal/cg"
	"github.com/goarmci/goarmci/examples/nas/internal/npb"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

func runRanks(t *testing.T, n int, p cg.Params) []cg.Result {
	t.Helper()
	results := make([]cg.Result, n)
	rmatest.Run(t, n, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
		res, err := Run(ctx, rt, p, nil)
		require.NoError(tb, err)
		results[rt.Rank()] = res
	})
	return results
}

// Class S verifies on 1 to 4 ranks (3 does not divide the rows evenly), every rank reports the
// same zeta, and zeta agrees with the serial reference far inside NPB's tolerance.
func TestRunClassS(t *testing.T) {
	p, _ := cg.ParamsFor(npb.ClassS)
	serial, err := cg.Serial(p, nil)
	require.NoError(t, err)
	for _, n := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			results := runRanks(t, n, p)
			for r, res := range results {
				assert.True(t, res.Verified, "rank %d zeta %.13E", r, res.Zeta)
				assert.Equal(t, results[0].Zeta, res.Zeta, "rank %d", r)
				assert.InEpsilon(t, serial.Zeta, res.Zeta, 1e-12)
				assert.Equal(t, serial.NNZ, res.NNZ, "nonzeros summed over ranks")
				assert.Greater(t, res.Seconds, 0.0)
			}
		})
	}
}

// A wrong official value must make the verification fail on every rank.
func TestRunDetectsWrongZeta(t *testing.T) {
	p, _ := cg.ParamsFor(npb.ClassS)
	p.ZetaVerify += 1e-6
	for _, res := range runRanks(t, 2, p) {
		assert.False(t, res.Verified)
	}
}
