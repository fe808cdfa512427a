package rma_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider/tcp"
	"github.com/goarmci/goarmci/internal/config"
	"github.com/goarmci/goarmci/rma"
)

// checkMemory checks rank 0's memory record of a 2-rank job over tr: one connection to rank 1 of
// the transport's kind holding at least its queue pair's record, a completion queue, the
// segments registered, over tcp the streams' buffers, and totals that add up.
func checkMemory(t testing.TB, ms rma.MemoryStats, tr rma.Transport) {
	t.Helper()
	require.Len(t, ms.Peers, 1, "%+v", ms)
	p := ms.Peers[0]
	require.Equal(t, 1, p.Rank)
	require.Equal(t, 1, p.QPs)
	require.Greater(t, p.Bytes, ibv.SizeOf[ibv.QP](), "a connection holds more than the verbs record of its queue pair")
	kinds := map[string]rma.MemoryKind{}
	var total int64
	for _, k := range ms.Kinds {
		kinds[k.Kind] = k
		total += k.Bytes
	}
	require.Equal(t, total, ms.Total)
	want := rma.MemNodeQP
	if tr == rma.TransportTCP {
		want = rma.MemRC
		st := kinds[rma.MemStream]
		require.Positive(t, st.Count, "tcp streams")
		require.GreaterOrEqual(t, st.Bytes, int64(st.Count)*tcp.StreamBytes())
	}
	require.Equal(t, want, p.Kind)
	require.Equal(t, rma.MemoryKind{Kind: want, Count: 1, Bytes: p.Bytes}, kinds[want])
	require.Positive(t, kinds[rma.MemCQ].Count)
	require.GreaterOrEqual(t, kinds[rma.MemCQ].Bytes, int64(kinds[rma.MemCQ].Count)*ibv.SizeOf[ibv.CQ]())
	require.Positive(t, kinds[rma.MemRegistered].Bytes, "the runtime's and the test's segments")
}

// The estimates of `goarmci info` come from objects created as a rank creates them: every kind
// is there with its bytes; an RC connection costs more than a DC peer record, a tcp stream at
// least its read buffer, a completion queue its record and first entries.
func TestMemoryEstimates(t *testing.T) {
	c, _, err := config.FromEnv()
	require.NoError(t, err)
	est, err := rma.MemoryEstimates(&c)
	require.NoError(t, err)
	by := map[string]int64{}
	for _, e := range est {
		require.Positive(t, e.Bytes, e.Kind)
		require.NotEmpty(t, e.What)
		by[e.Kind] = e.Bytes
	}
	require.Len(t, by, 6, "%+v", est)
	require.Greater(t, by["RC connection (tcp)"], by["DC peer (tcp)"])
	require.Greater(t, by["node queue pair (shm)"], ibv.SizeOf[ibv.QP]())
	require.Greater(t, by["tcp stream"], int64(256<<10))
	require.Equal(t, ibv.SizeOf[ibv.CQ]()+4*ibv.CQEntryBytes(), by["completion queue"])
	require.Equal(t, ibv.CQEntryBytes(), by["CQ entry"])
}
