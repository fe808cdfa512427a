package hybridft

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
)

// TestAbortFlushesRequests: writes to a peer that stopped answering (every packet it receives
// dropped) wait for recovery up to the partition timeout (30 s here); Abort, as the runtime calls
// it when the peer's process is known to have ended, completes every one of them failed at once
// and the connection reports the given error.
func TestAbortFlushesRequests(t *testing.T) {
	var deaf atomic.Bool
	a := newNode(t, testOptions(), 1, 1<<16)
	b := newNodeTCP(t, testOptions(), 1, 1<<16, func(uint8, []byte) bool { return deaf.Load() })
	link(t, a, b, 1, ConnectOptions{})
	c := a.conns[0]
	cl := newCollector(a.ep)
	write := func(id uint64) *ibv.SendWR {
		return &ibv.SendWR{ID: id, Opcode: ibv.OpRDMAWrite, LocalBuf: a.buf[:4096],
			RemoteAddr: b.mr.Addr, RKey: b.mr.RKey}
	}
	postRetry(t, c, cl, write(1))
	cl.waitAll(t, 1)
	require.Equal(t, ibv.WCSuccess, cl.got[1].Status)

	deaf.Store(true)
	for id := uint64(2); id < 10; id++ {
		postRetry(t, c, cl, write(id))
	}
	gone := errors.New("peer process ended")
	c.Abort(gone)
	cl.waitAll(t, 9)
	for id := uint64(2); id < 10; id++ {
		require.NotEqual(t, ibv.WCSuccess, cl.got[id].Status, "write %d", id)
	}
	require.ErrorIs(t, c.Err(), gone)
	require.Error(t, c.Post(write(10)), "a given-up connection takes no more requests")
}
