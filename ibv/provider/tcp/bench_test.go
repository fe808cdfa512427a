package tcp

import (
	"context"
	"testing"

	"github.com/goarmci/goarmci/ibv"
)

// benchWrite measures a blocking RDMA write of size bytes between two devices over loopback TCP:
// post a signaled write and wait for its completion (what rma's blocking Put waits for).
func benchWrite(b *testing.B, size int) {
	x, y := connect(b, open(b, 1, Config{}), open(b, 1, Config{}), max(size, 4096), false, 7)
	wr := ibv.SendWR{Opcode: ibv.OpRDMAWrite, Flags: ibv.SendSignaled, LocalBuf: pattern(size, 1), RemoteAddr: y.mr.Addr, RKey: y.mr.RKey}
	ctx := context.Background()
	var wc [1]ibv.WC
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := x.qp.PostSend(&wr); err != nil {
			b.Fatal(err)
		}
		for x.cq.Poll(wc[:]) == 0 {
			if err := x.cq.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
		if wc[0].Status != ibv.WCSuccess {
			b.Fatalf("status %v", wc[0].Status)
		}
	}
}

func BenchmarkRCWrite8B(b *testing.B)   { benchWrite(b, 8) }
func BenchmarkRCWrite1MiB(b *testing.B) { benchWrite(b, 1<<20) }
