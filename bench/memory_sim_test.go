package bench

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/hybridft"
	"github.com/goarmci/goarmci/ibv"
)

// Jobs of 8 and 64 ranks built whole and one of 128 extrapolated, h = 4: the accounted bytes a
// peer adds are the same in both jobs (an RC connection, a DC peer: constant per peer), a DC
// peer is the engine's new-record figure plus the view and the channel, DC-only grows by a DC peer
// per peer and stays below RC-only, adaptive is DC-only plus h RC connections, and the
// extrapolated row is the largest job's plus a peer's cost per further peer; rma jobs of 8
// ranks (rc, dc, adaptive) hold the same per peer but the channel records, and adaptive stays
// within h RC connections. The jobs' own checks ran too: every
// write landed, every DC queue pair holds N−1 records.
func TestMemorySim(t *testing.T) {
	const h = 4
	dcView := float64(ibv.SizeOf[hybridft.Conn]() + ibv.SizeOf[ibv.AH]() + channelBytes)
	res, err := MemorySim(context.Background(), MemoryOptions{Ranks: []int{64, 8, 128}, MaxRC: h, FullRanks: 64, RuntimeRanks: 8}, bubbleOf(t))
	require.NoError(t, err)
	require.Len(t, res, 3)
	table, costs, rmaJobs := res[0], res[1], res[2]
	require.Len(t, table.Rows, 3)
	require.Len(t, costs.Rows, 2, "one row per job built")
	col := func(r *Result, name string) int {
		i := -1
		for k, c := range r.Columns {
			if c == name {
				i = k
			}
		}
		require.GreaterOrEqual(t, i, 0, "column %q", name)
		return i
	}
	val := func(r *Result, row int, name string) float64 { return r.Rows[row].Values[col(r, name)] }

	for i, n := range []int{8, 64} {
		assert.Equal(t, n, costs.Rows[i].Size)
		assert.Equal(t, float64(n-1), val(costs, i, "DC records per rank"))
		assert.Equal(t, float64(h), val(costs, i, "adaptive RC connections"))
		assert.Equal(t, val(costs, i, "new DC record (B)")+dcView, val(costs, i, "DC peer (B)"),
			"a DC peer: the engine's new record, the view with its address handle, the channel")
	}
	rcConn, dcRec := val(costs, 1, "RC connection (B)"), val(costs, 1, "DC peer (B)")
	assert.Equal(t, val(costs, 0, "RC connection (B)"), rcConn, "an RC connection costs the same at 8 and 64 ranks")
	assert.Equal(t, dcRec, val(costs, 0, "DC peer (B)"), "a DC peer costs the same at 8 and 64 ranks")
	assert.Less(t, dcRec, rcConn)

	kib := func(row int, name string) float64 { return val(table, row, name) * 1024 }
	assert.Equal(t, []int{8, 64, 128}, []int{table.Rows[0].Size, table.Rows[1].Size, table.Rows[2].Size})
	assert.Equal(t, []float64{1, 1, 0}, []float64{val(table, 0, "measured"), val(table, 1, "measured"), val(table, 2, "measured")})
	assert.InDelta(t, 56*dcRec, kib(1, "DC median (KiB)")-kib(0, "DC median (KiB)"), 1e-6, "DC-only grows by a record per peer")
	assert.InDelta(t, 56*rcConn, kib(1, "RC median (KiB)")-kib(0, "RC median (KiB)"), 1e-6, "RC-only grows by a connection per peer")
	// as rma builds it a DC peer costs nearly an RC connection (a view with the hybridft record
	// and a channel per peer besides the engine's record)
	assert.Less(t, kib(1, "DC median (KiB)"), kib(1, "RC median (KiB)"), "DC-only at 64 ranks")
	for row := range 2 {
		dc, ad := kib(row, "DC median (KiB)"), kib(row, "adaptive median (KiB)")
		assert.Greater(t, ad, dc)
		assert.InDelta(t, dc+h*rcConn, ad, 1e-6, "adaptive: DC-only and h RC connections")
		assert.Equal(t, kib(row, "RC median (KiB)"), kib(row, "RC max (KiB)"), "every rank alike in an all-to-all")
	}
	// the heap of the larger job (the process's heap also moves with what earlier tests left)
	assert.Less(t, val(table, 1, "DC heap (KiB)"), val(table, 1, "RC heap (KiB)"))
	assert.Positive(t, val(table, 1, "DC heap (KiB)"))
	assert.InDelta(t, kib(1, "RC median (KiB)")+64*rcConn, kib(2, "RC median (KiB)"), 1e-6, "128 ranks extrapolated per peer")
	assert.InDelta(t, kib(1, "adaptive max (KiB)")+64*dcRec, kib(2, "adaptive max (KiB)"), 1e-6)

	// the rma job of 8 ranks holds the same connections, without the channel records
	require.Len(t, rmaJobs.Rows, 1)
	assert.Equal(t, 8, rmaJobs.Rows[0].Size)
	assert.Equal(t, rcConn-float64(channelBytes), val(rmaJobs, 0, "rc per peer (B)"))
	assert.InDelta(t, kib(0, "RC median (KiB)")-7*float64(channelBytes), val(rmaJobs, 0, "rc median (KiB)")*1024, 1e-6,
		"rma's rank: the same connections and completion queue")
	assert.Equal(t, dcRec-float64(channelBytes), val(rmaJobs, 0, "dc per peer (B)"), "rma's DC peer: the same view and record")
	assert.LessOrEqual(t, val(rmaJobs, 0, "adaptive RC open max"), float64(h), "GOARMCI_MAX_RC bounds the RC connections")
	assert.Greater(t, val(rmaJobs, 0, "adaptive median (KiB)"), val(rmaJobs, 0, "dc median (KiB)"),
		"adaptive: the shared path and the connection manager")
}

// The RC pairs of the adaptive configuration give every rank h connections (h−1 when h and the
// job size are both odd), each pair once, no rank paired with itself.
func TestRCPairs(t *testing.T) {
	for _, c := range []struct{ n, h, want int }{
		{16, 4, 4}, {16, 5, 5}, {15, 5, 4}, {15, 4, 4}, {8, 7, 7}, {9, 8, 8}, {2, 1, 1}, {3, 2, 2}, {64, 26, 26}, {64, 0, 0},
	} {
		deg := make([]int, c.n)
		seen := map[[2]int]bool{}
		for _, p := range rcPairs(c.n, c.h) {
			a, b := min(p[0], p[1]), max(p[0], p[1])
			assert.NotEqual(t, a, b, "n %d h %d: self pair", c.n, c.h)
			assert.False(t, seen[[2]int{a, b}], "n %d h %d: pair %d-%d twice", c.n, c.h, a, b)
			seen[[2]int{a, b}] = true
			deg[a]++
			deg[b]++
		}
		for r, d := range deg {
			assert.Equal(t, c.want, d, "n %d h %d: rank %d", c.n, c.h, r)
		}
	}
}

func TestMemorySimOptions(t *testing.T) {
	for _, o := range []MemoryOptions{
		{Ranks: []int{1}},
		{Ranks: []int{4, 1 << 20}},
		{Ranks: []int{4}, MaxRC: -1},
		{Ranks: []int{4}, FullRanks: 1},
		{Ranks: []int{4}, FullRanks: 4096},
		{Ranks: []int{300, 512}},
		{Ranks: []int{4}, RuntimeRanks: 512},
	} {
		_, err := MemorySim(context.Background(), o, bubbleOf(t))
		assert.ErrorIs(t, err, ErrOptions, "%+v", o)
	}
}
