package tcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/internal/engine"
	"github.com/goarmci/goarmci/ibv/provider"
)

func open(t testing.TB, nports int, cfg Config) *ibv.Context {
	t.Helper()
	for i := 0; i < nports; i++ {
		cfg.Ports = append(cfg.Ports, PortConfig{Listen: "127.0.0.1:0"})
	}
	if cfg.TimeoutFloor == 0 {
		cfg.TimeoutFloor = 20 * time.Millisecond
	}
	ctx, err := Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ctx.Close() })
	return ctx
}

type side struct {
	ctx *ibv.Context
	pd  *ibv.PD
	cq  *ibv.CQ
	qp  *ibv.QP
	mr  *ibv.MR
}

func newSide(t testing.TB, ctx *ibv.Context, mrSize int, typ ibv.QPType) *side {
	pd, err := ctx.AllocPD()
	require.NoError(t, err)
	cq, err := ctx.CreateCQ(1 << 16)
	require.NoError(t, err)
	qp, err := pd.CreateQP(ibv.QPInitAttr{Type: typ, SendCQ: cq, RecvCQ: cq})
	require.NoError(t, err)
	mr, err := pd.RegMR(make([]byte, mrSize), ibv.AccessAll)
	require.NoError(t, err)
	return &side{ctx: ctx, pd: pd, cq: cq, qp: qp, mr: mr}
}

// connect builds two connected RC QPs; with alt, port 2 is the armed alternate path.
func connect(t testing.TB, a, b *ibv.Context, mrSize int, alt bool, retry uint8) (*side, *side) {
	x, y := newSide(t, a, mrSize, ibv.RC), newSide(t, b, mrSize, ibv.RC)
	for _, p := range [][2]*side{{x, y}, {y, x}} {
		s, peer := p[0], p[1]
		pa, err := peer.ctx.QueryPort(1)
		require.NoError(t, err)
		require.NoError(t, s.qp.Modify(&ibv.QPAttr{State: ibv.StateInit, PortNum: 1, AccessFlags: ibv.AccessAll},
			ibv.AttrState|ibv.AttrPort|ibv.AttrAccessFlags))
		attr := &ibv.QPAttr{State: ibv.StateRTR, AV: ibv.AHAttr{Addr: pa.Addr, DLID: pa.LID, PortNum: 1},
			DestQPN: peer.qp.Num(), RQPSN: 77}
		mask := ibv.AttrState | ibv.AttrAV | ibv.AttrDestQPN | ibv.AttrRQPSN
		if alt {
			pa2, err := peer.ctx.QueryPort(2)
			require.NoError(t, err)
			attr.AltAV, attr.AltPortNum, attr.AltTimeout = ibv.AHAttr{Addr: pa2.Addr, DLID: pa2.LID, PortNum: 2}, 2, 1
			mask |= ibv.AttrAltPath
		}
		require.NoError(t, s.qp.Modify(attr, mask))
	}
	for _, s := range []*side{x, y} {
		require.NoError(t, s.qp.Modify(&ibv.QPAttr{State: ibv.StateRTS, SQPSN: 77, Timeout: 1, RetryCnt: retry},
			ibv.AttrState|ibv.AttrSQPSN|ibv.AttrTimeout|ibv.AttrRetryCnt))
	}
	if alt {
		for _, s := range []*side{x, y} {
			require.NoError(t, s.qp.Modify(&ibv.QPAttr{PathMigState: ibv.Rearm}, ibv.AttrPathMigState))
		}
		for _, s := range []*side{x, y} {
			require.Eventually(t, func() bool { return s.qp.Query().PathMigState == ibv.Armed }, 10*time.Second, time.Millisecond)
		}
	}
	return x, y
}

func waitWC(t testing.TB, cq *ibv.CQ) ibv.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wc [1]ibv.WC
	for {
		if cq.Poll(wc[:]) == 1 {
			return wc[0]
		}
		require.NoError(t, cq.Wait(ctx), "waiting for a completion")
	}
}

func waitEvent(t testing.TB, c *ibv.Context, typ ibv.EventType) ibv.AsyncEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		ev, err := c.GetAsyncEvent(ctx)
		require.NoError(t, err, "waiting for %v", typ)
		if ev.Type == typ {
			return ev
		}
	}
}

func post(t testing.TB, s *side, wr ibv.SendWR) ibv.WC {
	t.Helper()
	wr.Flags |= ibv.SendSignaled
	require.NoError(t, s.qp.PostSend(&wr))
	return waitWC(t, s.cq)
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*13) ^ seed
	}
	return b
}

func TestRCSizes(t *testing.T) {
	const max = 16 << 20
	x, y := connect(t, open(t, 1, Config{}), open(t, 1, Config{}), max, false, 7)
	for size := 1; size <= max; size *= 4 {
		src := pattern(size, byte(size>>3))
		wc := post(t, x, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: src, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
		require.Equal(t, ibv.WCSuccess, wc.Status, "write %d", size)
		require.True(t, bytes.Equal(src, y.mr.Buf()[:size]), "write %d", size)
		got := make([]byte, size)
		wc = post(t, x, ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: got, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
		require.Equal(t, ibv.WCSuccess, wc.Status, "read %d", size)
		require.True(t, bytes.Equal(src, got), "read %d", size)
	}
	// 16 MiB exactly, the other way round
	src := pattern(max, 1)
	copy(y.mr.Buf(), src)
	got := make([]byte, max)
	wc := post(t, y, ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: got, RemoteAddr: x.mr.Addr, RKey: x.mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.True(t, bytes.Equal(x.mr.Buf(), got))
	wc = post(t, y, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: src, RemoteAddr: x.mr.Addr, RKey: x.mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.True(t, bytes.Equal(src, x.mr.Buf()))
}

func TestAtomicsAccumulateSendRecv(t *testing.T) {
	x, y := connect(t, open(t, 1, Config{}), open(t, 1, Config{}), 4<<20, false, 7)
	res := make([]byte, 8)
	for i := 0; i < 100; i++ {
		wc := post(t, x, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: res, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey, CompareAdd: 3})
		require.Equal(t, ibv.WCSuccess, wc.Status)
		require.Equal(t, uint64(3*i), binary.LittleEndian.Uint64(res))
	}
	wc := post(t, x, ibv.SendWR{Opcode: ibv.OpAtomicCmpSwap, LocalBuf: res, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey, CompareAdd: 300, Swap: 1})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, uint64(300), binary.LittleEndian.Uint64(res))
	require.Equal(t, uint64(1), binary.LittleEndian.Uint64(y.mr.Buf()))

	const ne = 100000 // complex128: 1.6 MB, many packets
	src := make([]byte, ne*16)
	for i := 0; i < ne; i++ {
		binary.LittleEndian.PutUint64(src[i*16:], math.Float64bits(float64(i)))
		binary.LittleEndian.PutUint64(src[i*16+8:], math.Float64bits(1))
	}
	for k := 0; k < 3; k++ {
		wc = post(t, x, ibv.SendWR{Opcode: ibv.OpAccumulate, LocalBuf: src, RemoteAddr: y.mr.Addr + 4096, RKey: y.mr.RKey,
			AccType: ibv.AccComplex128, Scale: complex(0, 1)})
		require.Equal(t, ibv.WCSuccess, wc.Status)
	}
	tb := y.mr.Buf()[4096:]
	for i := 0; i < ne; i += 997 {
		re := math.Float64frombits(binary.LittleEndian.Uint64(tb[i*16:]))
		im := math.Float64frombits(binary.LittleEndian.Uint64(tb[i*16+8:]))
		require.Equal(t, complex(-3, 3*float64(i)), complex(re, im), "element %d", i) // 3·i·(i+1i)
	}

	msg := pattern(100000, 7)
	require.NoError(t, y.qp.PostRecv(&ibv.RecvWR{ID: 4, SGL: []ibv.SGE{y.mr.SGE(0, 200000)}}))
	wc = post(t, x, ibv.SendWR{ID: 5, Opcode: ibv.OpSend, LocalBuf: msg})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	wc = waitWC(t, y.cq)
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, uint32(len(msg)), wc.ByteLen)
	require.Equal(t, msg, y.mr.Buf()[:len(msg)])
}

func TestAccessViolation(t *testing.T) {
	x, y := connect(t, open(t, 1, Config{}), open(t, 1, Config{}), 1<<16, false, 7)
	before := append([]byte(nil), y.mr.Buf()...)
	require.NoError(t, x.qp.PostSend(&ibv.SendWR{ID: 1, Flags: ibv.SendSignaled, Opcode: ibv.OpRDMAWrite, LocalBuf: pattern(10000, 1),
		RemoteAddr: y.mr.Addr + y.mr.Length - 9999, RKey: y.mr.RKey}))
	require.NoError(t, x.qp.PostSend(&ibv.SendWR{ID: 2, Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{1}, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey}))
	wc := waitWC(t, x.cq)
	require.Equal(t, ibv.WCRemAccessErr, wc.Status)
	require.Equal(t, uint64(1), wc.WRID)
	wc = waitWC(t, x.cq)
	require.Equal(t, ibv.WCWRFlushErr, wc.Status)
	require.Equal(t, uint64(2), wc.WRID)
	require.Equal(t, ibv.StateError, x.qp.State())
	waitEvent(t, x.ctx, ibv.EventQPFatal)
	require.True(t, bytes.Equal(before, y.mr.Buf()))
}

// dupTransport sends every request twice: the responder must apply each once.
type dupTransport struct{ engine.Transport }

func (d dupTransport) Send(path ibv.AHAttr, hdr, payload []byte) error {
	_ = d.Transport.Send(path, hdr, payload)
	return d.Transport.Send(path, hdr, payload)
}

func TestDuplicatedRequests(t *testing.T) {
	wrap := func(tr engine.Transport) engine.Transport { return dupTransport{tr} }
	x, y := connect(t, open(t, 1, Config{wrapTransport: wrap}), open(t, 1, Config{}), 1<<20, false, 7)
	res := make([]byte, 8)
	for i := 0; i < 50; i++ {
		wc := post(t, x, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: res, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey, CompareAdd: 1})
		require.Equal(t, ibv.WCSuccess, wc.Status)
		require.Equal(t, uint64(i), binary.LittleEndian.Uint64(res))
	}
	one := make([]byte, 8*10000)
	for i := 0; i < 10000; i++ {
		binary.LittleEndian.PutUint64(one[i*8:], 1)
	}
	for i := 0; i < 5; i++ {
		wc := post(t, x, ibv.SendWR{Opcode: ibv.OpAccumulate, LocalBuf: one, RemoteAddr: y.mr.Addr + 8, RKey: y.mr.RKey, AccType: ibv.AccInt64, Scale: 1})
		require.Equal(t, ibv.WCSuccess, wc.Status)
	}
	for i := 0; i < 10000; i++ {
		require.Equal(t, uint64(5), binary.LittleEndian.Uint64(y.mr.Buf()[8+i*8:]), "element %d", i)
	}
	require.Equal(t, uint64(50), binary.LittleEndian.Uint64(y.mr.Buf()))
}

func TestAPMOnBrokenPort(t *testing.T) {
	a, b := open(t, 2, Config{}), open(t, 2, Config{})
	x, y := connect(t, a, b, 1<<20, true, 2)
	wc := post(t, x, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte("before"), RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.NoError(t, SetPortDown(b, 1, true))
	pa, err := b.QueryPort(1)
	require.NoError(t, err)
	require.Equal(t, ibv.PortDown, pa.State)
	src := pattern(300000, 3)
	wc = post(t, x, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: src, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, src, y.mr.Buf()[:len(src)])
	ev := waitEvent(t, a, ibv.EventPathMig)
	require.Equal(t, x.qp.Num(), ev.QPNum)
	pa2, _ := b.QueryPort(2)
	require.Equal(t, pa2.Addr, x.qp.Query().AV.Addr)
	got := make([]byte, len(src))
	wc = post(t, x, ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: got, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, src, got)
	// no alternate left: the next fault of the (new) primary fails the QP
	require.NoError(t, SetPortDown(b, 2, true))
	wc = post(t, x, ibv.SendWR{ID: 9, Opcode: ibv.OpRDMAWrite, LocalBuf: []byte("x"), RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
	require.Equal(t, ibv.WCRetryExcErr, wc.Status)
	require.Equal(t, ibv.StateError, x.qp.State())
}

func TestUDOverTCP(t *testing.T) {
	a, b := open(t, 1, Config{}), open(t, 1, Config{})
	x, y := newSide(t, a, 8192, ibv.UD), newSide(t, b, 8192, ibv.UD)
	for _, s := range []*side{x, y} {
		require.NoError(t, s.qp.Modify(&ibv.QPAttr{State: ibv.StateInit, PortNum: 1, QKey: 5}, ibv.AttrState|ibv.AttrPort|ibv.AttrQKey))
		require.NoError(t, s.qp.Modify(&ibv.QPAttr{State: ibv.StateRTR}, ibv.AttrState))
		require.NoError(t, s.qp.Modify(&ibv.QPAttr{State: ibv.StateRTS}, ibv.AttrState|ibv.AttrSQPSN))
	}
	pb, _ := b.QueryPort(1)
	pa, _ := a.QueryPort(1)
	ah, err := x.pd.CreateAH(ibv.AHAttr{Addr: pb.Addr, PortNum: 1})
	require.NoError(t, err)
	require.NoError(t, y.qp.PostRecv(&ibv.RecvWR{ID: 3, SGL: []ibv.SGE{y.mr.SGE(0, 4096)}}))
	msg := pattern(4096, 9)
	wc := post(t, x, ibv.SendWR{Opcode: ibv.OpSend, LocalBuf: msg, AH: ah, RemoteQPN: y.qp.Num(), QKey: 5})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	wc = waitWC(t, y.cq)
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, pa.Addr, wc.SrcAddr)
	require.Equal(t, x.qp.Num(), wc.SrcQP)
	require.Equal(t, msg, y.mr.Buf()[:4096])
}

func TestCloseStopsGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	func() {
		a, err := Open(Config{Ports: []PortConfig{{Listen: "127.0.0.1:0"}, {Listen: "127.0.0.1:0"}}})
		require.NoError(t, err)
		b, err := Open(Config{Ports: []PortConfig{{Listen: "127.0.0.1:0"}}})
		require.NoError(t, err)
		x, y := connect(t, a, b, 4096, false, 7)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // a blocked waiter is released by Close
			defer wg.Done()
			_, err := a.GetAsyncEvent(context.Background())
			require.ErrorIs(t, err, ibv.ErrClosed)
		}()
		wc := post(t, x, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte("z"), RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
		require.Equal(t, ibv.WCSuccess, wc.Status)
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
		wg.Wait()
	}()
	ok := false
	for i := 0; i < 2000 && !ok; i++ {
		ok = runtime.NumGoroutine() <= base
		time.Sleep(5 * time.Millisecond)
	}
	if !ok {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines left: %d > %d\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
	}
}

func TestOpenRejectsBadConfig(t *testing.T) {
	_, err := Open(Config{})
	require.ErrorIs(t, err, ibv.ErrInvalidArgument)
	_, err = Open(Config{Ports: []PortConfig{{Listen: "127.0.0.1:0", MTU: 100}}})
	require.ErrorIs(t, err, ibv.ErrInvalidArgument)
	_, err = Open(Config{Ports: []PortConfig{{Listen: "not an address"}}})
	require.Error(t, err)
}

// TestBrokenStreamsRecover breaks every stream repeatedly while large writes, reads and atomics
// run: the engine retransmits from the first unacknowledged PSN on new streams, every request
// completes once and the data is right.
func TestBrokenStreamsRecover(t *testing.T) {
	a, b := open(t, 1, Config{}), open(t, 1, Config{})
	x, y := connect(t, a, b, 8<<20, false, 7)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var breaks int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(40 * time.Millisecond):
			}
			d := provider.DeviceDriver(a).(*driver)
			if i%2 == 1 {
				d = provider.DeviceDriver(b).(*driver)
			}
			breaks += d.breakStreams()
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
		t.Logf("streams broken: %d", breaks)
	}()
	res := make([]byte, 8)
	for round := 0; round < 6; round++ {
		src := pattern(4<<20, byte(round))
		wc := post(t, x, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: src, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
		require.Equal(t, ibv.WCSuccess, wc.Status)
		require.True(t, bytes.Equal(src, y.mr.Buf()[:len(src)]), "round %d write", round)
		got := make([]byte, len(src))
		wc = post(t, x, ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: got, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
		require.Equal(t, ibv.WCSuccess, wc.Status)
		require.True(t, bytes.Equal(src, got), "round %d read", round)
		for i := 0; i < 20; i++ {
			wc = post(t, x, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: res, RemoteAddr: y.mr.Addr + 6<<20, RKey: y.mr.RKey, CompareAdd: 1})
			require.Equal(t, ibv.WCSuccess, wc.Status)
			require.Equal(t, uint64(round*20+i), binary.LittleEndian.Uint64(res))
		}
	}
}
