//go:build linux

package shm

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
)

func pair(t *testing.T) (a, b *end) {
	job := testJob()
	a = openEnd(t, job, "a")
	b = openEnd(t, job, "b")
	connectQPs(t, a, a.qp, b, b.qp, ibv.AccessAll)
	return a, b
}

func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7) + seed
	}
	return p
}

func TestOpenAddrAndFiles(t *testing.T) {
	job := testJob()
	ctx, err := Open(Config{Job: job, Name: "r0"})
	require.NoError(t, err)
	attr := ctx.QueryDevice()
	assert.Equal(t, "shm", attr.Provider)
	assert.Equal(t, 1, attr.PhysPortCnt)
	assert.True(t, attr.AtomicCap)
	pa, err := ctx.QueryPort(1)
	require.NoError(t, err)
	assert.Equal(t, job+"/r0", pa.Addr)
	assert.Equal(t, ibv.PortActive, pa.State)
	assert.NotZero(t, pa.LID)
	_, err = ctx.QueryPort(2)
	require.ErrorIs(t, err, ibv.ErrInvalidArgument)
	path := ctlPath(DefaultDir, job, "r0")
	_, err = os.Stat(path)
	require.NoError(t, err, "control file published")

	_, err = Open(Config{Job: job, Name: "r0"})
	require.ErrorIs(t, err, ibv.ErrBusy, "name taken by a live endpoint")
	require.ErrorIs(t, Cleanup(job), ibv.ErrBusy, "live files are kept")

	require.NoError(t, ctx.Close())
	_, err = os.Stat(path)
	require.ErrorIs(t, err, os.ErrNotExist, "control file removed by Close")
	require.NoError(t, Cleanup(job))
}

func TestOpenBadNames(t *testing.T) {
	for _, c := range []Config{{Job: "", Name: "a"}, {Job: "j", Name: ""}, {Job: "a/b", Name: "x"},
		{Job: "j", Name: "x.y"}, {Job: "j", Name: "a", MaxMR: 3}} {
		_, err := Open(c)
		require.ErrorIs(t, err, ibv.ErrInvalidArgument, "%+v", c)
	}
	require.ErrorIs(t, Cleanup("../etc"), ibv.ErrInvalidArgument)
}

func TestStaleFileReplacedAndCleanup(t *testing.T) {
	job := testJob()
	dir := t.TempDir()
	// a file left by a crashed process: garbage, no live owner
	path := ctlPath(dir, job, "r1")
	require.NoError(t, os.WriteFile(path, make([]byte, 8192), 0o600))
	ctx, err := Open(Config{Job: job, Name: "r1", Dir: dir})
	require.NoError(t, err, "stale file replaced")
	require.NoError(t, ctx.Close())

	require.NoError(t, os.WriteFile(ctlPath(dir, job, "r2"), make([]byte, 100), 0o600))
	require.NoError(t, os.WriteFile(ctlPath(dir, job+"x", "r2"), make([]byte, 100), 0o600))
	require.NoError(t, CleanupDir(dir, job))
	_, err = os.Stat(ctlPath(dir, job, "r2"))
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = os.Stat(ctlPath(dir, job+"x", "r2"))
	require.NoError(t, err, "another job's file is not touched")
}

func TestAllocFreeBuffer(t *testing.T) {
	_, err := AllocBuffer(0)
	require.ErrorIs(t, err, ibv.ErrInvalidArgument)
	b, err := AllocBuffer(5000)
	require.NoError(t, err)
	require.Len(t, b, 5000)
	require.Zero(t, addrOf(b)%uintptr(os.Getpagesize()), "page-aligned")
	for _, v := range b {
		require.Zero(t, v)
	}
	b[4999] = 1
	require.ErrorIs(t, FreeBuffer(b[1:]), ibv.ErrInvalidArgument)
	require.ErrorIs(t, FreeBuffer(make([]byte, 8)), ibv.ErrInvalidArgument)

	e := openEnd(t, testJob(), "a")
	mr, err := e.pd.RegMR(b[100:200], ibv.AccessAll)
	require.NoError(t, err)
	require.ErrorIs(t, FreeBuffer(b), ibv.ErrBusy, "MR over it")
	require.NoError(t, mr.Dereg())
	require.NoError(t, FreeBuffer(b))
	require.ErrorIs(t, FreeBuffer(b), ibv.ErrInvalidArgument, "double free")
}

func TestWriteReadSizes(t *testing.T) {
	a, b := pair(t)
	const max = 16 << 20
	src, smr := allocMR(t, a, max, ibv.AccessAll)
	dst, dmr := allocMR(t, b, max, ibv.AccessAll)
	back, bmr := allocMR(t, a, max, ibv.AccessAll)
	for _, n := range []int{1, 7, 8, 64, 4095, 4096, 65537, 1 << 20, max} {
		copy(src, pattern(n, byte(n)))
		off := 0
		if n < max {
			off = 3 // unaligned target
		}
		wc := do(t, a, a.qp, ibv.SendWR{ID: uint64(n), Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{smr.SGE(0, n)},
			RemoteAddr: dmr.Addr + uint64(off), RKey: dmr.RKey})
		require.Equal(t, ibv.WCSuccess, wc.Status, "write %d", n)
		require.Equal(t, uint64(n), wc.WRID)
		require.Equal(t, ibv.WCRDMAWrite, wc.Opcode)
		require.Equal(t, uint32(n), wc.ByteLen)
		require.Equal(t, src[:n], dst[off:off+n], "write %d landed", n)

		clear(back[:n])
		wc = do(t, a, a.qp, ibv.SendWR{ID: 1, Opcode: ibv.OpRDMARead, SGL: []ibv.SGE{bmr.SGE(0, n)},
			RemoteAddr: dmr.Addr + uint64(off), RKey: dmr.RKey})
		require.Equal(t, ibv.WCSuccess, wc.Status, "read %d", n)
		require.Equal(t, ibv.WCRDMARead, wc.Opcode)
		require.Equal(t, src[:n], back[:n], "read %d", n)
	}
}

func TestScatterGatherAndLocalBuf(t *testing.T) {
	a, b := pair(t)
	src, smr := allocMR(t, a, 4096, ibv.AccessAll)
	dst, dmr := allocMR(t, b, 4096, ibv.AccessAll)
	copy(src, pattern(4096, 1))
	wc := do(t, a, a.qp, ibv.SendWR{Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{smr.SGE(10, 5), smr.SGE(100, 20), smr.SGE(0, 1)},
		RemoteAddr: dmr.Addr + 50, RKey: dmr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, src[10:15], dst[50:55])
	require.Equal(t, src[100:120], dst[55:75])
	require.Equal(t, src[0:1], dst[75:76])

	// implicit ODP: any Go memory as the local buffer
	local := []byte("hello, shared memory")
	wc = do(t, a, a.qp, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: local, RemoteAddr: dmr.Addr + 1000, RKey: dmr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, local, dst[1000:1000+len(local)])
	got := make([]byte, len(local))
	wc = do(t, a, a.qp, ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: got, RemoteAddr: dmr.Addr + 1000, RKey: dmr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, local, got)

	// zero-length write completes without touching anything
	wc = do(t, a, a.qp, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{}, RemoteAddr: 0, RKey: 0})
	require.Equal(t, ibv.WCSuccess, wc.Status)
}

func TestUnsignaledHasNoCompletion(t *testing.T) {
	a, b := pair(t)
	dst, dmr := allocMR(t, b, 64, ibv.AccessAll)
	require.NoError(t, a.qp.PostSend(&ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{9}, RemoteAddr: dmr.Addr, RKey: dmr.RKey}))
	require.Equal(t, 0, a.cq.Len())
	require.Equal(t, byte(9), dst[0])
}

func TestAtomics(t *testing.T) {
	a, b := pair(t)
	tgt, tmr := allocMR(t, b, 64, ibv.AccessAll)
	res, rmr := allocMR(t, a, 64, ibv.AccessAll)
	le := binary.LittleEndian
	le.PutUint64(tgt[0:], 100)
	le.PutUint32(tgt[8:], 7)

	at := func(op ibv.Opcode, off int, cmpAdd, swap uint64) (ibv.WC, uint64) {
		sz := op.AtomicSize()
		clear(res[:8])
		wc := do(t, a, a.qp, ibv.SendWR{Opcode: op, SGL: []ibv.SGE{rmr.SGE(0, sz)}, RemoteAddr: tmr.Addr + uint64(off),
			RKey: tmr.RKey, CompareAdd: cmpAdd, Swap: swap})
		require.Equal(t, ibv.WCSuccess, wc.Status, "%v", op)
		if sz == 4 {
			return wc, uint64(le.Uint32(res))
		}
		return wc, le.Uint64(res)
	}
	wc, old := at(ibv.OpAtomicFetchAdd, 0, 5, 0)
	require.Equal(t, ibv.WCFetchAdd, wc.Opcode)
	require.Equal(t, uint64(100), old)
	require.Equal(t, uint64(105), le.Uint64(tgt))
	wc, old = at(ibv.OpAtomicCmpSwap, 0, 1, 2)
	require.Equal(t, ibv.WCCompSwap, wc.Opcode)
	require.Equal(t, uint64(105), old, "compare fails: unchanged")
	require.Equal(t, uint64(105), le.Uint64(tgt))
	_, old = at(ibv.OpAtomicCmpSwap, 0, 105, 1<<40)
	require.Equal(t, uint64(105), old)
	require.Equal(t, uint64(1<<40), le.Uint64(tgt))
	_, old = at(ibv.OpAtomicSwap64, 0, 3, 0)
	require.Equal(t, uint64(1<<40), old)
	require.Equal(t, uint64(3), le.Uint64(tgt))
	wc, old = at(ibv.OpAtomicFetchAdd32, 8, 0xffffffff, 0) // -1
	require.Equal(t, ibv.WCAtomicExt, wc.Opcode)
	require.Equal(t, uint64(7), old)
	require.Equal(t, uint32(6), le.Uint32(tgt[8:]))
	_, old = at(ibv.OpAtomicSwap32, 8, 11, 0)
	require.Equal(t, uint64(6), old)
	_, old = at(ibv.OpAtomicCmpSwap32, 8, 11, 12)
	require.Equal(t, uint64(11), old)
	require.Equal(t, uint32(12), le.Uint32(tgt[8:]))
	require.Equal(t, uint64(3), le.Uint64(tgt), "neighbour untouched")
}

func TestAccumulate(t *testing.T) {
	a, b := pair(t)
	tgt, tmr := allocMR(t, b, 4096, ibv.AccessAll)
	le := binary.LittleEndian
	for i := 0; i < 8; i++ {
		le.PutUint64(tgt[8*i:], math.Float64bits(float64(i)))
	}
	src := make([]byte, 64)
	for i := 0; i < 8; i++ {
		le.PutUint64(src[8*i:], math.Float64bits(1.5))
	}
	wc := do(t, a, a.qp, ibv.SendWR{Opcode: ibv.OpAccumulate, LocalBuf: src, RemoteAddr: tmr.Addr, RKey: tmr.RKey,
		AccType: ibv.AccFloat64, Scale: 2})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, ibv.WCAtomicExt, wc.Opcode)
	for i := 0; i < 8; i++ {
		require.Equal(t, float64(i)+3, math.Float64frombits(le.Uint64(tgt[8*i:])))
	}
	// int32 from a gathered SGL
	ls, lmr := allocMR(t, a, 64, ibv.AccessAll)
	for i := 0; i < 4; i++ {
		le.PutUint32(ls[4*i:], uint32(i+1))
	}
	wc = do(t, a, a.qp, ibv.SendWR{Opcode: ibv.OpAccumulate, SGL: []ibv.SGE{lmr.SGE(0, 8), lmr.SGE(8, 8)},
		RemoteAddr: tmr.Addr + 1024, RKey: tmr.RKey, AccType: ibv.AccInt32, Scale: -3})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	for i := 0; i < 4; i++ {
		require.Equal(t, int32(-3*(i+1)), int32(le.Uint32(tgt[1024+4*i:])))
	}
}

// expectRemoteError checks that wr fails with st at the origin, that the QP moved to ERROR
// with a QP_FATAL event, and that the next request is flushed.
func expectError(t *testing.T, e *end, qp *ibv.QP, wr ibv.SendWR, st ibv.WCStatus, vendor uint32) {
	t.Helper()
	wc := do(t, e, qp, wr)
	require.Equal(t, st, wc.Status)
	require.Equal(t, vendor, wc.VendorErr)
	require.Equal(t, qp.Num(), wc.QPNum)
	require.Equal(t, ibv.StateError, qp.State())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ev, err := e.ctx.GetAsyncEvent(ctx)
	require.NoError(t, err)
	require.Equal(t, ibv.EventQPFatal, ev.Type)
	require.Equal(t, qp.Num(), ev.QPNum)
	// flushed afterwards, even unsignaled
	require.NoError(t, qp.PostSend(&ibv.SendWR{ID: 77, Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{1}}))
	var w [1]ibv.WC
	require.Equal(t, 1, e.cq.Poll(w[:]))
	require.Equal(t, ibv.WCWRFlushErr, w[0].Status)
	require.Equal(t, uint64(77), w[0].WRID)
}

func TestRemoteAccessViolations(t *testing.T) {
	job := testJob()
	a := openEnd(t, job, "a")
	b := openEnd(t, job, "b")
	tgt, tmr := allocMR(t, b, 4096, ibv.AccessAll)
	_, romr := allocMR(t, b, 4096, ibv.AccessLocalWrite|ibv.AccessRemoteRead)
	_, wmr := allocMR(t, b, 4096, ibv.AccessLocalWrite|ibv.AccessRemoteWrite)
	res := make([]byte, 8)
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8}

	cases := []struct {
		name   string
		wr     ibv.SendWR
		vendor uint32
	}{
		{"bad rkey", ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: data, RemoteAddr: tmr.Addr, RKey: tmr.RKey ^ 0x5500}, VendorRKey},
		{"past end", ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: data, RemoteAddr: tmr.Addr + 4090, RKey: tmr.RKey}, VendorBounds},
		{"before start", ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: data, RemoteAddr: tmr.Addr - 1, RKey: tmr.RKey}, VendorBounds},
		{"huge addr", ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: res, RemoteAddr: math.MaxUint64 - 2, RKey: tmr.RKey}, VendorBounds},
		{"write to read-only MR", ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: data, RemoteAddr: romr.Addr, RKey: romr.RKey}, VendorMRAccess},
		{"atomic on read-only MR", ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: res, RemoteAddr: romr.Addr, RKey: romr.RKey, CompareAdd: 1}, VendorMRAccess},
		{"read of write-only MR", ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: res, RemoteAddr: wmr.Addr, RKey: wmr.RKey}, VendorMRAccess},
		{"accumulate on write-only MR", ibv.SendWR{Opcode: ibv.OpAccumulate, LocalBuf: data, RemoteAddr: wmr.Addr, RKey: wmr.RKey, AccType: ibv.AccInt64, Scale: 1}, VendorMRAccess},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			qa, qb := a.newQP(t), b.newQP(t)
			connectQPs(t, a, qa, b, qb, ibv.AccessAll)
			before := append([]byte(nil), tgt...)
			expectError(t, a, qa, c.wr, ibv.WCRemAccessErr, c.vendor)
			require.Equal(t, before, tgt, "target unchanged")
		})
	}
	t.Run("responder QP without remote write", func(t *testing.T) {
		qa, qb := a.newQP(t), b.newQP(t)
		toInit(t, qa, ibv.AccessAll)
		toInit(t, qb, ibv.AccessRemoteRead)
		toRTS(t, qa, b.addr, qb.Num())
		toRTS(t, qb, a.addr, qa.Num())
		wc := do(t, a, qa, ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: res, RemoteAddr: tmr.Addr, RKey: tmr.RKey})
		require.Equal(t, ibv.WCSuccess, wc.Status, "read allowed")
		before := append([]byte(nil), tgt...)
		expectError(t, a, qa, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: data, RemoteAddr: tmr.Addr, RKey: tmr.RKey}, ibv.WCRemAccessErr, VendorQPAccess)
		require.Equal(t, before, tgt)
	})
	t.Run("responder access flags changed in RTS", func(t *testing.T) {
		qa, qb := a.newQP(t), b.newQP(t)
		connectQPs(t, a, qa, b, qb, ibv.AccessAll)
		wc := do(t, a, qa, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: data, RemoteAddr: tmr.Addr, RKey: tmr.RKey})
		require.Equal(t, ibv.WCSuccess, wc.Status)
		require.NoError(t, qb.Modify(&ibv.QPAttr{AccessFlags: ibv.AccessRemoteRead}, ibv.AttrAccessFlags))
		expectError(t, a, qa, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: res, RemoteAddr: tmr.Addr, RKey: tmr.RKey, CompareAdd: 1}, ibv.WCRemAccessErr, VendorQPAccess)
	})
	t.Run("deregistered MR", func(t *testing.T) {
		qa, qb := a.newQP(t), b.newQP(t)
		connectQPs(t, a, qa, b, qb, ibv.AccessAll)
		buf, err := AllocBuffer(4096)
		require.NoError(t, err)
		mr, err := b.pd.RegMR(buf, ibv.AccessAll)
		require.NoError(t, err)
		wc := do(t, a, qa, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: data, RemoteAddr: mr.Addr, RKey: mr.RKey})
		require.Equal(t, ibv.WCSuccess, wc.Status, "cached now")
		require.NoError(t, mr.Dereg())
		expectError(t, a, qa, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{0xff}, RemoteAddr: mr.Addr, RKey: mr.RKey}, ibv.WCRemAccessErr, VendorRKey)
		require.Equal(t, data, buf[:8], "not written after Dereg")
		require.NoError(t, FreeBuffer(buf))
	})
}

func TestLocalProtectionErrors(t *testing.T) {
	job := testJob()
	a := openEnd(t, job, "a")
	b := openEnd(t, job, "b")
	tgt, tmr := allocMR(t, b, 4096, ibv.AccessAll)
	_, lmr := allocMR(t, a, 4096, ibv.AccessAll)
	_, romr := allocMR(t, a, 4096, ibv.AccessRemoteRead) // no local write
	for name, wr := range map[string]ibv.SendWR{
		"bad lkey":                    {Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{{Addr: lmr.Addr, Length: 8, LKey: lmr.LKey + 0x100}}, RemoteAddr: tmr.Addr, RKey: tmr.RKey},
		"local out of range":          {Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{lmr.SGE(4090, 8)}, RemoteAddr: tmr.Addr, RKey: tmr.RKey},
		"read into no-local-write MR": {Opcode: ibv.OpRDMARead, SGL: []ibv.SGE{romr.SGE(0, 8)}, RemoteAddr: tmr.Addr, RKey: tmr.RKey},
	} {
		t.Run(name, func(t *testing.T) {
			qa, qb := a.newQP(t), b.newQP(t)
			connectQPs(t, a, qa, b, qb, ibv.AccessAll)
			before := append([]byte(nil), tgt...)
			expectError(t, a, qa, wr, ibv.WCLocProtErr, VendorLocal)
			require.Equal(t, before, tgt)
		})
	}
}

func TestHeapMemorySameProcess(t *testing.T) {
	a, b := pair(t)
	heap := make([]byte, 4096)
	mr, err := b.pd.RegMR(heap, ibv.AccessAll)
	require.NoError(t, err)
	defer mr.Dereg()
	wc := do(t, a, a.qp, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte("heap"), RemoteAddr: mr.Addr + 8, RKey: mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, "heap", string(heap[8:12]))
	res := make([]byte, 8)
	wc = do(t, a, a.qp, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: res, RemoteAddr: mr.Addr + 16, RKey: mr.RKey, CompareAdd: 9})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, uint64(9), binary.LittleEndian.Uint64(heap[16:]))
}

func TestLoopback(t *testing.T) {
	e := openEnd(t, testJob(), "self")
	q2 := e.newQP(t)
	connectQPs(t, e, e.qp, e, q2, ibv.AccessAll)
	buf, mr := allocMR(t, e, 4096, ibv.AccessAll)
	copy(buf, "abcdef")
	wc := do(t, e, e.qp, ibv.SendWR{Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{mr.SGE(0, 6)}, RemoteAddr: mr.Addr + 100, RKey: mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, "abcdef", string(buf[100:106]))
}

func TestResponderGoneAndNotConnected(t *testing.T) {
	job := testJob()
	a := openEnd(t, job, "a")
	b := openEnd(t, job, "b")
	_, tmr := allocMR(t, b, 4096, ibv.AccessAll)
	connectShort := func(qa, qb *ibv.QP, bEnd *end) {
		toInit(t, qa, ibv.AccessAll)
		toInit(t, qb, ibv.AccessAll)
		toRTS(t, qa, bEnd.addr, qb.Num(), true)
		toRTS(t, qb, a.addr, qa.Num())
	}
	t.Run("responder QP destroyed", func(t *testing.T) {
		qa, qb := a.newQP(t), b.newQP(t)
		connectShort(qa, qb, b)
		require.NoError(t, qb.Destroy())
		expectError(t, a, qa, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{1}, RemoteAddr: tmr.Addr, RKey: tmr.RKey}, ibv.WCRetryExcErr, VendorResponder)
	})
	t.Run("responder connected elsewhere", func(t *testing.T) {
		qa, qb, qc := a.newQP(t), b.newQP(t), a.newQP(t)
		toInit(t, qa, ibv.AccessAll)
		toInit(t, qb, ibv.AccessAll)
		toRTS(t, qa, b.addr, qb.Num(), true)
		toRTS(t, qb, a.addr, qc.Num())
		expectError(t, a, qa, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{1}, RemoteAddr: tmr.Addr, RKey: tmr.RKey}, ibv.WCRetryExcErr, VendorResponder)
	})
	t.Run("responder reaches RTR later", func(t *testing.T) {
		qa, qb := a.newQP(t), b.newQP(t)
		toInit(t, qa, ibv.AccessAll)
		toInit(t, qb, ibv.AccessAll)
		toRTS(t, qa, b.addr, qb.Num())
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(20 * time.Millisecond)
			toRTS(t, qb, a.addr, qa.Num())
		}()
		wc := do(t, a, qa, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{1}, RemoteAddr: tmr.Addr, RKey: tmr.RKey})
		<-done
		require.Equal(t, ibv.WCSuccess, wc.Status, "request waited for the responder like a retrying requester")
	})
	t.Run("peer device closed", func(t *testing.T) {
		c := openEnd(t, job, "c")
		qa := a.newQP(t)
		connectShort(qa, c.qp, c)
		_, cmr := allocMR(t, c, 64, ibv.AccessAll)
		wc := do(t, a, qa, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{1}, RemoteAddr: cmr.Addr, RKey: cmr.RKey})
		require.Equal(t, ibv.WCSuccess, wc.Status)
		require.NoError(t, c.ctx.Close())
		expectError(t, a, qa, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{1}, RemoteAddr: cmr.Addr, RKey: cmr.RKey}, ibv.WCRetryExcErr, VendorResponder)
	})
}

func TestRTRUnreachable(t *testing.T) {
	e := openEnd(t, testJob(), "a")
	toInit(t, e.qp, ibv.AccessAll)
	err := e.qp.Modify(&ibv.QPAttr{State: ibv.StateRTR, AV: ibv.AHAttr{Addr: "nojob/nobody", PortNum: 1}, DestQPN: 1},
		ibv.AttrState|ibv.AttrAV|ibv.AttrDestQPN|ibv.AttrRQPSN)
	require.ErrorIs(t, err, ibv.ErrUnreachable)
	require.Equal(t, ibv.StateInit, e.qp.State())
	err = e.qp.Modify(&ibv.QPAttr{State: ibv.StateRTR, AV: ibv.AHAttr{Addr: "not an address", PortNum: 1}, DestQPN: 1},
		ibv.AttrState|ibv.AttrAV|ibv.AttrDestQPN|ibv.AttrRQPSN)
	require.ErrorIs(t, err, ibv.ErrInvalidArgument)
}

func TestUnsupported(t *testing.T) {
	a, _ := pair(t)
	_, err := a.pd.CreateQP(ibv.QPInitAttr{Type: ibv.UD, SendCQ: a.cq, RecvCQ: a.cq})
	require.ErrorIs(t, err, ibv.ErrUnsupported)
	for _, op := range []ibv.Opcode{ibv.OpSend, ibv.OpSendImm, ibv.OpRDMAWriteImm} {
		err = a.qp.PostSend(&ibv.SendWR{Opcode: op, LocalBuf: []byte{1}})
		require.ErrorIs(t, err, ibv.ErrUnsupported, "%v", op)
	}
	require.Equal(t, ibv.StateRTS, a.qp.State())
	_, err = a.pd.CreateSRQ(4)
	require.ErrorIs(t, err, ibv.ErrUnsupported)
}

func TestModifyToErrorFlushesReceives(t *testing.T) {
	a, _ := pair(t)
	require.NoError(t, a.qp.PostRecv(&ibv.RecvWR{ID: 5}))
	require.NoError(t, a.qp.PostRecv(&ibv.RecvWR{ID: 6}))
	require.NoError(t, a.qp.Modify(&ibv.QPAttr{State: ibv.StateError}, ibv.AttrState))
	var wc [4]ibv.WC
	require.Equal(t, 2, a.cq.Poll(wc[:]))
	require.Equal(t, uint64(5), wc[0].WRID)
	require.Equal(t, ibv.WCWRFlushErr, wc[0].Status)
	require.Equal(t, ibv.WCRecv, wc[0].Opcode)
	require.Equal(t, uint64(6), wc[1].WRID)
}

// TestSQDQueuesUntilRTS: a request posted in SQD waits, and starts on the return to RTS. Many
// rounds: the drain runs on the progress goroutine, which once raced the state's store (it read
// the QP still in SQD and left the request queued until the next post).
func TestSQDQueuesUntilRTS(t *testing.T) {
	a, b := pair(t)
	dst, dmr := allocMR(t, b, 64, ibv.AccessAll)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for round := range 2000 {
		v := byte(round%250 + 1)
		require.NoError(t, a.qp.Modify(&ibv.QPAttr{State: ibv.StateSQD}, ibv.AttrState))
		ev, err := a.ctx.GetAsyncEvent(ctx)
		require.NoError(t, err)
		require.Equal(t, ibv.EventSQDrained, ev.Type)
		require.NoError(t, a.qp.PostSend(&ibv.SendWR{ID: uint64(round), Flags: ibv.SendSignaled, Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{v}, RemoteAddr: dmr.Addr, RKey: dmr.RKey}))
		require.Equal(t, 0, a.cq.Len(), "not started in SQD")
		require.NotEqual(t, v, dst[0], "round %d: started in SQD", round)
		require.NoError(t, a.qp.Modify(&ibv.QPAttr{State: ibv.StateRTS}, ibv.AttrState))
		require.NoError(t, a.cq.Wait(ctx), "round %d: the request posted in SQD never started", round)
		var wc [1]ibv.WC
		require.Equal(t, 1, a.cq.Poll(wc[:]))
		require.Equal(t, uint64(round), wc[0].WRID)
		require.Equal(t, ibv.WCSuccess, wc[0].Status)
		require.Equal(t, v, dst[0])
	}
}

func TestAlternatePathArms(t *testing.T) {
	a, b := pair(t)
	require.NoError(t, a.qp.Modify(&ibv.QPAttr{AltAV: ibv.AHAttr{Addr: b.addr, PortNum: 1}, AltPortNum: 1, PathMigState: ibv.Rearm},
		ibv.AttrAltPath|ibv.AttrPathMigState))
	require.Eventually(t, func() bool { return a.qp.Query().PathMigState == ibv.Armed }, 5*time.Second, time.Millisecond)
	// manual migration keeps working on the same peer
	require.NoError(t, a.qp.Modify(&ibv.QPAttr{PathMigState: ibv.Migrated}, ibv.AttrPathMigState))
	dst, dmr := allocMR(t, b, 64, ibv.AccessAll)
	wc := do(t, a, a.qp, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{5}, RemoteAddr: dmr.Addr, RKey: dmr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, byte(5), dst[0])
}

func TestConcurrentAtomicsManyQPs(t *testing.T) {
	job := testJob()
	a := openEnd(t, job, "a")
	b := openEnd(t, job, "b")
	tgt, tmr := allocMR(t, b, 64, ibv.AccessAll)
	const workers, per = 4, 2000
	qps := make([]*ibv.QP, workers)
	cqs := make([]*ibv.CQ, workers)
	for i := range qps {
		cq, err := a.ctx.CreateCQ(16)
		require.NoError(t, err)
		cqs[i] = cq
		qp, err := a.pd.CreateQP(ibv.QPInitAttr{Type: ibv.RC, SendCQ: cq, RecvCQ: cq})
		require.NoError(t, err)
		qps[i] = qp
		connectQPs(t, a, qp, b, b.newQP(t), ibv.AccessAll)
	}
	errs := make(chan error, workers)
	for i := range qps {
		go func(qp *ibv.QP) {
			res := make([]byte, 8)
			one := make([]byte, 8)
			binary.LittleEndian.PutUint64(one, math.Float64bits(0.5))
			for k := 0; k < per; k++ {
				if err := qp.PostSend(&ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: res, RemoteAddr: tmr.Addr, RKey: tmr.RKey, CompareAdd: 1}); err != nil {
					errs <- err
					return
				}
				if err := qp.PostSend(&ibv.SendWR{Opcode: ibv.OpAccumulate, LocalBuf: one, RemoteAddr: tmr.Addr + 8, RKey: tmr.RKey, AccType: ibv.AccFloat64, Scale: 1}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(qps[i])
	}
	for range qps {
		require.NoError(t, <-errs)
	}
	le := binary.LittleEndian
	require.Equal(t, uint64(workers*per), le.Uint64(tgt))
	require.Equal(t, float64(workers*per)/2, math.Float64frombits(le.Uint64(tgt[8:])))
	for _, qp := range qps {
		require.Equal(t, ibv.StateRTS, qp.State())
	}
}

func TestFreedPeerBuffersAreUnmapped(t *testing.T) {
	a, b := pair(t)
	dev := provider.DeviceDriver(a.ctx).(*device)
	write := func(mr *ibv.MR) {
		wc := do(t, a, a.qp, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{1}, RemoteAddr: mr.Addr, RKey: mr.RKey})
		require.Equal(t, ibv.WCSuccess, wc.Status)
	}
	keep, err := AllocBuffer(4096)
	require.NoError(t, err)
	kmr, err := b.pd.RegMR(keep, ibv.AccessAll)
	require.NoError(t, err)
	write(kmr)
	for i := 0; i < 20; i++ { // a target that allocates and frees segments over and over
		buf, err := AllocBuffer(1 << 20)
		require.NoError(t, err)
		mr, err := b.pd.RegMR(buf, ibv.AccessAll)
		require.NoError(t, err)
		write(mr)
		require.Equal(t, byte(1), buf[0])
		require.NoError(t, mr.Dereg())
		require.NoError(t, FreeBuffer(buf))
	}
	write(kmr)
	dev.mu.Lock()
	p := dev.peers[b.addr]
	dev.mu.Unlock()
	require.LessOrEqual(t, p.mapped(), 2, "freed buffers are not kept mapped")
	require.GreaterOrEqual(t, p.mapped(), 1, "the live one is")
	require.NoError(t, kmr.Dereg())
	require.NoError(t, FreeBuffer(keep))
}

// TestSweep removes the control files of every job whose owner is gone and keeps the file of a
// live endpoint (goarmci cleanup).
func TestSweep(t *testing.T) {
	dir := t.TempDir()
	live, err := Open(Config{Job: "jlive", Name: "r0", Dir: dir})
	require.NoError(t, err)
	defer live.Close()
	stale := []string{ctlPath(dir, "jdead", "r0"), ctlPath(dir, "jdead", "r1"), ctlPath(dir, "jother", "r3")}
	for _, p := range stale {
		require.NoError(t, os.WriteFile(p, make([]byte, 8192), 0o600)) // no live owner
	}
	other := filepath.Join(dir, "unrelated.ctl")
	require.NoError(t, os.WriteFile(other, nil, 0o600))
	removed, err := Sweep(dir)
	require.NoError(t, err)
	require.ElementsMatch(t, stale, removed)
	for _, p := range stale {
		_, err := os.Stat(p)
		require.ErrorIs(t, err, os.ErrNotExist)
	}
	for _, p := range []string{ctlPath(dir, "jlive", "r0"), other} {
		_, err := os.Stat(p)
		require.NoError(t, err, "%s kept", p)
	}
	_, err = Sweep(filepath.Join(dir, "no-such-dir"))
	require.NoError(t, err, "a directory that does not exist holds nothing to sweep")
}
