//go:build linux

package shm

import (
	"testing"

	"github.com/goarmci/goarmci/ibv"
)

// benchPair connects two devices of this process; the origin's path (descriptor checks, then
// a copy through its own mapping of the target's memfd buffer) is the same as across processes.
func benchPair(b *testing.B, n int) (o *end, src *ibv.MR, dst *ibv.MR) {
	job := testJob()
	o = openEnd(b, job, "o")
	t := openEnd(b, job, "t")
	connectQPs(b, o, o.qp, t, t.qp, ibv.AccessAll)
	_, src = allocMR(b, o, n, ibv.AccessAll)
	_, dst = allocMR(b, t, n, ibv.AccessAll)
	return o, src, dst
}

// run posts wr b.N times, each signaled, and polls the CQ until its completion.
func benchOp(b *testing.B, o *end, wr ibv.SendWR, bytes int) {
	wr.Flags |= ibv.SendSignaled
	var wc [1]ibv.WC
	b.SetBytes(int64(bytes))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := o.qp.PostSend(&wr); err != nil {
			b.Fatal(err)
		}
		for o.cq.Poll(wc[:]) == 0 {
		}
		if wc[0].Status != ibv.WCSuccess {
			b.Fatal(wc[0].Status)
		}
	}
}

func BenchmarkShmWrite8B(b *testing.B) {
	o, src, dst := benchPair(b, 4096)
	benchOp(b, o, ibv.SendWR{Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{src.SGE(0, 8)}, RemoteAddr: dst.Addr, RKey: dst.RKey}, 8)
}

func BenchmarkShmRead8B(b *testing.B) {
	o, src, dst := benchPair(b, 4096)
	benchOp(b, o, ibv.SendWR{Opcode: ibv.OpRDMARead, SGL: []ibv.SGE{src.SGE(0, 8)}, RemoteAddr: dst.Addr, RKey: dst.RKey}, 8)
}

func BenchmarkShmWrite8BLocalBuf(b *testing.B) {
	o, _, dst := benchPair(b, 4096)
	benchOp(b, o, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: make([]byte, 8), RemoteAddr: dst.Addr, RKey: dst.RKey}, 8)
}

func BenchmarkShmFetchAdd(b *testing.B) {
	o, src, dst := benchPair(b, 4096)
	benchOp(b, o, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, SGL: []ibv.SGE{src.SGE(0, 8)}, RemoteAddr: dst.Addr, RKey: dst.RKey, CompareAdd: 1}, 8)
}

func BenchmarkShmAccFloat64x1K(b *testing.B) {
	o, src, dst := benchPair(b, 8192)
	benchOp(b, o, ibv.SendWR{Opcode: ibv.OpAccumulate, SGL: []ibv.SGE{src.SGE(0, 8192)}, RemoteAddr: dst.Addr, RKey: dst.RKey,
		AccType: ibv.AccFloat64, Scale: 1}, 8192)
}

func BenchmarkShmWrite1MiB(b *testing.B) {
	o, src, dst := benchPair(b, 1<<20)
	benchOp(b, o, ibv.SendWR{Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{src.SGE(0, 1<<20)}, RemoteAddr: dst.Addr, RKey: dst.RKey}, 1<<20)
}

// BenchmarkShmWrite8BUnsignaled is a Put without a completion per operation (completion by
// fence, as ARMCI's non-blocking puts use it).
func BenchmarkShmWrite8BUnsignaled(b *testing.B) {
	o, src, dst := benchPair(b, 4096)
	wr := ibv.SendWR{Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{src.SGE(0, 8)}, RemoteAddr: dst.Addr, RKey: dst.RKey}
	b.SetBytes(8)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := o.qp.PostSend(&wr); err != nil {
			b.Fatal(err)
		}
	}
}
