package fabric_test

import (
	"bytes"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/ibv/ibvtest"
)

// The work queues of an RC queue pair start small and grow with the requests outstanding
// (internal/wqring), with the verbs capacity exact: behind a partition that holds every ACK
// back, a send queue of MaxSendWR = 21 takes exactly 21 writes and refuses the 22nd with
// ErrQueueFull, and a receive queue of MaxRecvWR = 21 takes exactly 21 receives. When the
// partition heals the requester retransmits the 21 writes from its grown queue: each completes
// once, in order, and the target holds exactly the source. A second round over a lossy link
// (the queue shrank when it emptied, and grows again) is exact too.
func TestRCQueuesGrowToCapacity(t *testing.T) {
	const n, chunk = 21, 4 << 10
	synctest.Test(t, func(t *testing.T) {
		var p fabric.Plan
		p.Seed = 3
		p.Partition([]int{0}, []int{1}, 0, 30*time.Millisecond)
		p.Noise(2, 1, 0.05, fabric.Range{Min: 10 * time.Microsecond, Max: 100 * time.Microsecond})
		_, devs := newFabric(t, fabric.Config{Nodes: 2, Plan: p})
		qa, qb, src, dst := rcPairCap(t, devs, 2*n*chunk, ibv.QPCap{MaxSendWR: n, MaxRecvWR: n})
		for i := range n {
			require.NoError(t, qb.PostRecv(&ibv.RecvWR{ID: uint64(i)}), "receive %d of %d", i, n)
		}
		err := qb.PostRecv(&ibv.RecvWR{ID: n})
		require.True(t, errors.Is(err, ibv.ErrQueueFull), "receive %d: %v", n, err)

		for round := range 2 {
			base := round * n
			for i := range n {
				require.NoError(t, qa.PostSend(&ibv.SendWR{ID: uint64(base + i), Opcode: ibv.OpRDMAWrite,
					SGL: []ibv.SGE{src.SGE((base+i)*chunk, chunk)}, RemoteAddr: dst.Addr + uint64((base+i)*chunk),
					RKey: dst.RKey}), "write %d of %d", i, n)
			}
			if round == 0 {
				err := qa.PostSend(&ibv.SendWR{ID: 999, Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{src.SGE(0, 8)},
					RemoteAddr: dst.Addr, RKey: dst.RKey})
				require.True(t, errors.Is(err, ibv.ErrQueueFull), "write %d outstanding: %v", n+1, err)
			}
			for i := range n {
				wc := ibvtest.WaitWC(t, qa.SendCQ())
				require.Equal(t, ibv.WCSuccess, wc.Status, "round %d write %d", round, i)
				require.Equal(t, uint64(base+i), wc.WRID, "round %d: completions in order", round)
			}
			require.Zero(t, qa.SendCQ().Poll(make([]ibv.WC, 1)), "each write completed once")
			require.True(t, bytes.Equal(src.Buf()[:(base+n)*chunk], dst.Buf()[:(base+n)*chunk]), "round %d: data at the target", round)
		}
		require.Positive(t, qa.Counters().Retransmissions(), "the partition and the loss made the requester go back")
		require.True(t, bytes.Equal(src.Buf(), dst.Buf()))
	})
}
