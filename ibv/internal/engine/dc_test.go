package engine

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/ibvtest"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/goarmci/goarmci/ibv/wire"
)

// Inbound packets of a DC QP: requests create the record of a new peer in RTR and RTS, responses
// only reach an existing one, and nothing passes in another state or as a UD send.
func TestDCAdmit(t *testing.T) {
	requests := []wire.Opcode{wire.OpWrite, wire.OpReadReq, wire.OpAtomic, wire.OpAccumulate}
	responses := []wire.Opcode{wire.OpAck, wire.OpReadResp, wire.OpAtomicAck}
	for _, st := range []ibv.QPState{ibv.StateReset, ibv.StateInit, ibv.StateRTR, ibv.StateRTS, ibv.StateSQD, ibv.StateError} {
		open := st == ibv.StateRTR || st == ibv.StateRTS
		for _, op := range requests {
			use, create := dcAdmit(st, op)
			assert.Equal(t, open, use, "%v %v", st, op)
			assert.Equal(t, open, create, "%v %v", st, op)
		}
		for _, op := range responses {
			use, create := dcAdmit(st, op)
			assert.Equal(t, open, use, "%v %v", st, op)
			assert.False(t, create, "%v %v", st, op)
		}
		use, _ := dcAdmit(st, wire.OpUDSend)
		assert.False(t, use, "%v UD send", st)
	}
}

// A transport's path fault reaches the peer records of a DC QP: with an ACK timeout of hours, a
// lost write is retransmitted at once when the path to its peer faults, and only then.
func TestDCPathFaultRetransmitsAtOnce(t *testing.T) {
	n := newMemNet()
	a, b := n.open(t, 1, Config{}), n.open(t, 1, Config{})
	qa := ibvtest.ConnectDC(t, a, nil, 1, ibv.AccessAll)
	require.NoError(t, qa.Modify(&ibv.QPAttr{Timeout: 31}, ibv.AttrTimeout))
	target := ibvtest.DCTargets(t, ibvtest.Funcs{}, qa, []*ibv.Context{b}, 1, 8)[0]
	var dropped atomic.Bool
	n.setFault(func(pkt []byte, from, to string) (bool, bool) {
		return dropped.CompareAndSwap(false, true), false // lose the first packet only
	})
	require.NoError(t, qa.PostSend(target.WR(ibv.SendWR{ID: 1, Flags: ibv.SendSignaled, Opcode: ibv.OpRDMAWrite,
		LocalBuf: []byte("pf")}, 0)))
	require.True(t, dropped.Load())
	require.Zero(t, qa.SendCQ().Len())
	pb, _ := b.QueryPort(1)
	e := provider.DeviceDriver(a).(*Device).Engine()
	e.PathFault(1, "not-this-path")
	e.PathFault(1, pb.Addr)
	wc := waitWC(t, qa.SendCQ())
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, "pf", string(target.MR.Buf()[:2]))
}
