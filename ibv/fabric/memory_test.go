package fabric_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/ibv/ibvtest"
)

// What the queue pairs account (ibv.QP.MemoryFootprint: engine state, work-queue entries, DC
// peer records) matches the heap that n connections cost on the fabric, measured as
// TestDCMemoryPerPeer does: within 15 % for an RC connection (both ends) and for a DC peer
// (a record at each end). The heap also holds what the accounting leaves out (the engine's
// tables of queue pairs, the fabric's), which the tolerance bounds.
func TestMemoryFootprintMatchesHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("memory measurement")
	}
	for _, n := range []int{256, 1024} {
		dc, _, _, _, rc, dcEst, rcEst := dcAndRCMemory(t, n)
		t.Logf("%4d peers: RC connection %5.0f B accounted, %5.0f B measured; DC peer %5.0f B accounted, %5.0f B measured",
			n, rcEst, rc, dcEst, dc)
		assert.InEpsilon(t, rc, rcEst, 0.15, "%d peers: RC connection", n)
		assert.InEpsilon(t, dc, dcEst, 0.15, "%d peers: DC peer", n)
	}
}

// A DC queue pair accounts one record per peer it reached: DCPeers counts them and its
// footprint grows by DCPeerBytes per peer.
func TestDCPeerBytes(t *testing.T) {
	_, devs := newFabric(t, fabric.Config{Nodes: 4})
	qa := ibvtest.ConnectDC(t, devs[0], nil, 1, ibv.AccessAll)
	targets := ibvtest.DCTargets(t, memProvider, qa, devs[1:], 1, 64)
	rc := ibvtest.CreateQP(t, devs[0], nil, ibv.RC, 16, ibv.QPCap{}, false)
	assert.Zero(t, rc.DCPeerBytes(), "not a DC queue pair")
	per := qa.DCPeerBytes()
	require.Positive(t, per)
	before := qa.MemoryFootprint()
	for i, d := range targets {
		require.NoError(t, qa.PostSend(d.WR(ibv.SendWR{ID: uint64(i), Flags: ibv.SendSignaled, Opcode: ibv.OpRDMAWrite,
			LocalBuf: []byte{1}}, 0)))
		ibvtest.WaitOK(t, qa.SendCQ(), uint64(i))
	}
	assert.Equal(t, len(targets), qa.DCPeers())
	assert.Equal(t, before+int64(len(targets))*per, qa.MemoryFootprint())
}
