package engine

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/goarmci/goarmci/ibv/wire"
)

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func post(t testing.TB, s *side, wr ibv.SendWR) ibv.WC {
	t.Helper()
	wr.Flags |= ibv.SendSignaled
	require.NoError(t, s.qp.PostSend(&wr))
	return waitWC(t, s.cq)
}

func TestRCWriteReadSizes(t *testing.T) {
	n := newMemNet()
	x, y := connectRC(t, n.open(t, 1, Config{}), n.open(t, 1, Config{}), pairOpts{mrSize: 1 << 20})
	for _, size := range []int{1, 7, 4095, 4096, 4097, 65536 + 3, 1 << 20} {
		src := pattern(size, byte(size))
		wc := post(t, x, ibv.SendWR{ID: 1, Opcode: ibv.OpRDMAWrite, LocalBuf: src, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
		require.Equal(t, ibv.WCSuccess, wc.Status, "write %d", size)
		require.Equal(t, ibv.WCRDMAWrite, wc.Opcode)
		require.Equal(t, uint32(size), wc.ByteLen)
		require.True(t, bytes.Equal(src, y.mr.Buf()[:size]), "write %d placed", size)

		got := make([]byte, size)
		wc = post(t, x, ibv.SendWR{ID: 2, Opcode: ibv.OpRDMARead, LocalBuf: got, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
		require.Equal(t, ibv.WCSuccess, wc.Status, "read %d", size)
		require.Equal(t, uint64(2), wc.WRID)
		require.True(t, bytes.Equal(src, got), "read %d", size)
	}
}

func TestRCSGLAndUnsignaled(t *testing.T) {
	n := newMemNet()
	x, y := connectRC(t, n.open(t, 1, Config{}), n.open(t, 1, Config{}), pairOpts{})
	// gather from three SGEs of a registered buffer across packet boundaries
	copy(x.mr.Buf(), pattern(20000, 3))
	sgl := []ibv.SGE{x.mr.SGE(0, 5000), x.mr.SGE(5000, 3), x.mr.SGE(5003, 14997)}
	for i := 0; i < 10; i++ { // unsignaled: no completion
		require.NoError(t, x.qp.PostSend(&ibv.SendWR{ID: 100, Opcode: ibv.OpRDMAWrite, SGL: sgl, RemoteAddr: y.mr.Addr + 8, RKey: y.mr.RKey}))
	}
	wc := post(t, x, ibv.SendWR{ID: 7, Opcode: ibv.OpRDMAWrite, SGL: sgl, RemoteAddr: y.mr.Addr + 8, RKey: y.mr.RKey})
	require.Equal(t, uint64(7), wc.WRID, "unsignaled requests must not complete")
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, x.mr.Buf()[:20000], y.mr.Buf()[8:20008])
	// scatter a read into two SGEs
	rs := []ibv.SGE{x.mr.SGE(100000, 10), x.mr.SGE(200000, 9990)}
	wc = post(t, x, ibv.SendWR{ID: 8, Opcode: ibv.OpRDMARead, SGL: rs, RemoteAddr: y.mr.Addr + 8, RKey: y.mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, y.mr.Buf()[8:18], x.mr.Buf()[100000:100010])
	require.Equal(t, y.mr.Buf()[18:10008], x.mr.Buf()[200000:209990])
	require.Zero(t, x.cq.Len())
}

func TestRCAtomicsAndAccumulate(t *testing.T) {
	n := newMemNet()
	x, y := connectRC(t, n.open(t, 1, Config{}), n.open(t, 1, Config{}), pairOpts{})
	tb := y.mr.Buf()
	binary.LittleEndian.PutUint64(tb[0:], 40)
	res := make([]byte, 8)
	wc := post(t, x, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: res, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey, CompareAdd: 2})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, ibv.WCFetchAdd, wc.Opcode)
	require.Equal(t, uint64(40), binary.LittleEndian.Uint64(res))
	require.Equal(t, uint64(42), binary.LittleEndian.Uint64(tb))

	wc = post(t, x, ibv.SendWR{Opcode: ibv.OpAtomicCmpSwap, LocalBuf: res, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey, CompareAdd: 42, Swap: 7})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, uint64(42), binary.LittleEndian.Uint64(res))
	require.Equal(t, uint64(7), binary.LittleEndian.Uint64(tb))
	wc = post(t, x, ibv.SendWR{Opcode: ibv.OpAtomicCmpSwap, LocalBuf: res, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey, CompareAdd: 1, Swap: 9})
	require.Equal(t, uint64(7), binary.LittleEndian.Uint64(res))
	require.Equal(t, uint64(7), binary.LittleEndian.Uint64(tb), "failed compare leaves target")

	res4 := make([]byte, 4)
	binary.LittleEndian.PutUint32(tb[8:], 5)
	post(t, x, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd32, LocalBuf: res4, RemoteAddr: y.mr.Addr + 8, RKey: y.mr.RKey, CompareAdd: 3})
	require.Equal(t, uint32(5), binary.LittleEndian.Uint32(res4))
	require.Equal(t, uint32(8), binary.LittleEndian.Uint32(tb[8:]))
	post(t, x, ibv.SendWR{Opcode: ibv.OpAtomicSwap32, LocalBuf: res4, RemoteAddr: y.mr.Addr + 8, RKey: y.mr.RKey, CompareAdd: 77})
	require.Equal(t, uint32(8), binary.LittleEndian.Uint32(res4))
	require.Equal(t, uint32(77), binary.LittleEndian.Uint32(tb[8:]))
	post(t, x, ibv.SendWR{Opcode: ibv.OpAtomicCmpSwap32, LocalBuf: res4, RemoteAddr: y.mr.Addr + 8, RKey: y.mr.RKey, CompareAdd: 77, Swap: 1})
	require.Equal(t, uint32(1), binary.LittleEndian.Uint32(tb[8:]))
	post(t, x, ibv.SendWR{Opcode: ibv.OpAtomicSwap64, LocalBuf: res, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey, CompareAdd: 1 << 40})
	require.Equal(t, uint64(7), binary.LittleEndian.Uint64(res))
	require.Equal(t, uint64(1<<40), binary.LittleEndian.Uint64(tb))

	// accumulate 3000 float64 (several packets) with scale 2, twice
	const ne = 3000
	src := make([]byte, ne*8)
	for i := 0; i < ne; i++ {
		binary.LittleEndian.PutUint64(src[i*8:], math.Float64bits(float64(i)))
	}
	for k := 0; k < 2; k++ {
		wc = post(t, x, ibv.SendWR{Opcode: ibv.OpAccumulate, LocalBuf: src, RemoteAddr: y.mr.Addr + 4096, RKey: y.mr.RKey,
			AccType: ibv.AccFloat64, Scale: 2})
		require.Equal(t, ibv.WCSuccess, wc.Status)
	}
	for i := 0; i < ne; i++ {
		require.Equal(t, float64(4*i), math.Float64frombits(binary.LittleEndian.Uint64(tb[4096+i*8:])), "element %d", i)
	}
}

func TestRCSendRecv(t *testing.T) {
	n := newMemNet()
	x, y := connectRC(t, n.open(t, 1, Config{}), n.open(t, 1, Config{}), pairOpts{})
	// RNR: the send waits until a receive is posted
	msg := pattern(10000, 9)
	require.NoError(t, x.qp.PostSend(&ibv.SendWR{ID: 5, Opcode: ibv.OpSendImm, Imm: 0xabc, LocalBuf: msg, Flags: ibv.SendSignaled}))
	require.NoError(t, y.qp.PostRecv(&ibv.RecvWR{ID: 9, SGL: []ibv.SGE{y.mr.SGE(0, 4000), y.mr.SGE(8000, 8000)}}))
	wc := waitWC(t, y.cq)
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, ibv.WCRecv, wc.Opcode)
	require.Equal(t, uint64(9), wc.WRID)
	require.Equal(t, uint32(len(msg)), wc.ByteLen)
	require.True(t, wc.HasImm)
	require.Equal(t, uint32(0xabc), wc.Imm)
	require.Equal(t, msg[:4000], y.mr.Buf()[:4000])
	require.Equal(t, msg[4000:], y.mr.Buf()[8000:14000])
	wc = waitWC(t, x.cq)
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, ibv.WCSend, wc.Opcode)

	// write with immediate consumes a receive
	require.NoError(t, y.qp.PostRecv(&ibv.RecvWR{ID: 10}))
	wc = post(t, x, ibv.SendWR{Opcode: ibv.OpRDMAWriteImm, Imm: 5, LocalBuf: []byte("hi"), RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	wc = waitWC(t, y.cq)
	require.Equal(t, ibv.WCRecvRDMAImm, wc.Opcode)
	require.Equal(t, uint32(5), wc.Imm)
	require.Equal(t, "hi", string(y.mr.Buf()[:2]))

	// a receive too small: LOC_LEN_ERR at the receiver, REM_INV_REQ at the sender, sender QP in ERROR
	require.NoError(t, y.qp.PostRecv(&ibv.RecvWR{ID: 11, SGL: []ibv.SGE{y.mr.SGE(0, 10)}}))
	wc = post(t, x, ibv.SendWR{ID: 12, Opcode: ibv.OpSend, LocalBuf: make([]byte, 11)})
	require.Equal(t, ibv.WCRemInvReqErr, wc.Status)
	wc = waitWC(t, y.cq)
	require.Equal(t, ibv.WCLocLenErr, wc.Status)
	require.Equal(t, uint64(11), wc.WRID)
	require.Equal(t, ibv.StateError, x.qp.State())
}

func TestRNRRetryExceeded(t *testing.T) {
	n := newMemNet()
	x, _ := connectRC(t, n.open(t, 1, Config{}), n.open(t, 1, Config{}), pairOpts{})
	require.NoError(t, x.qp.Modify(&ibv.QPAttr{State: ibv.StateSQD}, ibv.AttrState))
	waitEvent(t, x.ctx, ibv.EventSQDrained)
	require.NoError(t, x.qp.Modify(&ibv.QPAttr{State: ibv.StateRTS}, ibv.AttrState))
	provider.QPDriver(x.qp).(*QP).sqMu.Lock()
	provider.QPDriver(x.qp).(*QP).sq.a.rnrRetry = 2
	provider.QPDriver(x.qp).(*QP).sqMu.Unlock()
	wc := post(t, x, ibv.SendWR{ID: 1, Opcode: ibv.OpSend, LocalBuf: []byte("x")})
	require.Equal(t, ibv.WCRNRRetryExcErr, wc.Status)
	require.Equal(t, ibv.StateError, x.qp.State())
}

func TestRemoteAccessViolations(t *testing.T) {
	cases := []struct {
		name string
		o    pairOpts
		wr   func(y *side) ibv.SendWR
	}{
		{"bad rkey", pairOpts{}, func(y *side) ibv.SendWR {
			return ibv.SendWR{Opcode: ibv.OpRDMAWrite, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey ^ 0x5a}
		}},
		{"out of bounds", pairOpts{}, func(y *side) ibv.SendWR {
			return ibv.SendWR{Opcode: ibv.OpRDMAWrite, RemoteAddr: y.mr.Addr + y.mr.Length - 100, RKey: y.mr.RKey}
		}},
		{"MR without remote write", pairOpts{mrAccess: ibv.AccessLocalWrite | ibv.AccessRemoteRead}, func(y *side) ibv.SendWR {
			return ibv.SendWR{Opcode: ibv.OpRDMAWrite, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey}
		}},
		{"QP without remote write", pairOpts{access: ibv.AccessRemoteRead}, func(y *side) ibv.SendWR {
			return ibv.SendWR{Opcode: ibv.OpRDMAWrite, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey}
		}},
		{"atomic without remote atomic", pairOpts{mrAccess: ibv.AccessLocalWrite | ibv.AccessRemoteWrite}, func(y *side) ibv.SendWR {
			return ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: make([]byte, 8), RemoteAddr: y.mr.Addr, RKey: y.mr.RKey, CompareAdd: 1}
		}},
		{"accumulate without remote atomic", pairOpts{mrAccess: ibv.AccessLocalWrite | ibv.AccessRemoteWrite}, func(y *side) ibv.SendWR {
			return ibv.SendWR{Opcode: ibv.OpAccumulate, AccType: ibv.AccInt64, Scale: 1, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey}
		}},
		{"read without remote read", pairOpts{mrAccess: ibv.AccessLocalWrite | ibv.AccessRemoteWrite}, func(y *side) ibv.SendWR {
			return ibv.SendWR{Opcode: ibv.OpRDMARead, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := newMemNet()
			c.o.mrSize = 64 << 10
			x, y := connectRC(t, n.open(t, 1, Config{}), n.open(t, 1, Config{}), c.o)
			before := append([]byte(nil), y.mr.Buf()...)
			wr := c.wr(y)
			if wr.LocalBuf == nil {
				wr.LocalBuf = pattern(20000, 1) // several packets
			}
			wr.ID = 1
			wr.Flags = ibv.SendSignaled
			require.NoError(t, x.qp.PostSend(&wr))
			later := ibv.SendWR{ID: 2, Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{1}, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey}
			require.NoError(t, x.qp.PostSend(&later)) // unsignaled: still flushed
			wc := waitWC(t, x.cq)
			require.Equal(t, uint64(1), wc.WRID)
			require.Equal(t, ibv.WCRemAccessErr, wc.Status)
			wc = waitWC(t, x.cq)
			require.Equal(t, uint64(2), wc.WRID)
			require.Equal(t, ibv.WCWRFlushErr, wc.Status)
			require.Equal(t, ibv.StateError, x.qp.State())
			waitEvent(t, x.ctx, ibv.EventQPFatal)
			require.True(t, bytes.Equal(before, y.mr.Buf()), "target changed")
			// posting in ERROR flushes
			wc = post(t, x, ibv.SendWR{ID: 3, Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{1}, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
			require.Equal(t, ibv.WCWRFlushErr, wc.Status)
			require.Equal(t, uint64(3), wc.WRID)
		})
	}
}

func TestLocalProtectionError(t *testing.T) {
	n := newMemNet()
	x, y := connectRC(t, n.open(t, 1, Config{}), n.open(t, 1, Config{}), pairOpts{})
	wc := post(t, x, ibv.SendWR{ID: 4, Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{{Addr: x.mr.Addr, Length: 8, LKey: x.mr.LKey + 1}},
		RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
	require.Equal(t, ibv.WCLocProtErr, wc.Status)
	require.Equal(t, ibv.StateError, x.qp.State())
}

// TestDuplicateSuppression duplicates every packet in both directions and drops some: each
// fetch-add and accumulate must be applied exactly once, and replayed results must be right.
func TestDuplicateSuppression(t *testing.T) {
	n := newMemNet()
	x, y := connectRC(t, n.open(t, 1, Config{}), n.open(t, 1, Config{}), pairOpts{})
	rng := rand.New(rand.NewPCG(1, 2))
	var dups, drops atomic.Int64
	n.setFault(func(pkt []byte, from, to string) (bool, bool) {
		r := rng.IntN(100) // only the network's sender goroutines call this; guarded below
		if r < 5 {
			drops.Add(1)
			return true, false
		}
		dups.Add(1)
		return false, true
	})
	_ = rng
	var mu = make(chan struct{}, 1)
	n.setFault(func(pkt []byte, from, to string) (bool, bool) {
		mu <- struct{}{}
		r := rng.IntN(100)
		<-mu
		if r < 5 {
			drops.Add(1)
			return true, false
		}
		dups.Add(1)
		return false, true
	})
	res := make([]byte, 8)
	const ops = 200
	for i := 0; i < ops; i++ {
		wc := post(t, x, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: res, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey, CompareAdd: 1})
		require.Equal(t, ibv.WCSuccess, wc.Status)
		require.Equal(t, uint64(i), binary.LittleEndian.Uint64(res), "fetch-add %d result", i)
	}
	require.Equal(t, uint64(ops), binary.LittleEndian.Uint64(y.mr.Buf()))
	one := make([]byte, 8*1000)
	for i := 0; i < 1000; i++ {
		binary.LittleEndian.PutUint64(one[i*8:], 1)
	}
	for i := 0; i < 20; i++ {
		require.NoError(t, x.qp.PostSend(&ibv.SendWR{Opcode: ibv.OpAccumulate, LocalBuf: one, RemoteAddr: y.mr.Addr + 8192, RKey: y.mr.RKey, AccType: ibv.AccInt64, Scale: 1}))
	}
	big := pattern(300000, 4)
	wc := post(t, x, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: big, RemoteAddr: y.mr.Addr + 100000, RKey: y.mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	for i := 0; i < 1000; i++ {
		require.Equal(t, uint64(20), binary.LittleEndian.Uint64(y.mr.Buf()[8192+i*8:]), "accumulate element %d", i)
	}
	require.Equal(t, big, y.mr.Buf()[100000:400000])
	got := make([]byte, len(big))
	wc = post(t, x, ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: got, RemoteAddr: y.mr.Addr + 100000, RKey: y.mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, big, got)
	assert.Positive(t, dups.Load())
	assert.Positive(t, drops.Load())
}

// TestDirectDuplicateAtomic replays an atomic request packet by hand: the responder must answer
// with the recorded value and not execute it again.
func TestDirectDuplicateAtomic(t *testing.T) {
	n := newMemNet()
	x, y := connectRC(t, n.open(t, 1, Config{}), n.open(t, 1, Config{}), pairOpts{})
	var captured []byte
	var capMu = make(chan struct{}, 1)
	n.setFault(func(pkt []byte, from, to string) (bool, bool) {
		var p wire.Packet
		if wire.Decode(pkt, &p) == nil && p.Opcode == wire.OpAtomic {
			capMu <- struct{}{}
			captured = append([]byte(nil), pkt...)
			<-capMu
		}
		return false, false
	})
	res := make([]byte, 8)
	post(t, x, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: res, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey, CompareAdd: 5})
	require.Equal(t, uint64(5), binary.LittleEndian.Uint64(y.mr.Buf()))
	capMu <- struct{}{}
	pkt := captured
	<-capMu
	require.NotNil(t, pkt)
	var replies [][]byte
	link := &recLink{out: &replies}
	provider.DeviceDriver(y.ctx).(*Device).Engine().Deliver(nil, pkt, link)
	require.Equal(t, uint64(5), binary.LittleEndian.Uint64(y.mr.Buf()), "duplicate atomic executed again")
	require.Len(t, replies, 1)
	var p wire.Packet
	require.NoError(t, wire.Decode(replies[0], &p))
	require.Equal(t, wire.OpAtomicAck, p.Opcode)
	require.Equal(t, uint64(0), p.AtomicAck, "replayed original value")
}

type recLink struct{ out *[][]byte }

func (l *recLink) Reply(hdr, payload []byte) error {
	*l.out = append(*l.out, append(append([]byte(nil), hdr...), payload...))
	return nil
}
func (l *recLink) RemoteAddr() string { return "rec" }

func TestRetryExhaustion(t *testing.T) {
	n := newMemNet()
	a, b := n.open(t, 1, Config{}), n.open(t, 1, Config{})
	x, y := connectRC(t, a, b, pairOpts{retry: 2})
	pa, _ := b.QueryPort(1)
	n.setDown(pa.Addr, true)
	require.NoError(t, x.qp.PostSend(&ibv.SendWR{ID: 1, Opcode: ibv.OpRDMAWrite, LocalBuf: []byte("abc"), RemoteAddr: y.mr.Addr, RKey: y.mr.RKey, Flags: ibv.SendSignaled}))
	require.NoError(t, x.qp.PostSend(&ibv.SendWR{ID: 2, Opcode: ibv.OpRDMAWrite, LocalBuf: []byte("abc"), RemoteAddr: y.mr.Addr, RKey: y.mr.RKey}))
	wc := waitWC(t, x.cq)
	require.Equal(t, ibv.WCRetryExcErr, wc.Status)
	require.Equal(t, uint64(1), wc.WRID)
	wc = waitWC(t, x.cq)
	require.Equal(t, ibv.WCWRFlushErr, wc.Status)
	require.Equal(t, ibv.StateError, x.qp.State())
	waitEvent(t, a, ibv.EventQPFatal)
	require.Zero(t, y.mr.Buf()[0])
}

func TestAPMMigration(t *testing.T) {
	n := newMemNet()
	a, b := n.open(t, 2, Config{}), n.open(t, 2, Config{})
	x, y := connectRC(t, a, b, pairOpts{alt: true, retry: 2})
	wc := post(t, x, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte("one"), RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	pa, _ := b.QueryPort(1)
	n.setDown(pa.Addr, true) // pull the primary cable
	src := pattern(100000, 5)
	wc = post(t, x, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: src, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, src, y.mr.Buf()[:len(src)])
	ev := waitEvent(t, a, ibv.EventPathMig)
	require.Equal(t, x.qp.Num(), ev.QPNum)
	attr := x.qp.Query()
	require.Equal(t, ibv.Migrated, attr.PathMigState)
	pa2, _ := b.QueryPort(2)
	require.Equal(t, pa2.Addr, attr.AV.Addr)
	require.Equal(t, ibv.StateRTS, x.qp.State())
	// the migrated path keeps working for reads (responses follow the request's link)
	got := make([]byte, len(src))
	wc = post(t, x, ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: got, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, src, got)

	// the responder migrated at the first request from its alternate path (IBA §17.2.8): one
	// EventPathMig on its side too, and its own requests take the peer's port 2 from now on
	ev = waitEvent(t, b, ibv.EventPathMig)
	require.Equal(t, y.qp.Num(), ev.QPNum)
	yattr := y.qp.Query()
	require.Equal(t, ibv.Migrated, yattr.PathMigState)
	pa2a, _ := a.QueryPort(2)
	require.Equal(t, pa2a.Addr, yattr.AV.Addr)
	wc = post(t, y, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte("back"), RemoteAddr: x.mr.Addr, RKey: x.mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, []byte("back"), x.mr.Buf()[:4])
	require.Equal(t, pa2.Addr, x.qp.Query().AV.Addr, "the requester stays on the peer's port 2")
}

func TestRearmFailsOnDeadAlternate(t *testing.T) {
	n := newMemNet()
	a, b := n.open(t, 2, Config{}), n.open(t, 2, Config{})
	x, _ := connectRC(t, a, b, pairOpts{})
	pa2, _ := b.QueryPort(2)
	n.setDown(pa2.Addr, true)
	require.NoError(t, x.qp.Modify(&ibv.QPAttr{AltAV: ibv.AHAttr{Addr: pa2.Addr, PortNum: 2}, AltPortNum: 2, PathMigState: ibv.Rearm},
		ibv.AttrAltPath|ibv.AttrPathMigState))
	waitEvent(t, a, ibv.EventPathMigErr)
	require.Equal(t, ibv.Rearm, x.qp.Query().PathMigState)
}

func TestManualMigration(t *testing.T) {
	n := newMemNet()
	a, b := n.open(t, 2, Config{}), n.open(t, 2, Config{})
	x, y := connectRC(t, a, b, pairOpts{alt: true})
	require.NoError(t, x.qp.Modify(&ibv.QPAttr{PathMigState: ibv.Migrated}, ibv.AttrPathMigState))
	pa, _ := b.QueryPort(1)
	n.setDown(pa.Addr, true) // the old primary is gone; traffic must already use port 2
	wc := post(t, x, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte("m"), RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, byte('m'), y.mr.Buf()[0])
}

func TestModifyErrorFlushes(t *testing.T) {
	n := newMemNet()
	a, b := n.open(t, 1, Config{}), n.open(t, 1, Config{})
	x, y := connectRC(t, a, b, pairOpts{})
	pa, _ := b.QueryPort(1)
	n.setDown(pa.Addr, true)
	require.NoError(t, x.qp.PostSend(&ibv.SendWR{ID: 1, Opcode: ibv.OpRDMAWrite, LocalBuf: []byte("abc"), RemoteAddr: y.mr.Addr, RKey: y.mr.RKey}))
	require.NoError(t, x.qp.PostRecv(&ibv.RecvWR{ID: 2}))
	require.NoError(t, x.qp.Modify(&ibv.QPAttr{State: ibv.StateError}, ibv.AttrState))
	got := map[uint64]ibv.WCStatus{}
	for i := 0; i < 2; i++ {
		wc := waitWC(t, x.cq)
		got[wc.WRID] = wc.Status
	}
	require.Equal(t, map[uint64]ibv.WCStatus{1: ibv.WCWRFlushErr, 2: ibv.WCWRFlushErr}, got)
}

func TestUD(t *testing.T) {
	n := newMemNet()
	a, b := n.open(t, 1, Config{}), n.open(t, 1, Config{})
	o := pairOpts{mrSize: 8192, mrAccess: ibv.AccessAll}
	x, y := newSide(t, a, o, ibv.UD), newSide(t, b, o, ibv.UD)
	for _, s := range []*side{x, y} {
		require.NoError(t, s.qp.Modify(&ibv.QPAttr{State: ibv.StateInit, PortNum: 1, QKey: 0x1234}, ibv.AttrState|ibv.AttrPort|ibv.AttrQKey))
		require.NoError(t, s.qp.Modify(&ibv.QPAttr{State: ibv.StateRTR}, ibv.AttrState))
		require.NoError(t, s.qp.Modify(&ibv.QPAttr{State: ibv.StateRTS, SQPSN: 1}, ibv.AttrState|ibv.AttrSQPSN))
	}
	pb, _ := b.QueryPort(1)
	pa, _ := a.QueryPort(1)
	ah, err := x.pd.CreateAH(ibv.AHAttr{Addr: pb.Addr, PortNum: 1})
	require.NoError(t, err)
	// a marker QP on the same port: its receive proves that earlier datagrams were processed
	z := newSide(t, b, o, ibv.UD)
	require.NoError(t, z.qp.Modify(&ibv.QPAttr{State: ibv.StateInit, PortNum: 1, QKey: 0x1234}, ibv.AttrState|ibv.AttrPort|ibv.AttrQKey))
	require.NoError(t, z.qp.Modify(&ibv.QPAttr{State: ibv.StateRTR}, ibv.AttrState))
	require.NoError(t, z.qp.PostRecv(&ibv.RecvWR{ID: 50, SGL: []ibv.SGE{z.mr.SGE(0, 64)}}))
	// no receive posted: dropped silently
	wc := post(t, x, ibv.SendWR{Opcode: ibv.OpSend, LocalBuf: []byte("lost"), AH: ah, RemoteQPN: y.qp.Num(), QKey: 0x1234})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	post(t, x, ibv.SendWR{Opcode: ibv.OpSend, LocalBuf: []byte("mark"), AH: ah, RemoteQPN: z.qp.Num(), QKey: 0x1234})
	require.Equal(t, uint64(50), waitWC(t, z.cq).WRID)
	require.NoError(t, y.qp.PostRecv(&ibv.RecvWR{ID: 1, SGL: []ibv.SGE{y.mr.SGE(0, 4096)}}))
	// wrong Q_Key: dropped
	post(t, x, ibv.SendWR{Opcode: ibv.OpSend, LocalBuf: []byte("bad"), AH: ah, RemoteQPN: y.qp.Num(), QKey: 0x9999})
	msg := pattern(4096, 2)
	wc = post(t, x, ibv.SendWR{Opcode: ibv.OpSendImm, Imm: 77, LocalBuf: msg, AH: ah, RemoteQPN: y.qp.Num(), QKey: 0x80000000})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	wc = waitWC(t, y.cq)
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, uint64(1), wc.WRID)
	require.Equal(t, uint32(4096), wc.ByteLen)
	require.Equal(t, x.qp.Num(), wc.SrcQP)
	require.Equal(t, pa.Addr, wc.SrcAddr)
	require.Equal(t, uint32(77), wc.Imm)
	require.Equal(t, msg, y.mr.Buf()[:4096])
	// larger than the MTU: local length error
	wc = post(t, x, ibv.SendWR{Opcode: ibv.OpSend, LocalBuf: make([]byte, 4097), AH: ah, RemoteQPN: y.qp.Num(), QKey: 0x1234})
	require.Equal(t, ibv.WCLocLenErr, wc.Status)
	require.Zero(t, y.cq.Len())
}

func TestSharedReceiveQueue(t *testing.T) {
	e := newSRQEnds(t, 1<<16)
	var xs []*ibv.QP
	for i := 0; i < 2; i++ {
		x, y := e.connect(t)
		require.ErrorIs(t, y.PostRecv(&ibv.RecvWR{}), ibv.ErrInvalidArgument)
		xs = append(xs, x)
	}
	srq, mr, cqa, cqb := e.srq, e.mr, e.cqa, e.cqb
	// both senders start before any receive is posted (RNR), then share the SRQ's receives
	for i, x := range xs {
		require.NoError(t, x.PostSend(&ibv.SendWR{ID: uint64(i), Opcode: ibv.OpSend, Flags: ibv.SendSignaled, LocalBuf: []byte{byte('a' + i)}}))
	}
	require.NoError(t, srq.PostRecv(&ibv.RecvWR{ID: 100, SGL: []ibv.SGE{mr.SGE(0, 16)}}))
	require.NoError(t, srq.PostRecv(&ibv.RecvWR{ID: 101, SGL: []ibv.SGE{mr.SGE(16, 16)}}))
	ids := map[uint64]bool{}
	got := map[byte]bool{}
	for i := 0; i < 2; i++ {
		wc := waitWC(t, cqb)
		require.Equal(t, ibv.WCSuccess, wc.Status)
		ids[wc.WRID] = true
		off := (wc.WRID - 100) * 16
		got[mr.Buf()[off]] = true
	}
	require.Equal(t, map[uint64]bool{100: true, 101: true}, ids)
	require.Equal(t, map[byte]bool{'a': true, 'b': true}, got)
	for i := 0; i < 2; i++ {
		require.Equal(t, ibv.WCSuccess, waitWC(t, cqa).Status)
	}
}

// srqEnds are two devices on a memory network, b's side with an SRQ of 8 entries, a CQ and a
// registered buffer of the given size; connect makes RC queue pairs between them.
type srqEnds struct {
	pa, pb   ibv.PortAttr
	pda, pdb *ibv.PD
	cqa, cqb *ibv.CQ
	srq      *ibv.SRQ
	mr       *ibv.MR
	b        *ibv.Context
}

func newSRQEnds(t *testing.T, buf int) *srqEnds {
	n := newMemNet()
	a, b := n.open(t, 1, Config{}), n.open(t, 1, Config{})
	e := &srqEnds{b: b}
	e.pb, _ = b.QueryPort(1)
	e.pa, _ = a.QueryPort(1)
	var err error
	e.pdb, err = b.AllocPD()
	require.NoError(t, err)
	e.srq, err = e.pdb.CreateSRQ(8)
	require.NoError(t, err)
	e.cqb, err = b.CreateCQ(64)
	require.NoError(t, err)
	e.mr, err = e.pdb.RegMR(make([]byte, buf), ibv.AccessAll)
	require.NoError(t, err)
	e.pda, _ = a.AllocPD()
	e.cqa, _ = a.CreateCQ(64)
	return e
}

// connect creates an RC queue pair x at a and y at b (receiving from the SRQ) and connects them.
func (e *srqEnds) connect(t *testing.T) (x, y *ibv.QP) {
	x, err := e.pda.CreateQP(ibv.QPInitAttr{Type: ibv.RC, SendCQ: e.cqa, RecvCQ: e.cqa})
	require.NoError(t, err)
	y, err = e.pdb.CreateQP(ibv.QPInitAttr{Type: ibv.RC, SendCQ: e.cqb, RecvCQ: e.cqb, SRQ: e.srq})
	require.NoError(t, err)
	for _, c := range []struct {
		q, peer *ibv.QP
		addr    string
	}{{x, y, e.pb.Addr}, {y, x, e.pa.Addr}} {
		require.NoError(t, c.q.Modify(&ibv.QPAttr{State: ibv.StateInit, PortNum: 1, AccessFlags: ibv.AccessAll}, ibv.AttrState|ibv.AttrPort|ibv.AttrAccessFlags))
		require.NoError(t, c.q.Modify(&ibv.QPAttr{State: ibv.StateRTR, AV: ibv.AHAttr{Addr: c.addr, PortNum: 1}, DestQPN: c.peer.Num(), RQPSN: 1},
			ibv.AttrState|ibv.AttrAV|ibv.AttrDestQPN|ibv.AttrRQPSN))
		require.NoError(t, c.q.Modify(&ibv.QPAttr{State: ibv.StateRTS, SQPSN: 1, Timeout: 1, RetryCnt: 3}, ibv.AttrState|ibv.AttrSQPSN|ibv.AttrTimeout|ibv.AttrRetryCnt))
	}
	return x, y
}

// TestForeignAndMalformedPackets: a request from a QP that is not the connected peer, a request
// for an unknown QP and garbage are dropped without reply and without touching memory.
func TestForeignAndMalformedPackets(t *testing.T) {
	n := newMemNet()
	x, y := connectRC(t, n.open(t, 1, Config{}), n.open(t, 1, Config{}), pairOpts{mrSize: 4096})
	e := provider.DeviceDriver(y.ctx).(*Device).Engine()
	var replies [][]byte
	link := &recLink{out: &replies}
	ePSN := provider.QPDriver(y.qp).(*QP).rsp.ePSN
	mk := func(src, dst uint32) []byte {
		b, err := wire.Append(nil, &wire.Header{Opcode: wire.OpWrite, Flags: wire.FlagOnly | wire.FlagAckReq, DestQPN: dst,
			PSN: ePSN, SrcQPN: src, RETH: wire.RETH{VAddr: y.mr.Addr, RKey: y.mr.RKey, DMALen: 3}}, []byte("bad"))
		require.NoError(t, err)
		return b
	}
	e.Deliver(nil, mk(x.qp.Num()+100, y.qp.Num()), link)
	e.Deliver(nil, mk(x.qp.Num(), y.qp.Num()+100), link)
	for _, g := range [][]byte{nil, {1}, {1, 2, 3}, make([]byte, 100), mk(x.qp.Num(), y.qp.Num())[:30]} {
		e.Deliver(nil, g, link)
	}
	require.Empty(t, replies)
	require.Zero(t, y.mr.Buf()[0])
	// the genuine packet is applied and ACKed
	e.Deliver(nil, mk(x.qp.Num(), y.qp.Num()), link)
	require.Equal(t, "bad", string(y.mr.Buf()[:3]))
	require.Len(t, replies, 1)
}

// TestPathFaultRetransmitsAtOnce: with an ACK timeout of hours, a lost request is only
// retransmitted because the transport reports the path fault.
func TestPathFaultRetransmitsAtOnce(t *testing.T) {
	n := newMemNet()
	a, b := n.open(t, 1, Config{}), n.open(t, 1, Config{})
	x, y := connectRC(t, a, b, pairOpts{timeout: 31})
	var dropped atomic.Bool
	n.setFault(func(pkt []byte, from, to string) (bool, bool) {
		return dropped.CompareAndSwap(false, true), false // lose the first packet only
	})
	require.NoError(t, x.qp.PostSend(&ibv.SendWR{ID: 1, Flags: ibv.SendSignaled, Opcode: ibv.OpRDMAWrite, LocalBuf: []byte("pf"),
		RemoteAddr: y.mr.Addr, RKey: y.mr.RKey}))
	require.True(t, dropped.Load())
	require.Zero(t, x.cq.Len())
	pb, _ := b.QueryPort(1)
	provider.DeviceDriver(a).(*Device).Engine().PathFault(1, "not-this-path")
	provider.DeviceDriver(a).(*Device).Engine().PathFault(1, pb.Addr)
	wc := waitWC(t, x.cq)
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, "pf", string(y.mr.Buf()[:2]))
}

// reconnect moves an RC QP through RESET→INIT→RTR→RTS towards peer with fresh PSNs.
func reconnect(t *testing.T, s, peer *side, sq, rq uint32) {
	pa, err := peer.ctx.QueryPort(1)
	require.NoError(t, err)
	require.NoError(t, s.qp.Modify(&ibv.QPAttr{State: ibv.StateReset}, ibv.AttrState))
	require.NoError(t, s.qp.Modify(&ibv.QPAttr{State: ibv.StateInit, PortNum: 1, AccessFlags: ibv.AccessAll}, ibv.AttrState|ibv.AttrPort|ibv.AttrAccessFlags))
	require.NoError(t, s.qp.Modify(&ibv.QPAttr{State: ibv.StateRTR, AV: ibv.AHAttr{Addr: pa.Addr, PortNum: 1}, DestQPN: peer.qp.Num(), RQPSN: rq},
		ibv.AttrState|ibv.AttrAV|ibv.AttrDestQPN|ibv.AttrRQPSN))
	require.NoError(t, s.qp.Modify(&ibv.QPAttr{State: ibv.StateRTS, SQPSN: sq, Timeout: 1, RetryCnt: 3}, ibv.AttrState|ibv.AttrSQPSN|ibv.AttrTimeout|ibv.AttrRetryCnt))
}

// TestRecycleAfterError: a QP in ERROR is reset and reconnected (hybridft's QP recycling, seed
// 003 Fig. 8) and works again, with PSNs that wrap around 2^24.
func TestRecycleAfterError(t *testing.T) {
	n := newMemNet()
	x, y := connectRC(t, n.open(t, 1, Config{}), n.open(t, 1, Config{}), pairOpts{})
	wc := post(t, x, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte("q"), RemoteAddr: y.mr.Addr, RKey: y.mr.RKey + 1})
	require.Equal(t, ibv.WCRemAccessErr, wc.Status)
	require.Equal(t, ibv.StateError, x.qp.State())
	reconnect(t, x, y, wire.PSNMask-5, wire.PSNMask-300)
	reconnect(t, y, x, wire.PSNMask-300, wire.PSNMask-5)
	src := pattern(50000, 8) // 13 packets across the PSN wrap
	for i := 0; i < 3; i++ {
		wc = post(t, x, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: src, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
		require.Equal(t, ibv.WCSuccess, wc.Status)
		got := make([]byte, len(src))
		wc = post(t, y, ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: got, RemoteAddr: x.mr.Addr, RKey: x.mr.RKey})
		require.Equal(t, ibv.WCSuccess, wc.Status)
		require.Equal(t, x.mr.Buf()[:len(src)], got)
	}
	require.Equal(t, src, y.mr.Buf()[:len(src)])
}

// TestSQDDrain: requests in flight when the QP moves to SQD still complete (retransmitted after
// loss), new ones wait for RTS, and EventSQDrained follows the last completion.
func TestSQDDrain(t *testing.T) {
	n := newMemNet()
	a, b := n.open(t, 1, Config{}), n.open(t, 1, Config{})
	x, y := connectRC(t, a, b, pairOpts{retry: 7})
	pb, _ := b.QueryPort(1)
	n.setDown(pb.Addr, true)
	require.NoError(t, x.qp.PostSend(&ibv.SendWR{ID: 1, Flags: ibv.SendSignaled, Opcode: ibv.OpRDMAWrite, LocalBuf: []byte("d1"), RemoteAddr: y.mr.Addr, RKey: y.mr.RKey}))
	require.NoError(t, x.qp.Modify(&ibv.QPAttr{State: ibv.StateSQD}, ibv.AttrState))
	require.NoError(t, x.qp.PostSend(&ibv.SendWR{ID: 2, Flags: ibv.SendSignaled, Opcode: ibv.OpRDMAWrite, LocalBuf: []byte("d2"), RemoteAddr: y.mr.Addr + 8, RKey: y.mr.RKey}))
	n.setDown(pb.Addr, false)
	wc := waitWC(t, x.cq)
	require.Equal(t, uint64(1), wc.WRID)
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, "d1", string(y.mr.Buf()[:2]))
	waitEvent(t, a, ibv.EventSQDrained)
	require.Zero(t, x.cq.Len())
	require.Zero(t, y.mr.Buf()[8], "a request posted in SQD must not start")
	require.NoError(t, x.qp.Modify(&ibv.QPAttr{State: ibv.StateRTS}, ibv.AttrState))
	wc = waitWC(t, x.cq)
	require.Equal(t, uint64(2), wc.WRID)
	require.Equal(t, "d2", string(y.mr.Buf()[8:10]))
}

// On a reliable transport (Config.Reliable) the ACK timer is a liveness timer, and only the
// peer's responses on the primary path keep it from expiring: the peer's own requests, which
// keep arriving while every request of this side is lost (its stream dead, the peer's alive),
// must not. x's write is lost with every retry while y writes to x every millisecond: x's write
// must end with the retries exhausted (no alternate path), not wait for y to stop.
func TestReliableTimerIgnoresPeerRequests(t *testing.T) {
	n := newMemNet()
	cfg := Config{Reliable: true}
	a, b := n.open(t, 1, cfg), n.open(t, 1, cfg)
	x, y := connectRC(t, a, b, pairOpts{retry: 1})
	pa, _ := a.QueryPort(1)
	pb, _ := b.QueryPort(1)
	n.setFault(func(pkt []byte, from, to string) (bool, bool) {
		var p wire.Packet
		return from == pa.Addr && to == pb.Addr && wire.Decode(pkt, &p) == nil && p.Opcode.IsRequest(), false
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // y's requests to x: delivered, and answered
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if y.qp.PostSend(&ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{byte(i)}, RemoteAddr: x.mr.Addr, RKey: x.mr.RKey}) != nil {
				return
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	require.NoError(t, x.qp.PostSend(&ibv.SendWR{ID: 1, Flags: ibv.SendSignaled, Opcode: ibv.OpRDMAWrite, LocalBuf: []byte("lost"),
		RemoteAddr: y.mr.Addr, RKey: y.mr.RKey}))
	wc := waitWC(t, x.cq)
	require.Equal(t, ibv.WCRetryExcErr, wc.Status)
	require.Equal(t, uint64(1), wc.WRID)
	require.Zero(t, y.mr.Buf()[0])
}
