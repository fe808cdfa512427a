package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/internal/wqring"
)

// TestWindowBytes: the packet window bounds small packets, WindowBytes bounds large segments
// (never below 2 packets), and ACK requests come at least every ackBytes.
func TestWindowBytes(t *testing.T) {
	e := &Engine{cfg: Config{WindowBytes: 4 << 20}, window: 128}
	bytes := func(n uint64) func() uint64 { return func() uint64 { return n } }
	require.False(t, e.windowFull(127, bytes(127*8)))
	require.True(t, e.windowFull(128, bytes(128*8)))
	require.False(t, e.windowFull(3, bytes(3<<20)))
	require.True(t, e.windowFull(4, bytes(4<<20)))
	require.False(t, e.windowFull(1, bytes(8<<20)), "one packet of any size never fills the window")
	require.True(t, e.windowFull(2, bytes(8<<20)))
	e.cfg.WindowBytes = 0
	require.False(t, e.windowFull(64, bytes(64<<20)))
	require.Equal(t, uint32(32), ackEvery(4096))
	require.Equal(t, uint32(16), ackEvery(64<<10))
	require.Equal(t, uint32(4), ackEvery(256<<10))
	require.Equal(t, uint32(1), ackEvery(1<<20))
}

// TestBytesInFlight: the payload between the first unacknowledged PSN and the transmit position,
// across WQEs of several packets, read WQEs and partly acknowledged messages.
func TestBytesInFlight(t *testing.T) {
	s := &sendState{wq: wqring.New[swqe](8)}
	s.a.mtu = 1 << 20
	s.resetPSN(100)
	post := func(op ibv.Opcode, length uint64) {
		require.True(t, s.wq.Reserve(s.head, s.tail))
		w := s.slot(s.tail)
		*w = swqe{op: op, length: length, pkt: 1 << 20, npkts: uint32(max(1, (length+(1<<20)-1)>>20)), firstPSN: s.sqPSN, off: s.postedBytes}
		s.postedBytes += length
		s.sqPSN += w.npkts
		s.tail++
	}
	post(ibv.OpRDMAWrite, 3<<20+5) // PSNs 100-103
	post(ibv.OpRDMARead, 2<<20)    // PSNs 104-105
	post(ibv.OpRDMAWrite, 8)       // PSN 106
	require.Equal(t, uint64(0), s.bytesInFlight(), "nothing sent")
	s.cur, s.curPkt = 0, 3 // PSNs 100-102 sent
	require.Equal(t, uint64(3<<20), s.bytesInFlight())
	s.una = 102 // two acknowledged
	require.Equal(t, uint64(1<<20), s.bytesInFlight())
	s.cur, s.curPkt = 2, 0 // the write's last 5 bytes and the read sent
	require.Equal(t, uint64(1<<20+5+2<<20), s.bytesInFlight())
	s.una, s.head = 104, 1 // the write complete
	require.Equal(t, uint64(2<<20), s.bytesInFlight())
	s.cur, s.curPkt = 3, 0 // the small write sent too
	require.Equal(t, uint64(2<<20+8), s.bytesInFlight())
	s.una, s.head = 107, 3
	require.Equal(t, uint64(0), s.bytesInFlight())
}
