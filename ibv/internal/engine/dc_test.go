package engine

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goarmci/goarmci/ibv"
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

// A peer record's send queue doubles up to the DC QP's MaxSendWR and keeps its outstanding
// requests in order at their absolute indexes.
func TestDCSendQueueGrows(t *testing.T) {
	d := &dcTable{maxWR: 12}
	q := &QP{dc: d}
	q.sq.wq = make([]swqe, dcFirstWR)
	q.sq.head, q.sq.tail = 6, 6+dcFirstWR // wrapped around the ring
	for i := q.sq.head; i != q.sq.tail; i++ {
		q.sq.slot(i).id = i
	}
	for _, want := range []int{8, 12} {
		assert.True(t, q.growSendQueue())
		assert.Len(t, q.sq.wq, want)
		for i := q.sq.head; i != q.sq.tail; i++ {
			assert.Equal(t, i, q.sq.slot(i).id, "request %d after growing to %d", i, want)
		}
		for range want - int(q.sq.tail-q.sq.head) {
			q.sq.slot(q.sq.tail).id = q.sq.tail
			q.sq.tail++
		}
	}
	assert.False(t, q.growSendQueue(), "bounded by MaxSendWR")
	d.qp = q
	assert.False(t, q.growSendQueue(), "the DC QP itself holds no queue")
}
