package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
)

// memNet is an in-process lossy packet network for engine tests: each port is an address with a
// queue drained by one goroutine; a fault function may drop or duplicate any packet.
type memNet struct {
	mu    sync.Mutex
	ports map[string]*memPort
	down  map[string]bool
	fault func(pkt []byte, from, to string) (drop, dup bool)
	seq   int
	// wrap, when set, wraps the transport of the devices opened next (a corking one)
	wrap func(*memTransport) Transport
}

type memPort struct {
	net  *memNet
	addr string
	dev  *Device
	ch   chan memFrame
	done chan struct{}
	wg   sync.WaitGroup
}

type memFrame struct {
	pkt  []byte
	from string
}

type memLink struct {
	net      *memNet
	from, to string
}

func (l memLink) Reply(hdr, payload []byte) error { return l.net.send(l.from, l.to, hdr, payload) }
func (l memLink) RemoteAddr() string              { return l.to }

var errDown = errors.New("memnet: port down")

func (n *memNet) send(from, to string, hdr, payload []byte) error {
	n.mu.Lock()
	p := n.ports[to]
	down := n.down[from] || n.down[to]
	fault := n.fault
	n.mu.Unlock()
	if p == nil || down {
		return errDown
	}
	pkt := make([]byte, 0, len(hdr)+len(payload))
	pkt = append(append(pkt, hdr...), payload...)
	RaceRelease()
	copies := 1
	if fault != nil {
		drop, dup := fault(pkt, from, to)
		if drop {
			return nil
		}
		if dup {
			copies = 2
		}
	}
	for i := 0; i < copies; i++ {
		select {
		case p.ch <- memFrame{pkt: pkt, from: from}:
		case <-p.done:
			return errDown
		}
	}
	return nil
}

func (n *memNet) setDown(addr string, down bool) {
	n.mu.Lock()
	n.down[addr] = down
	n.mu.Unlock()
}

func (n *memNet) setFault(f func(pkt []byte, from, to string) (drop, dup bool)) {
	n.mu.Lock()
	n.fault = f
	n.mu.Unlock()
}

type memTransport struct {
	net   *memNet
	addrs []string // by local port-1
}

func (t *memTransport) Send(path ibv.AHAttr, hdr, payload []byte) error {
	if path.PortNum == 0 || int(path.PortNum) > len(t.addrs) {
		return fmt.Errorf("memnet: no port %d", path.PortNum)
	}
	return t.net.send(t.addrs[path.PortNum-1], path.Addr, hdr, payload)
}

func (t *memTransport) Probe(_ context.Context, path ibv.AHAttr) error {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	if path.PortNum == 0 || int(path.PortNum) > len(t.addrs) {
		return errDown
	}
	if t.net.ports[path.Addr] == nil || t.net.down[path.Addr] || t.net.down[t.addrs[path.PortNum-1]] {
		return errDown
	}
	return nil
}

// open creates a device with nports ports on the network.
func (n *memNet) open(t testing.TB, nports int, ec Config) *ibv.Context {
	n.mu.Lock()
	tr := &memTransport{net: n}
	var ports []ibv.PortAttr
	var mps []*memPort
	for i := 0; i < nports; i++ {
		n.seq++
		addr := fmt.Sprintf("mem%d", n.seq)
		tr.addrs = append(tr.addrs, addr)
		ports = append(ports, ibv.PortAttr{Num: uint8(i + 1), State: ibv.PortActive, LID: uint16(n.seq), MTU: 4096, Addr: addr})
		mp := &memPort{net: n, addr: addr, ch: make(chan memFrame, 1<<14), done: make(chan struct{})}
		mps = append(mps, mp)
		n.ports[addr] = mp
	}
	wrap := n.wrap
	n.mu.Unlock()
	ec.Transport = tr
	if wrap != nil {
		ec.Transport = wrap(tr)
	}
	dev := NewDevice(DeviceConfig{Name: "mem", Provider: "mem", Ports: ports, Engine: ec, Close: func() error {
		n.mu.Lock()
		for _, mp := range mps {
			delete(n.ports, mp.addr)
			close(mp.done)
		}
		n.mu.Unlock()
		for _, mp := range mps {
			mp.wg.Wait()
		}
		return nil
	}})
	for _, mp := range mps {
		mp.dev = dev
		mp.wg.Add(1)
		go mp.run()
	}
	ctx := provider.NewContext(dev)
	t.Cleanup(func() { _ = ctx.Close() })
	return ctx
}

func (p *memPort) run() {
	defer p.wg.Done()
	var b Batch
	e := p.dev.Engine()
	for {
		select {
		case f := <-p.ch:
			e.Deliver(&b, f.pkt, memLink{net: p.net, from: p.addr, to: f.from})
			if len(p.ch) == 0 {
				e.EndBatch(&b)
			}
		case <-p.done:
			return
		}
	}
}

func newMemNet() *memNet {
	return &memNet{ports: map[string]*memPort{}, down: map[string]bool{}}
}

// side is one end of an RC connection in a test.
type side struct {
	ctx *ibv.Context
	pd  *ibv.PD
	cq  *ibv.CQ
	qp  *ibv.QP
	mr  *ibv.MR
}

type pairOpts struct {
	mrSize   int
	access   ibv.Access // QP access flags (default AccessAll)
	mrAccess ibv.Access // MR access (default AccessAll)
	timeout  uint8
	retry    uint8
	alt      bool // set an alternate path on port 2 and arm it
}

func newSide(t testing.TB, ctx *ibv.Context, o pairOpts, typ ibv.QPType) *side {
	pd, err := ctx.AllocPD()
	require.NoError(t, err)
	cq, err := ctx.CreateCQ(1 << 16)
	require.NoError(t, err)
	qp, err := pd.CreateQP(ibv.QPInitAttr{Type: typ, SendCQ: cq, RecvCQ: cq})
	require.NoError(t, err)
	mr, err := pd.RegMR(make([]byte, o.mrSize), o.mrAccess)
	require.NoError(t, err)
	return &side{ctx: ctx, pd: pd, cq: cq, qp: qp, mr: mr}
}

// connectRC builds two connected RC QPs on devices a and b.
func connectRC(t testing.TB, a, b *ibv.Context, o pairOpts) (*side, *side) {
	if o.mrSize == 0 {
		o.mrSize = 1 << 20
	}
	if o.access == 0 {
		o.access = ibv.AccessAll
	}
	if o.mrAccess == 0 {
		o.mrAccess = ibv.AccessAll
	}
	if o.timeout == 0 {
		o.timeout = 1 // → the engine's floor
	}
	if o.retry == 0 {
		o.retry = 3
	}
	x, y := newSide(t, a, o, ibv.RC), newSide(t, b, o, ibv.RC)
	connect := func(s, peer *side) {
		pa, err := peer.ctx.QueryPort(1)
		require.NoError(t, err)
		require.NoError(t, s.qp.Modify(&ibv.QPAttr{State: ibv.StateInit, PortNum: 1, AccessFlags: o.access},
			ibv.AttrState|ibv.AttrPort|ibv.AttrAccessFlags))
		attr := &ibv.QPAttr{State: ibv.StateRTR, AV: ibv.AHAttr{Addr: pa.Addr, DLID: pa.LID, PortNum: 1},
			DestQPN: peer.qp.Num(), RQPSN: 1000 + peer.qp.Num()}
		mask := ibv.AttrState | ibv.AttrAV | ibv.AttrDestQPN | ibv.AttrRQPSN
		if o.alt {
			pa2, err := peer.ctx.QueryPort(2)
			require.NoError(t, err)
			attr.AltAV = ibv.AHAttr{Addr: pa2.Addr, DLID: pa2.LID, PortNum: 2}
			attr.AltPortNum = 2
			attr.AltTimeout = o.timeout
			mask |= ibv.AttrAltPath
		}
		require.NoError(t, s.qp.Modify(attr, mask))
	}
	toRTS := func(s *side) {
		require.NoError(t, s.qp.Modify(&ibv.QPAttr{State: ibv.StateRTS, SQPSN: 1000 + s.qp.Num(), Timeout: o.timeout,
			RetryCnt: o.retry}, ibv.AttrState|ibv.AttrSQPSN|ibv.AttrTimeout|ibv.AttrRetryCnt))
	}
	connect(x, y)
	connect(y, x)
	toRTS(x)
	toRTS(y)
	if o.alt {
		for _, s := range []*side{x, y} {
			require.NoError(t, s.qp.Modify(&ibv.QPAttr{PathMigState: ibv.Rearm}, ibv.AttrPathMigState))
		}
		for _, s := range []*side{x, y} {
			require.Eventually(t, func() bool { return s.qp.Query().PathMigState == ibv.Armed }, 10*time.Second, time.Millisecond)
		}
	}
	return x, y
}

// waitWC waits for the next completion on cq.
func waitWC(t testing.TB, cq *ibv.CQ) ibv.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wc [1]ibv.WC
	for {
		if cq.Poll(wc[:]) == 1 {
			return wc[0]
		}
		require.NoError(t, cq.Wait(ctx), "waiting for a completion")
	}
}

// waitEvent waits for an async event of type typ.
func waitEvent(t testing.TB, c *ibv.Context, typ ibv.EventType) ibv.AsyncEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		ev, err := c.GetAsyncEvent(ctx)
		require.NoError(t, err, "waiting for %v", typ)
		if ev.Type == typ {
			return ev
		}
	}
}
