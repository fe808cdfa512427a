package isga

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goarmci/goarmci/examples/nas/internal/is"
	"github.com/goarmci/goarmci/examples/nas/internal/npb"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

func runRanks(t *testing.T, n int, p is.Params, opts ...rmatest.Option) []is.Result {
	t.Helper()
	return rmatest.Results(t, n, func(ctx context.Context, rt *rma.Runtime) (is.Result, error) {
		return Run(ctx, rt, p, nil)
	}, opts...)
}

// Class S passes all 51 checks on 1, 2, 3, 4 and 5 ranks.
func TestRunClassS(t *testing.T) {
	p, _ := is.ParamsFor(npb.ClassS)
	for _, n := range []int{1, 2, 3, 4, 5} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			for r, res := range runRanks(t, n, p) {
				assert.Empty(t, res.Failures, "rank %d", r)
				assert.Equal(t, is.Passes, res.Passed, "rank %d", r)
				assert.True(t, res.Verified, "rank %d", r)
			}
		})
	}
}

// A wrong rank table fails exactly the checks of that test key, once per iteration.
func TestRunDetectsWrongRanks(t *testing.T) {
	p, _ := is.ParamsFor(npb.ClassS)
	p.TestRank[3]--
	results := runRanks(t, 3, p)
	failures := 0
	for _, res := range results {
		assert.False(t, res.Verified)
		assert.Equal(t, is.Passes-is.MaxIterations, res.Passed)
		failures += len(res.Failures)
	}
	assert.Equal(t, is.MaxIterations, failures)
}

// Bad parameters are refused on every rank before any collective.
func TestRunBadParams(t *testing.T) {
	p, _ := is.ParamsFor(npb.ClassS)
	p.TestIndex[0] = -1
	rmatest.Run(t, 2, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
		_, err := Run(ctx, rt, p, nil)
		assert.ErrorIs(tb, err, is.ErrParams)
	})
}

// Three ranks over the network only (RC over TCP), then four on two pretend nodes.
func TestRunNetwork(t *testing.T) {
	p, _ := is.ParamsFor(npb.ClassS)
	for name, opts := range map[string][]rmatest.Option{
		"tcp":       {rmatest.Transport(rma.TransportTCP)},
		"two-nodes": {rmatest.Transport(rma.TransportAuto), rmatest.Hosts(func(rank int) string { return fmt.Sprintf("node%d", rank/2) })},
	} {
		t.Run(name, func(t *testing.T) {
			n := 3
			if name == "two-nodes" {
				n = 4
			}
			for r, res := range runRanks(t, n, p, opts...) {
				assert.Empty(t, res.Failures, "rank %d", r)
				assert.True(t, res.Verified, "rank %d", r)
			}
		})
	}
}
