package engine

import (
	"bytes"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/wire"
)

// TestWriteWaitsForOverlappingRead: a write, accumulate or atomic posted right after a read of
// overlapping target bytes is not transmitted before the read's last response arrived (read
// responses may leave by reference to the responder's memory), and the read returns the bytes
// from before it.
func TestWriteWaitsForOverlappingRead(t *testing.T) {
	n := newMemNet()
	var mu sync.Mutex
	var sent []wire.Opcode
	n.setFault(func(pkt []byte, from, to string) (bool, bool) {
		var p wire.Packet
		if wire.Decode(pkt, &p) == nil && p.Opcode != wire.OpAck {
			mu.Lock()
			sent = append(sent, p.Opcode)
			mu.Unlock()
		}
		return false, false
	})
	const size = 256 << 10
	x, y := connectRC(t, n.open(t, 1, Config{}), n.open(t, 1, Config{}), pairOpts{mrSize: 4 * size})
	one := make([]byte, 8)
	one[0] = 1
	for _, tc := range []struct {
		name    string
		wr      ibv.SendWR
		overlap bool
	}{
		{"write", ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: pattern(size, 9), RemoteAddr: y.mr.Addr + size/2}, true},
		{"accumulate", ibv.SendWR{Opcode: ibv.OpAccumulate, AccType: ibv.AccInt64, Scale: 1, LocalBuf: one, RemoteAddr: y.mr.Addr + size - 8}, true},
		{"atomic", ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, CompareAdd: 1, LocalBuf: make([]byte, 8), RemoteAddr: y.mr.Addr}, true},
		{"disjoint write", ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: pattern(size, 7), RemoteAddr: y.mr.Addr + 2*size}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := pattern(size, 3)
			copy(y.mr.Buf(), old)
			mu.Lock()
			sent = sent[:0]
			mu.Unlock()
			got := make([]byte, size)
			require.NoError(t, x.qp.PostSend(&ibv.SendWR{ID: 1, Opcode: ibv.OpRDMARead, Flags: ibv.SendSignaled,
				LocalBuf: got, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey}))
			wr := tc.wr
			wr.ID, wr.Flags, wr.RKey = 2, ibv.SendSignaled, y.mr.RKey
			require.NoError(t, x.qp.PostSend(&wr))
			for range 2 {
				require.Equal(t, ibv.WCSuccess, waitWC(t, x.cq).Status)
			}
			require.True(t, bytes.Equal(old, got), "the read saw the later %s", tc.name)
			mu.Lock()
			defer mu.Unlock()
			lastResp, firstOther := -1, -1
			for i, op := range sent {
				switch op {
				case wire.OpReadResp:
					lastResp = i
				case wire.OpReadReq:
				default:
					if firstOther < 0 {
						firstOther = i
					}
				}
			}
			require.Positive(t, lastResp)
			require.Positive(t, firstOther)
			if tc.overlap {
				require.Greater(t, firstOther, lastResp, "the %s left before the read's responses: %v", tc.name, sent)
			}
		})
	}
}
