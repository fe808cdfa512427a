package ibvtest

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/goarmci/goarmci/ibv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func (s *suite) needSendRecv(t *testing.T) {
	t.Helper()
	if !s.caps.SendRecv {
		t.Skip("provider declares no send/receive (Caps.SendRecv false)")
	}
}

func (s *suite) testSendRecv(t *testing.T) {
	s.needSendRecv(t)
	t.Run("Ordering", func(t *testing.T) {
		qa, qb := s.connect(t)
		const k, slot = 300, 80
		rmr := RegMR(t, s.p, qb.PD(), k*slot, ibv.AccessLocalWrite, nil)
		for i := 0; i < k; i++ {
			require.NoError(t, qb.PostRecv(&ibv.RecvWR{ID: uint64(1000 + i), SGL: []ibv.SGE{rmr.SGE(i*slot, slot)}}))
		}
		msgs := make([][]byte, k)
		for i := range msgs {
			n := 4 + (i*13)%(slot-4)
			if i == 7 {
				n = 0 // a zero-length send
			}
			msgs[i] = Pattern(uint64(i), n)
			if n >= 4 {
				binary.LittleEndian.PutUint32(msgs[i], uint32(i))
			}
			require.NoError(t, qa.PostSend(&ibv.SendWR{ID: uint64(i), Opcode: ibv.OpSend, Flags: ibv.SendSignaled, LocalBuf: msgs[i]}))
		}
		for i := 0; i < k; i++ {
			wc := WaitOK(t, qa.SendCQ(), uint64(i))
			assert.Equal(t, ibv.WCSend, wc.Opcode)
		}
		for i := 0; i < k; i++ {
			wc := WaitWC(t, qb.RecvCQ())
			require.Equal(t, ibv.WCSuccess, wc.Status, "receive %d: %+v", i, wc)
			require.Equal(t, uint64(1000+i), wc.WRID, "receives complete in order")
			assert.Equal(t, ibv.WCRecv, wc.Opcode)
			assert.Equal(t, uint32(len(msgs[i])), wc.ByteLen, "receive %d length", i)
			assert.Equal(t, qb.Num(), wc.QPNum)
			assert.False(t, wc.HasImm)
			SameBytes(t, fmt.Sprintf("message %d", i), msgs[i], rmr.Buf()[i*slot:i*slot+len(msgs[i])])
		}
		checkQueuesEmpty(t, qb, "after all receives")
	})
	t.Run("ScatterGather", func(t *testing.T) {
		qa, qb := s.connect(t)
		rmr := RegMR(t, s.p, qb.PD(), 64, ibv.AccessLocalWrite, nil)
		smr := RegMR(t, s.p, qa.PD(), 64, 0, Pattern(5, 64))
		// Receive into 3+5+32 bytes in three places; send 20 bytes gathered from two places.
		require.NoError(t, qb.PostRecv(&ibv.RecvWR{ID: 1, SGL: []ibv.SGE{rmr.SGE(0, 3), rmr.SGE(10, 5), rmr.SGE(20, 32)}}))
		require.NoError(t, qa.PostSend(&ibv.SendWR{ID: 2, Opcode: ibv.OpSend, Flags: ibv.SendSignaled,
			SGL: []ibv.SGE{smr.SGE(40, 9), smr.SGE(1, 11)}}))
		WaitOK(t, qa.SendCQ(), 2)
		wc := WaitOK(t, qb.RecvCQ(), 1)
		assert.Equal(t, uint32(20), wc.ByteLen)
		msg := append(append([]byte(nil), smr.Buf()[40:49]...), smr.Buf()[1:12]...)
		want := make([]byte, 64)
		copy(want[0:3], msg[0:3])
		copy(want[10:15], msg[3:8])
		copy(want[20:32], msg[8:20])
		SameBytes(t, "scattered receive", want, rmr.Buf())
	})
	t.Run("Immediate", func(t *testing.T) {
		qa, qb := s.connect(t)
		rmr := RegMR(t, s.p, qb.PD(), 64, ibv.AccessAll, nil)
		require.NoError(t, qb.PostRecv(&ibv.RecvWR{ID: 1, SGL: []ibv.SGE{rmr.SGE(0, 16)}}))
		require.NoError(t, qb.PostRecv(&ibv.RecvWR{ID: 2, SGL: []ibv.SGE{rmr.SGE(16, 16)}}))
		require.NoError(t, qa.PostSend(&ibv.SendWR{ID: 3, Opcode: ibv.OpSendImm, Flags: ibv.SendSignaled,
			LocalBuf: []byte("imm!"), Imm: 0xdeadbeef}))
		WaitOK(t, qa.SendCQ(), 3)
		wc := WaitOK(t, qb.RecvCQ(), 1)
		assert.Equal(t, ibv.WCRecv, wc.Opcode)
		assert.True(t, wc.HasImm)
		assert.Equal(t, uint32(0xdeadbeef), wc.Imm)
		assert.Equal(t, uint32(4), wc.ByteLen)
		assert.Equal(t, "imm!", string(rmr.Buf()[:4]))

		// RDMA write with immediate: the data lands at the remote address and consumes a receive.
		require.NoError(t, qa.PostSend(&ibv.SendWR{ID: 4, Opcode: ibv.OpRDMAWriteImm, Flags: ibv.SendSignaled,
			LocalBuf: []byte("written"), RemoteAddr: rmr.Addr + 40, RKey: rmr.RKey, Imm: 0x01020304}))
		wc = WaitOK(t, qa.SendCQ(), 4)
		assert.Equal(t, ibv.WCRDMAWrite, wc.Opcode)
		wc = WaitOK(t, qb.RecvCQ(), 2)
		assert.Equal(t, ibv.WCRecvRDMAImm, wc.Opcode)
		assert.True(t, wc.HasImm)
		assert.Equal(t, uint32(0x01020304), wc.Imm)
		assert.Equal(t, "written", string(rmr.Buf()[40:47]))
		SameBytes(t, "the consumed receive buffer", make([]byte, 16), rmr.Buf()[16:32])
	})
	t.Run("ReceiveTooSmall", func(t *testing.T) {
		qa, qb := s.connect(t)
		rmr := RegMR(t, s.p, qb.PD(), 32, ibv.AccessLocalWrite, nil)
		require.NoError(t, qb.PostRecv(&ibv.RecvWR{ID: 1, SGL: []ibv.SGE{rmr.SGE(0, 8)}}))
		require.NoError(t, qa.PostSend(&ibv.SendWR{ID: 2, Opcode: ibv.OpSend, Flags: ibv.SendSignaled, LocalBuf: Pattern(1, 16)}))
		wc := WaitWC(t, qb.RecvCQ())
		assert.Equal(t, uint64(1), wc.WRID)
		assert.Equal(t, ibv.WCLocLenErr, wc.Status, "receiver: %+v", wc)
		wc = WaitWC(t, qa.SendCQ())
		assert.Equal(t, uint64(2), wc.WRID)
		assert.Equal(t, ibv.WCRemInvReqErr, wc.Status, "sender (IBA: NAK invalid request): %+v", wc)
		SameBytes(t, "bytes past the receive buffer", make([]byte, 24), rmr.Buf()[8:])
	})
	t.Run("SendBeforeReceive", func(t *testing.T) {
		// With RNR retry 7 (infinite, the default) a send that finds no receive waits for one.
		qa, qb := s.connect(t)
		rmr := RegMR(t, s.p, qb.PD(), 16, ibv.AccessLocalWrite, nil)
		require.NoError(t, qa.PostSend(&ibv.SendWR{ID: 5, Opcode: ibv.OpSend, Flags: ibv.SendSignaled, LocalBuf: []byte("late")}))
		require.Equal(t, 0, qb.RecvCQ().Len())
		require.NoError(t, qb.PostRecv(&ibv.RecvWR{ID: 6, SGL: []ibv.SGE{rmr.SGE(0, 16)}}))
		WaitOK(t, qb.RecvCQ(), 6)
		WaitOK(t, qa.SendCQ(), 5)
		assert.Equal(t, "late", string(rmr.Buf()[:4]))
	})
	t.Run("ReceiveBadLKey", func(t *testing.T) {
		qa, qb := s.connect(t)
		rmr := RegMR(t, s.p, qb.PD(), 16, ibv.AccessLocalWrite, nil)
		require.NoError(t, qb.PostRecv(&ibv.RecvWR{ID: 1, SGL: []ibv.SGE{{Addr: rmr.Addr, Length: 16, LKey: badKey(qb.Context(), rmr.LKey)}}}))
		require.NoError(t, qa.PostSend(&ibv.SendWR{ID: 2, Opcode: ibv.OpSend, Flags: ibv.SendSignaled, LocalBuf: []byte("x")}))
		wc := WaitWC(t, qb.RecvCQ())
		assert.Equal(t, uint64(1), wc.WRID)
		assert.Equal(t, ibv.WCLocProtErr, wc.Status, "receiver: %+v", wc)
		wc = WaitWC(t, qa.SendCQ())
		assert.NotEqual(t, ibv.WCSuccess, wc.Status, "sender of a message the receiver could not place: %+v", wc)
		SameBytes(t, "receive memory", make([]byte, 16), rmr.Buf())
	})
}
