package fabric_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/ibv/ibvtest"
)

// BenchmarkRCWrite measures signaled RDMA writes on a fault-free fabric, one at a time (latency)
// and a window of 64 in flight (throughput), in real time.
func BenchmarkRCWrite(b *testing.B) {
	for _, bc := range []struct {
		name        string
		size, depth int
	}{{"8B-lat", 8, 1}, {"64KiB-bw", 64 << 10, 64}} {
		b.Run(bc.name, func(b *testing.B) {
			_, devs := newFabric(b, fabric.Config{Nodes: 2})
			qa, _, src, dst := rcPair(b, devs, bc.size)
			wr := &ibv.SendWR{Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{src.SGE(0, bc.size)}, RemoteAddr: dst.Addr, RKey: dst.RKey}
			b.SetBytes(int64(bc.size))
			b.ResetTimer()
			inflight := 0
			for i := 0; i < b.N; i++ {
				wr.ID = uint64(i)
				require.NoError(b, qa.PostSend(wr))
				inflight++
				for inflight >= bc.depth || (i == b.N-1 && inflight > 0) {
					wc := ibvtest.WaitWC(b, qa.SendCQ())
					if wc.Status != ibv.WCSuccess {
						b.Fatalf("write %d: %v", wc.WRID, wc.Status)
					}
					inflight--
				}
			}
		})
	}
}
