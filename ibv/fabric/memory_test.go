package fabric_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
		dc, _, _, rc, dcEst, rcEst := dcAndRCMemory(t, n)
		t.Logf("%4d peers: RC connection %5.0f B accounted, %5.0f B measured; DC peer %5.0f B accounted, %5.0f B measured",
			n, rcEst, rc, dcEst, dc)
		assert.InEpsilon(t, rc, rcEst, 0.15, "%d peers: RC connection", n)
		assert.InEpsilon(t, dc, dcEst, 0.15, "%d peers: DC peer", n)
	}
}
