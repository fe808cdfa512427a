package udp

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/internal/engine"
	"github.com/goarmci/goarmci/ibv/provider"
)

func open(t testing.TB, nports int, cfg Config) *ibv.Context { return openMTU(t, nports, 0, cfg) }

func openMTU(t testing.TB, nports, mtu int, cfg Config) *ibv.Context {
	t.Helper()
	for i := 0; i < nports; i++ {
		cfg.Ports = append(cfg.Ports, PortConfig{Listen: "127.0.0.1:0", MTU: mtu})
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

func post(t testing.TB, s *side, wr ibv.SendWR) ibv.WC {
	t.Helper()
	wr.Flags |= ibv.SendSignaled
	require.NoError(t, s.qp.PostSend(&wr))
	return waitWC(t, s.cq)
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*11) ^ seed
	}
	return b
}

func udPair(t *testing.T, a, b *ibv.Context) (*side, *side) {
	x, y := newSide(t, a, 1<<17, ibv.UD), newSide(t, b, 1<<17, ibv.UD)
	for _, s := range []*side{x, y} {
		require.NoError(t, s.qp.Modify(&ibv.QPAttr{State: ibv.StateInit, PortNum: 1, QKey: 0x77}, ibv.AttrState|ibv.AttrPort|ibv.AttrQKey))
		require.NoError(t, s.qp.Modify(&ibv.QPAttr{State: ibv.StateRTR}, ibv.AttrState))
		require.NoError(t, s.qp.Modify(&ibv.QPAttr{State: ibv.StateRTS, SQPSN: 3}, ibv.AttrState|ibv.AttrSQPSN))
	}
	return x, y
}

func TestUDDatagramsUpToMTU(t *testing.T) {
	for _, mtu := range []int{4096, 60000} {
		a, b := openMTU(t, 1, mtu, Config{}), openMTU(t, 1, mtu, Config{})
		x, y := udPair(t, a, b)
		pb, _ := b.QueryPort(1)
		pa, _ := a.QueryPort(1)
		require.Equal(t, mtu, pb.MTU)
		ah, err := x.pd.CreateAH(ibv.AHAttr{Addr: pb.Addr, PortNum: 1})
		require.NoError(t, err)
		for _, size := range []int{0, 1, 100, mtu - 1, mtu} {
			require.NoError(t, y.qp.PostRecv(&ibv.RecvWR{ID: uint64(size), SGL: []ibv.SGE{y.mr.SGE(0, mtu)}}))
			msg := pattern(size, byte(size))
			wc := post(t, x, ibv.SendWR{Opcode: ibv.OpSendImm, Imm: uint32(size), LocalBuf: msg, AH: ah, RemoteQPN: y.qp.Num(), QKey: 0x77})
			require.Equal(t, ibv.WCSuccess, wc.Status)
			wc = waitWC(t, y.cq)
			require.Equal(t, ibv.WCSuccess, wc.Status, "size %d", size)
			require.Equal(t, uint64(size), wc.WRID)
			require.Equal(t, uint32(size), wc.ByteLen)
			require.Equal(t, uint32(size), wc.Imm)
			require.Equal(t, x.qp.Num(), wc.SrcQP)
			require.Equal(t, pa.Addr, wc.SrcAddr)
			require.True(t, bytes.Equal(msg, y.mr.Buf()[:size]))
		}
		wc := post(t, x, ibv.SendWR{Opcode: ibv.OpSend, LocalBuf: make([]byte, mtu+1), AH: ah, RemoteQPN: y.qp.Num(), QKey: 0x77})
		require.Equal(t, ibv.WCLocLenErr, wc.Status)
	}
}

func connectRC(t *testing.T, a, b *ibv.Context, mrSize int, alt bool) (*side, *side) {
	x, y := newSide(t, a, mrSize, ibv.RC), newSide(t, b, mrSize, ibv.RC)
	for _, p := range [][2]*side{{x, y}, {y, x}} {
		s, peer := p[0], p[1]
		pa, _ := peer.ctx.QueryPort(1)
		require.NoError(t, s.qp.Modify(&ibv.QPAttr{State: ibv.StateInit, PortNum: 1, AccessFlags: ibv.AccessAll},
			ibv.AttrState|ibv.AttrPort|ibv.AttrAccessFlags))
		attr := &ibv.QPAttr{State: ibv.StateRTR, AV: ibv.AHAttr{Addr: pa.Addr, DLID: pa.LID, PortNum: 1}, DestQPN: peer.qp.Num(), RQPSN: 5}
		mask := ibv.AttrState | ibv.AttrAV | ibv.AttrDestQPN | ibv.AttrRQPSN
		if alt {
			pa2, _ := peer.ctx.QueryPort(2)
			attr.AltAV, attr.AltPortNum, attr.AltTimeout = ibv.AHAttr{Addr: pa2.Addr, PortNum: 2}, 2, 1
			mask |= ibv.AttrAltPath
		}
		require.NoError(t, s.qp.Modify(attr, mask))
	}
	for _, s := range []*side{x, y} {
		require.NoError(t, s.qp.Modify(&ibv.QPAttr{State: ibv.StateRTS, SQPSN: 5, Timeout: 1, RetryCnt: 7},
			ibv.AttrState|ibv.AttrSQPSN|ibv.AttrTimeout|ibv.AttrRetryCnt))
	}
	if alt {
		require.NoError(t, x.qp.Modify(&ibv.QPAttr{PathMigState: ibv.Rearm}, ibv.AttrPathMigState))
		require.Eventually(t, func() bool { return x.qp.Query().PathMigState == ibv.Armed }, 10*time.Second, time.Millisecond)
	}
	return x, y
}

// lossy drops a share of the requests it is given.
type lossy struct {
	engine.Transport
	mu   sync.Mutex
	rng  *rand.Rand
	drop int // percent
}

func (l *lossy) Send(path ibv.AHAttr, hdr, payload []byte) error {
	l.mu.Lock()
	d := l.rng.IntN(100) < l.drop
	l.mu.Unlock()
	if d {
		return nil
	}
	return l.Transport.Send(path, hdr, payload)
}

func TestRCOverLossyUDP(t *testing.T) {
	wrap := func(tr engine.Transport) engine.Transport {
		return &lossy{Transport: tr, rng: rand.New(rand.NewPCG(3, 4)), drop: 3}
	}
	x, y := connectRC(t, open(t, 1, Config{wrapTransport: wrap}), open(t, 1, Config{}), 2<<20, false)
	src := pattern(1<<20, 5)
	wc := post(t, x, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: src, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.True(t, bytes.Equal(src, y.mr.Buf()[:len(src)]))
	got := make([]byte, len(src))
	wc = post(t, x, ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: got, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.True(t, bytes.Equal(src, got))
	res := make([]byte, 8)
	for i := 0; i < 100; i++ {
		wc = post(t, x, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: res, RemoteAddr: y.mr.Addr + 1<<20 + 8, RKey: y.mr.RKey, CompareAdd: 1})
		require.Equal(t, ibv.WCSuccess, wc.Status)
		require.Equal(t, uint64(i), binary.LittleEndian.Uint64(res))
	}
}

func TestRCAPMOverUDP(t *testing.T) {
	a, b := open(t, 2, Config{}), open(t, 2, Config{})
	x, y := connectRC(t, a, b, 1<<20, true)
	require.NoError(t, SetPortDown(b, 1, true))
	src := pattern(100000, 1)
	wc := post(t, x, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: src, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, src, y.mr.Buf()[:len(src)])
	pa2, _ := b.QueryPort(2)
	require.Equal(t, pa2.Addr, x.qp.Query().AV.Addr)
}

func TestProbeFailsOnDownPort(t *testing.T) {
	a, b := open(t, 1, Config{ProbeTimeout: 100 * time.Millisecond}), open(t, 1, Config{})
	pb, _ := b.QueryPort(1)
	require.NoError(t, SetPortDown(b, 1, true))
	tr := (*transport)(provider.DeviceDriver(a).(*driver))
	require.ErrorIs(t, tr.Probe(context.Background(), ibv.AHAttr{Addr: pb.Addr, PortNum: 1}), ErrProbe)
	require.NoError(t, SetPortDown(b, 1, false))
	require.NoError(t, tr.Probe(context.Background(), ibv.AHAttr{Addr: pb.Addr, PortNum: 1}))
}
