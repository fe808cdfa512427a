package ibvtest

import (
	"errors"
	"testing"

	"github.com/goarmci/goarmci/ibv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const udQKey = 0x11110000

func (s *suite) testUD(t *testing.T) {
	if !s.caps.UD {
		t.Skip("provider declares no UD support (Caps.UD false)")
	}
	if !s.caps.SendRecv {
		t.Skip("provider declares no send/receive (Caps.SendRecv false)")
	}
	a, b := s.two(t)
	qa := ConnectUD(t, a, s.port, udQKey)
	qb := ConnectUD(t, b, s.port, udQKey)
	pa, pb := QueryPort(t, a, s.port), QueryPort(t, b, s.port)
	mtu := s.udMTU(t, b)
	require.Positive(t, mtu)
	ah, err := qa.PD().CreateAH(PathTo(pb, s.port))
	require.NoError(t, err)
	const slots = 8
	rmr := RegMR(t, s.p, qb.PD(), slots*mtu, ibv.AccessLocalWrite, nil)
	next := 0 // receive slots are used round robin
	postRecv := func() {
		t.Helper()
		i := next % slots
		next++
		require.NoError(t, qb.PostRecv(&ibv.RecvWR{ID: uint64(i), SGL: []ibv.SGE{rmr.SGE(i*mtu, mtu)}}))
	}
	for i := 0; i < slots; i++ {
		postRecv()
	}
	sendID := uint64(0)
	send := func(msg []byte, qkey uint32) error {
		sendID++
		return qa.PostSend(&ibv.SendWR{ID: sendID, Opcode: ibv.OpSend, Flags: ibv.SendSignaled, LocalBuf: msg,
			AH: ah, RemoteQPN: qb.Num(), QKey: qkey})
	}
	recvd := 0
	// expect waits for the next datagram at qb and checks it is msg, whole, from qa.
	expect := func(msg []byte) {
		t.Helper()
		wc := WaitWC(t, qb.RecvCQ())
		slot := recvd % slots
		recvd++
		require.Equal(t, ibv.WCSuccess, wc.Status, "%+v", wc)
		require.Equal(t, uint64(slot), wc.WRID, "datagram landed in the expected receive")
		assert.Equal(t, ibv.WCRecv, wc.Opcode)
		require.Equal(t, uint32(len(msg)), wc.ByteLen, "whole datagram")
		assert.Equal(t, qa.Num(), wc.SrcQP)
		assert.Equal(t, pa.Addr, wc.SrcAddr)
		assert.Equal(t, qb.Num(), wc.QPNum)
		SameBytes(t, "datagram", msg, rmr.Buf()[slot*mtu:slot*mtu+len(msg)])
		postRecv()
	}
	sendOK := func(msg []byte) {
		t.Helper()
		require.NoError(t, send(msg, udQKey))
		wc := WaitOK(t, qa.SendCQ(), sendID)
		assert.Equal(t, ibv.WCSend, wc.Opcode)
	}

	t.Run("Sizes", func(t *testing.T) {
		for _, n := range []int{1, 7, mtu / 2, mtu - 1, mtu} {
			msg := Pattern(uint64(n), n)
			sendOK(msg)
			expect(msg)
		}
	})
	t.Run("OverMTU", func(t *testing.T) {
		err := send(Pattern(1, mtu+1), udQKey)
		if err != nil {
			assert.True(t, errors.Is(err, ibv.ErrInvalidArgument), "over-MTU post: %v", err)
		} else {
			wc := WaitWC(t, qa.SendCQ())
			assert.Equal(t, sendID, wc.WRID)
			assert.NotEqual(t, ibv.WCSuccess, wc.Status, "a datagram over the MTU must not be sent")
		}
		// Nothing arrived: the next datagram is the marker.
		if qa.State() != ibv.StateRTS {
			t.Fatalf("UD QP left RTS (%v) after an over-MTU datagram", qa.State())
		}
		marker := []byte("marker-1")
		sendOK(marker)
		expect(marker)
	})
	t.Run("WrongQKey", func(t *testing.T) {
		require.NoError(t, send([]byte("wrong qkey"), udQKey+1))
		wc := WaitOK(t, qa.SendCQ(), sendID)
		assert.Equal(t, ibv.WCSend, wc.Opcode, "the sender does not learn of the drop")
		marker := []byte("marker-2")
		sendOK(marker)
		expect(marker)
	})
	t.Run("Immediate", func(t *testing.T) {
		sendID++
		require.NoError(t, qa.PostSend(&ibv.SendWR{ID: sendID, Opcode: ibv.OpSendImm, Flags: ibv.SendSignaled,
			LocalBuf: []byte("ud-imm"), Imm: 0xabcdef01, AH: ah, RemoteQPN: qb.Num(), QKey: udQKey}))
		WaitOK(t, qa.SendCQ(), sendID)
		wc := WaitWC(t, qb.RecvCQ())
		slot := recvd % slots
		recvd++
		require.Equal(t, ibv.WCSuccess, wc.Status)
		assert.True(t, wc.HasImm)
		assert.Equal(t, uint32(0xabcdef01), wc.Imm)
		assert.Equal(t, "ud-imm", string(rmr.Buf()[slot*mtu:slot*mtu+6]))
		postRecv()
	})
	t.Run("WrongQPN", func(t *testing.T) {
		sendID++
		require.NoError(t, qa.PostSend(&ibv.SendWR{ID: sendID, Opcode: ibv.OpSend, Flags: ibv.SendSignaled,
			LocalBuf: []byte("nobody"), AH: ah, RemoteQPN: qb.Num() + 1000, QKey: udQKey}))
		WaitOK(t, qa.SendCQ(), sendID)
		marker := []byte("marker-3")
		sendOK(marker)
		expect(marker)
	})
	t.Run("RDMARefused", func(t *testing.T) {
		err := qa.PostSend(&ibv.SendWR{ID: 1, Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{1}, AH: ah, RemoteQPN: qb.Num(),
			RemoteAddr: rmr.Addr, RKey: rmr.RKey})
		assert.ErrorIs(t, err, ibv.ErrInvalidArgument)
		checkQueuesEmpty(t, qa, "refused UD RDMA")
	})
	checkQueuesEmpty(t, qb, "UD receiver at the end")
}
