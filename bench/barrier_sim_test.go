package bench

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
)

// bubbleOf runs functions in synctest bubbles of t.
func bubbleOf(t *testing.T) func(func()) {
	return func(f func()) { synctest.Test(t, func(*testing.T) { f() }) }
}

// The barrier simulation gives one latency per algorithm and size, and the point-to-point
// barrier's (pairwise exchange of datagrams) latency over each other algorithm's. The model has no noise: at 8 ranks RGM's one
// multicast release beats the gather barrier's 7 writes queued on rank 0's link.
func TestBarrierSim(t *testing.T) {
	res, err := BarrierSim(context.Background(), BarrierSimOptions{Ranks: []int{2, 8}, Iters: 3, Warmup: 1}, bubbleOf(t))
	require.NoError(t, err)
	require.Len(t, res, 2)
	lat, ratio := res[0], res[1]
	assert.Equal(t, []string{"RDS (us)", "RPE (us)", "gather (us)", "RGM (us)", "p2p PE (us)", "p2p central (us)"}, lat.Columns)
	assert.Equal(t, []string{"RDS", "RPE", "gather", "RGM", "p2p central"}, ratio.Columns)
	require.Len(t, lat.Rows, 2)
	for _, row := range lat.Rows {
		for i, v := range row.Values {
			assert.Positive(t, v, "%d ranks, %s", row.Size, lat.Columns[i])
		}
	}
	assert.Less(t, lat.Rows[1].Values[3], lat.Rows[1].Values[2], "RGM against gather at 8 ranks: %v", lat.Rows[1].Values)
	assert.InDelta(t, lat.Rows[1].Values[4]/lat.Rows[1].Values[3], ratio.Rows[1].Values[3], 1e-9)
	t.Log(lat.Rows, ratio.Rows)
}

func TestBarrierSimOptions(t *testing.T) {
	for _, o := range []BarrierSimOptions{{Ranks: []int{1}}, {Ranks: []int{4}, Iters: -1}, {Model: SimModel{MessageCost: -1}}, {Model: SimModel{LinkRate: -1}}} {
		_, err := BarrierSim(context.Background(), o, func(func()) { t.Fatal("ran with bad options") })
		assert.ErrorIs(t, err, ErrOptions, "%+v", o)
	}
	res, err := BarrierSim(context.Background(), BarrierSimOptions{Ranks: []int{3}, Algs: []rma.BarrierAlg{rma.BarrierRGM}, Iters: 1, Warmup: 1}, bubbleOf(t))
	require.NoError(t, err)
	assert.Len(t, res, 1, "no speed-up table without the point-to-point baseline")
}
