package hybridft

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/hybridft/udcm"
	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/ibv/provider/tcp"
	"github.com/goarmci/goarmci/ibv/provider/udp"
	"github.com/goarmci/goarmci/internal/testutil"
)

// odNode is a pretend process with an OnDemand over rails tcp ports (one endpoint per rail) that
// records what accept hands it.
type odNode struct {
	*node
	id  uint32
	d   *OnDemand
	eps []*Endpoint

	mu       sync.Mutex
	accepted map[uint32][][]*Conn             // every accept call, by peer
	onAccept func(peer uint32, conns []*Conn) // tests: also called by accept
}

const odJob = 42

func newODNode(t *testing.T, id uint32, rails int) *odNode {
	t.Helper()
	return newODNodeJob(t, id, odJob, rails)
}

func newODNodeJob(t *testing.T, id, job uint32, rails int) *odNode {
	t.Helper()
	return attachOD(t, newNode(t, testOptions(), rails, 1<<16), id, job, rails)
}

func newODNodeWith(t *testing.T, o Options, id uint32, rails, size int) *odNode {
	t.Helper()
	return attachOD(t, newNode(t, o, rails, size), id, odJob, rails)
}

// attachOD opens an OnDemand on nd's manager with one endpoint per rail.
func attachOD(t *testing.T, nd *node, id, job uint32, rails int) *odNode {
	t.Helper()
	n := &odNode{node: nd, id: id, accepted: map[uint32][][]*Conn{}}
	for r := 1; r <= rails; r++ {
		n.eps = append(n.eps, n.ep.WithPort(uint8(r)))
	}
	var err error
	n.d, err = n.m.OnDemand(n.eps, id, job, func(peer uint32, conns []*Conn) {
		n.mu.Lock()
		n.accepted[peer] = append(n.accepted[peer], conns)
		hook := n.onAccept
		n.mu.Unlock()
		if hook != nil {
			hook(peer, conns)
		}
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, n.d.Close())
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, calls := range n.accepted {
			for _, cs := range calls {
				closeConns(cs) // the consumer owns established connections
			}
		}
	})
	return n
}

// setDrop installs a filter of incoming CM messages (nil: none).
func (n *odNode) setDrop(f func(*udcm.Msg) bool) {
	n.d.mu.Lock()
	n.d.drop = f
	n.d.mu.Unlock()
}

// acceptCalls returns the accept calls for peer.
func (n *odNode) acceptCalls(peer uint32) [][]*Conn {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([][]*Conn(nil), n.accepted[peer]...)
}

// peerState is the OnDemand's state of peer: role and (pending or established) connections.
func (n *odNode) peerState(peer uint32) (odRole, []*Conn) {
	n.d.mu.Lock()
	defer n.d.mu.Unlock()
	p, l := n.d.core.peers[peer], n.d.links[peer]
	if p == nil || l == nil {
		return 0, nil
	}
	return p.role, append([]*Conn(nil), l.conns...)
}

// qps is the number of RC queue pairs alive on the node's device.
func (n *odNode) qps() int { return len(*n.ep.ft.conns.Load()) }

func (n *odNode) dial(t *testing.T, to *odNode) []*Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := n.d.Dial(ctx, to.id, to.d.Addr())
	require.NoError(t, err)
	return cs
}

// requirePaired checks that a's and b's connections are the two ends of one queue pair per
// rail, and that each side's accept was called exactly once with exactly these connections.
func requirePaired(t *testing.T, a, b *odNode, ca, cb []*Conn, rails int) {
	t.Helper()
	require.Len(t, ca, rails)
	require.Len(t, cb, rails)
	for i := range ca {
		require.Equal(t, cb[i].QP().Num(), ca[i].QP().Query().DestQPN, "rail %d: a's queue pair points at b's", i+1)
		require.Equal(t, ca[i].QP().Num(), cb[i].QP().Query().DestQPN, "rail %d: b's queue pair points at a's", i+1)
		require.Equal(t, uint8(i+1), ca[i].Port())
		require.Equal(t, uint8(i+1), cb[i].Port())
		require.Equal(t, ibv.StateRTS, ca[i].QP().State())
		require.Equal(t, ibv.StateRTS, cb[i].QP().State())
	}
	acc := a.acceptCalls(b.id)
	require.Len(t, acc, 1, "a: one accept for b")
	require.True(t, sameConns(ca, acc[0]), "a: accept got the connections Dial returned")
	acc = b.acceptCalls(a.id)
	require.Len(t, acc, 1, "b: one accept for a")
	require.True(t, sameConns(cb, acc[0]), "b: accept got the connections Dial returned")
}

// sameConns compares connections by identity (not by content: the manager mutates them).
func sameConns(x, y []*Conn) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}

// transfer writes a pattern from one node into the other's memory over conn c, reads it back
// into a fresh area and checks both: from.buf[off:off+2048] and to.buf[off:off+1024]. Callers
// use disjoint areas per transfer (a retransmitted read may be served after it completed).
func transfer(t *testing.T, from, to *odNode, c *Conn, off int, seed byte) {
	t.Helper()
	const n = 1024
	for i := 0; i < n; i++ {
		from.buf[off+i] = seed + byte(i*7)
	}
	cl := newCollector(from.ep)
	id := uint64(seed) << 8
	require.NoError(t, c.Post(&ibv.SendWR{ID: id, Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{from.mr.SGE(off, n)},
		RemoteAddr: to.mr.Addr + uint64(off), RKey: to.mr.RKey}))
	require.NoError(t, c.Post(&ibv.SendWR{ID: id + 1, Opcode: ibv.OpRDMARead, SGL: []ibv.SGE{from.mr.SGE(off+n, n)},
		RemoteAddr: to.mr.Addr + uint64(off), RKey: to.mr.RKey}))
	cl.waitAll(t, 2)
	for k, wc := range cl.got {
		require.Equal(t, ibv.WCSuccess, wc.Status, "work request %d", k)
	}
	require.Equal(t, from.buf[off:off+n], to.buf[off:off+n], "written at the target")
	require.Equal(t, from.buf[off:off+n], from.buf[off+n:off+2*n], "read back")
}

// Dial creates one connection per rail on first use; both sides' accept run once; the passive
// side's own Dial returns the accepted connections without a new exchange; data flows on every
// rail in both directions; a second Dial returns the same connections.
func TestOnDemandDialPutGet(t *testing.T) {
	testutil.CheckGoroutines(t)
	a, b := newODNode(t, 1, 2), newODNode(t, 2, 2)
	require.Zero(t, a.qps(), "nothing per peer before the first Dial")
	require.Nil(t, a.d.Connected(b.id))
	ca := a.dial(t, b)
	cb := b.dial(t, a) // waits for the RTU if it has not arrived yet
	requirePaired(t, a, b, ca, cb, 2)
	require.True(t, sameConns(ca, a.d.Connected(b.id)))
	require.True(t, sameConns(cb, b.d.Connected(a.id)))
	require.Equal(t, 2, a.qps())
	require.Equal(t, 2, b.qps())
	require.True(t, sameConns(ca, a.dial(t, b)), "idempotent")
	for i := range ca {
		require.True(t, ca[i].FaultTolerant())
		transfer(t, a, b, ca[i], 4096*i, byte(1+i))
		transfer(t, b, a, cb[i], 16384+4096*i, byte(10+i))
	}
	sa, sb := a.d.Stats(), b.d.Stats()
	require.Equal(t, int64(1), sa.Dialed)
	require.Equal(t, int64(0), sa.Accepted)
	require.Equal(t, int64(0), sb.Dialed)
	require.Equal(t, int64(1), sb.Accepted)
	require.Zero(t, sa.Superseded+sb.Superseded+sa.Rejected+sb.Rejected)
}

// More rails on one side: k = min of both sides' rail counts.
func TestOnDemandRailMismatch(t *testing.T) {
	testutil.CheckGoroutines(t)
	a, b := newODNode(t, 1, 2), newODNode(t, 2, 1)
	ca := a.dial(t, b)
	cb := b.dial(t, a)
	requirePaired(t, a, b, ca, cb, 1)
	require.Equal(t, 1, a.qps(), "no queue pair for the rail the peer lacks")
	transfer(t, a, b, ca[0], 0, 3)
}

// Both sides dial each other before either CONN_REQ arrives: the lower id's REQ wins, the
// higher side abandons its queue pairs, its Dial returns the accepted ones; exactly one queue
// pair per rail and one accept per side.
func TestOnDemandSimultaneousDial(t *testing.T) {
	testutil.CheckGoroutines(t)
	a, b := newODNode(t, 3, 2), newODNode(t, 7, 2)
	var open atomic.Bool
	gate := func(*udcm.Msg) bool { return !open.Load() }
	a.setDrop(gate)
	b.setDrop(gate)
	var ca, cb []*Conn
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ca = a.dial(t, b) }()
	go func() { defer wg.Done(); cb = b.dial(t, a) }()
	require.Eventually(t, func() bool {
		ra, _ := a.peerState(b.id)
		rb, _ := b.peerState(a.id)
		return ra == odDialing && rb == odDialing
	}, 30*time.Second, time.Millisecond)
	open.Store(true)
	wg.Wait()
	requirePaired(t, a, b, ca, cb, 2)
	require.Equal(t, 2, a.qps(), "one queue pair per rail")
	require.Equal(t, 2, b.qps(), "the abandoned queue pairs are closed")
	sa, sb := a.d.Stats(), b.d.Stats()
	require.Equal(t, int64(0), sa.Superseded)
	require.Equal(t, int64(1), sb.Superseded, "the higher id gives way")
	require.Equal(t, int64(1), sa.Dialed)
	require.Equal(t, int64(1), sb.Accepted)
	require.Zero(t, sb.Dialed)
	for i := range ca {
		transfer(t, a, b, ca[i], 4096*i, byte(20+i))
		transfer(t, b, a, cb[i], 16384+4096*i, byte(30+i))
	}
}

// Lost CM datagrams, end to end: one of each message of the exchange is lost; the resend
// timers and the cached answers complete it with one queue pair per rail. (Each loss, its
// repetitions and duplicates are scripted against the core in TestODCoreScripts.)
func TestOnDemandLostMessages(t *testing.T) {
	for _, tc := range []struct {
		name     string
		atA, atB map[udcm.Type]int // how many of each type to drop on arrival
	}{
		{name: "all", atA: map[udcm.Type]int{udcm.ConnREP: 1}, atB: map[udcm.Type]int{udcm.ConnREQ: 1, udcm.ConnRTU: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testutil.CheckGoroutines(t)
			a, b := newODNode(t, 1, 2), newODNode(t, 2, 2)
			dropper := func(budget map[udcm.Type]int) func(*udcm.Msg) bool {
				return func(m *udcm.Msg) bool { // runs under d.mu
					if budget[m.Type] > 0 {
						budget[m.Type]--
						return true
					}
					return false
				}
			}
			a.setDrop(dropper(tc.atA))
			b.setDrop(dropper(tc.atB))
			ca := a.dial(t, b)
			cb := b.dial(t, a) // keeps b's REP resends going until the RTU gets through
			requirePaired(t, a, b, ca, cb, 2)
			require.Equal(t, 2, a.qps())
			require.Equal(t, 2, b.qps())
			sa, sb := a.d.Stats(), b.d.Stats()
			// every lost message was sent again: a REQ by a's timer, a REP by b's timer or as
			// b's cached answer to a resent REQ, an RTU only as a's answer to a resent REP
			require.GreaterOrEqual(t, sa.Resent, int64(tc.atB[udcm.ConnREQ]), "REQ resends")
			require.GreaterOrEqual(t, sb.Resent+sb.Duplicates, int64(tc.atA[udcm.ConnREP]), "REP resends")
			require.GreaterOrEqual(t, sa.Duplicates, int64(tc.atB[udcm.ConnRTU]), "RTUs answering duplicate REPs")
			require.Zero(t, sa.Superseded+sb.Superseded+sa.Rejected+sb.Rejected)
			transfer(t, a, b, ca[1], 0, 40)
			transfer(t, b, a, cb[0], 8192, 41)
		})
	}
}

// The passive side's CM rail is down for a while (its udp port neither sends nor receives):
// the dialer's resends carry the REQ once it is back.
func TestOnDemandCMRailDown(t *testing.T) {
	testutil.CheckGoroutines(t)
	a, b := newODNode(t, 1, 1), newODNode(t, 2, 1)
	require.NoError(t, udp.SetPortDown(b.m.CM().Device(), 1, true))
	done := make(chan []*Conn, 1)
	go func() { done <- a.dial(t, b) }()
	require.Eventually(t, func() bool { return a.d.Stats().Resent >= 2 }, 30*time.Second, time.Millisecond)
	require.Zero(t, b.qps(), "nothing arrived")
	require.NoError(t, udp.SetPortDown(b.m.CM().Device(), 1, false))
	ca := <-done
	cb := b.dial(t, a)
	requirePaired(t, a, b, ca, cb, 1)
	transfer(t, a, b, ca[0], 0, 50)
}

// A Dial whose context ends leaves its attempt pending; the next Dial resumes it with the same
// queue pairs, also when the passive side had already connected to them (its REP lost).
func TestOnDemandCancelResume(t *testing.T) {
	for _, lostREP := range []bool{false, true} {
		t.Run(fmt.Sprintf("lostREP=%v", lostREP), func(t *testing.T) {
			testutil.CheckGoroutines(t)
			a, b := newODNode(t, 1, 2), newODNode(t, 2, 2)
			var block atomic.Bool
			block.Store(true)
			if lostREP {
				a.setDrop(func(m *udcm.Msg) bool { return block.Load() && m.Type == udcm.ConnREP })
			} else {
				b.setDrop(func(m *udcm.Msg) bool { return block.Load() })
			}
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() { _, err := a.d.Dial(ctx, b.id, b.d.Addr()); errc <- err }()
			require.Eventually(t, func() bool { return a.d.Stats().Resent >= 1 }, 30*time.Second, time.Millisecond)
			if lostREP {
				require.Eventually(t, func() bool { r, _ := b.peerState(a.id); return r == odAccepting }, 30*time.Second,
					time.Millisecond)
			}
			cancel()
			require.ErrorIs(t, <-errc, context.Canceled)
			role, pending := a.peerState(b.id)
			require.Equal(t, odDialing, role, "the attempt stays")
			require.Len(t, pending, 2)
			require.Equal(t, 2, a.qps())
			block.Store(false)
			ca := a.dial(t, b)
			require.True(t, sameConns(pending, ca), "the same queue pairs")
			cb := b.dial(t, a)
			requirePaired(t, a, b, ca, cb, 2)
			require.Equal(t, 2, b.qps(), "no duplicate queue pairs at the peer")
			transfer(t, a, b, ca[0], 0, 60)
		})
	}
}

// A CONN_REJ with the attempt's nonce fails the Dial with ErrRejected and closes its queue
// pairs; a later Dial starts over and connects.
func TestOnDemandRejected(t *testing.T) {
	testutil.CheckGoroutines(t)
	a, b := newODNode(t, 1, 1), newODNode(t, 2, 1)
	b.setDrop(func(m *udcm.Msg) bool { return true })
	errc := make(chan error, 1)
	go func() { _, err := a.d.Dial(context.Background(), b.id, b.d.Addr()); errc <- err }()
	require.Eventually(t, func() bool { r, _ := a.peerState(b.id); return r == odDialing }, 30*time.Second, time.Millisecond)
	a.d.mu.Lock()
	nonce := a.d.core.peers[b.id].nonce
	a.d.mu.Unlock()
	// a stale REJ (wrong nonce) is ignored, the right one fails the attempt
	for _, n := range []uint32{nonce + 2, nonce} {
		require.NoError(t, b.m.CM().Send(a.m.CM().Addrs(), a.m.CM().QPN(),
			&udcm.Msg{Type: udcm.ConnREJ, Status: udcm.RejResources, Src: uint64(b.id), Dst: uint64(a.id), Seq: odJob, Inc: n}))
	}
	require.ErrorIs(t, <-errc, ErrRejected)
	require.Equal(t, int64(1), a.d.Stats().Rejected)
	require.Positive(t, a.d.Stats().Ignored)
	require.Zero(t, a.qps(), "the attempt's queue pairs are closed")
	b.setDrop(nil)
	ca := a.dial(t, b)
	cb := b.dial(t, a)
	requirePaired(t, a, b, ca, cb, 1)
}

// N processes dial each other concurrently in random orders (simultaneous dials happen): every
// pair ends with one queue pair per rail, consistent on both sides, one accept per peer.
func TestOnDemandMesh(t *testing.T) {
	testutil.CheckGoroutines(t)
	const n, rails = 4, 2
	nodes := make([]*odNode, n)
	for i := range nodes {
		nodes[i] = newODNode(t, uint32(10+i), rails)
	}
	got := make([][][]*Conn, n)
	var wg sync.WaitGroup
	for i := range nodes {
		got[i] = make([][]*Conn, n)
		order := rand.Perm(n)
		for _, j := range order {
			if j == i {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cs, err := nodes[i].d.Dial(ctx, nodes[j].id, nodes[j].d.Addr())
				if err != nil {
					t.Errorf("%d dials %d: %v", i, j, err)
				}
				got[i][j] = cs
			}()
		}
	}
	wg.Wait()
	require.False(t, t.Failed())
	for i := 0; i < n; i++ {
		require.Equal(t, rails*(n-1), nodes[i].qps(), "node %d: one queue pair per rail and peer", i)
		for j := i + 1; j < n; j++ {
			requirePaired(t, nodes[i], nodes[j], got[i][j], got[j][i], rails)
		}
	}
	var dialed, accepted int64
	for i, nd := range nodes {
		s := nd.d.Stats()
		dialed += s.Dialed
		accepted += s.Accepted
		transfer(t, nd, nodes[(i+1)%n], got[i][(i+1)%n][i%rails], 2048*i, byte(70+i)) // disjoint areas: a late duplicate read may still read the last one
	}
	require.Equal(t, int64(n*(n-1)/2), dialed, "one dialer per pair")
	require.Equal(t, int64(n*(n-1)/2), accepted, "one passive side per pair")
}

// Close fails pending Dials with ErrClosed and closes their queue pairs; Dial after Close fails;
// the manager takes a new OnDemand afterwards, not two at once; bad arguments change nothing.
func TestOnDemandCloseAndBadInput(t *testing.T) {
	testutil.CheckGoroutines(t)
	a, b := newODNode(t, 1, 2), newODNode(t, 2, 2)
	_, err := a.m.OnDemand(a.eps, 1, odJob, nil)
	require.ErrorIs(t, err, ibv.ErrBusy)
	_, err = a.m.OnDemand(nil, 1, odJob, nil)
	require.ErrorIs(t, err, ibv.ErrInvalidArgument)
	_, err = a.m.OnDemand([]*Endpoint{b.ep}, 1, odJob, nil)
	require.ErrorIs(t, err, ibv.ErrInvalidArgument, "an endpoint of another manager")
	ctx := context.Background()
	_, err = a.d.Dial(ctx, 1, b.d.Addr())
	require.ErrorIs(t, err, ibv.ErrInvalidArgument, "self")
	for _, bad := range [][]byte{nil, {1}, append(b.d.Addr(), 0), b.d.Addr()[:5]} {
		_, err = a.d.Dial(ctx, b.id, bad)
		require.ErrorIs(t, err, ErrMalformed)
	}
	require.Zero(t, a.qps())

	b.setDrop(func(*udcm.Msg) bool { return true })
	errc := make(chan error, 1)
	go func() { _, err := a.d.Dial(ctx, b.id, b.d.Addr()); errc <- err }()
	require.Eventually(t, func() bool { r, _ := a.peerState(b.id); return r == odDialing }, 30*time.Second, time.Millisecond)
	require.NoError(t, a.d.Close())
	require.NoError(t, a.d.Close(), "idempotent")
	require.ErrorIs(t, <-errc, ErrClosed)
	require.Zero(t, a.qps(), "pending queue pairs closed")
	_, err = a.d.Dial(ctx, b.id, b.d.Addr())
	require.ErrorIs(t, err, ErrClosed)

	d2, err := a.m.OnDemand(a.eps, 1, odJob, nil)
	require.NoError(t, err, "the slot is free again")
	b.setDrop(nil)
	cs, err := d2.Dial(ctx, b.id, b.d.Addr())
	require.NoError(t, err)
	require.Len(t, cs, 2)
	t.Cleanup(func() { closeConns(cs) })
	require.NoError(t, d2.Close())
	cb := b.dial(t, a) // returns once b's accept ran
	require.True(t, sameConns(cb, b.acceptCalls(1)[0]))
	require.Len(t, b.acceptCalls(1), 1)
}

// The wire formats: an address and a payload round-trip; the rails' shared paths and CM
// addresses travel once (8 rails of one device fit with room to spare); undecodable ones are
// errors.
func TestOnDemandWire(t *testing.T) {
	addr := marshalODAddr(2, 77, []string{"127.0.0.1:1", "127.0.0.1:2"})
	a, err := unmarshalODAddr(addr)
	require.NoError(t, err)
	require.Equal(t, odAddr{rails: 2, qpn: 77, cm: []string{"127.0.0.1:1", "127.0.0.1:2"}}, a)
	const rails = 8
	var paths []PortPath
	var cm []string
	for r := 0; r < rails; r++ {
		paths = append(paths, PortPath{Addr: fmt.Sprintf("169.254.%d.1:54321", 10+r), LID: uint16(r + 1)})
		cm = append(cm, fmt.Sprintf("169.254.%d.1:40000", 10+r))
	}
	var infos []ConnInfo
	single := 0
	for r := 0; r < rails; r++ {
		ci := ConnInfo{Addr: paths[r].Addr, LID: uint16(r + 1), QPN: uint32(100 + r), PSN: uint32(7 * r), ID: uint64(r)<<8 | 1,
			Port: uint8(r + 1), Paths: paths, CM: cm, CMQPN: 9}
		single = len(ci.Marshal())
		infos = append(infos, ci)
	}
	infos = append(infos, ConnInfo{Addr: "x:1", QPN: 3, PSN: 4}) // a pass-through rail: version 1
	pl, err := marshalODPayload(addr, infos)
	require.NoError(t, err)
	require.Less(t, len(pl), 2*single+rails*60, "shared parts travel once")
	a, got, err := unmarshalODPayload(pl)
	require.NoError(t, err)
	require.Equal(t, infos, got)
	require.Equal(t, uint8(2), a.rails)
	first := 2 + len(addr) + 1 // flags byte of rail 0
	flagged := append([]byte{}, pl...)
	flagged[first] = odSamePaths
	unknown := append([]byte{}, pl...)
	unknown[first] = 4
	for i, bad := range [][]byte{nil, pl[:len(pl)-1], append(append([]byte{}, pl...), 0), pl[:3], flagged, unknown} {
		_, _, err = unmarshalODPayload(bad)
		require.ErrorIs(t, err, ErrMalformed, "case %d", i)
	}
	_, err = marshalODPayload(addr, []ConnInfo{{Addr: string(make([]byte, 255))}, {Addr: string(make([]byte, 255))},
		{Addr: string(make([]byte, 255))}, {Addr: string(make([]byte, 255))}, {Addr: string(make([]byte, 255))},
		{Addr: string(make([]byte, 255))}, {Addr: string(make([]byte, 255))}, {Addr: string(make([]byte, 255))},
		{Addr: string(make([]byte, 255))}, {Addr: string(make([]byte, 255))}, {Addr: string(make([]byte, 255))},
		{Addr: string(make([]byte, 255))}})
	require.ErrorIs(t, err, udcm.ErrMalformed, "over udcm.MaxPayload")
}

func FuzzOnDemandPayload(f *testing.F) {
	pl, _ := marshalODPayload(marshalODAddr(1, 3, []string{"a:1"}), []ConnInfo{
		{Addr: "a:2", QPN: 1, ID: 3, Port: 1, Paths: []PortPath{{Addr: "a:2"}}, CM: []string{"a:1"}, CMQPN: 3},
		{Addr: "a:3", QPN: 2, ID: 5, Port: 2, Paths: []PortPath{{Addr: "a:2"}}, CM: []string{"a:1"}, CMQPN: 3}})
	f.Add(pl)
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, _, err := unmarshalODPayload(b); err != nil {
			require.ErrorIs(t, err, ErrMalformed)
		}
	})
}

// A 6-process mesh on ibv/fabric under testing/synctest with 20% loss on every link (the CM's
// datagrams too) and 10-100 µs latency: every process dials every other in a seeded random
// order, all at once; every pair ends with one queue pair per rail, consistent on both sides,
// one accept per side, and data flows on each pair. Virtual time: the resend timers fire
// exactly, no test sleeps for real.
func TestFabricOnDemandMesh(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		const n, rails = 6, 2
		plan := fabric.Plan{Seed: seed}
		plan.Noise(n, rails, 0.2, fabric.Range{Min: 10 * time.Microsecond, Max: 100 * time.Microsecond})
		nodes := fabODNodes(t, n, rails, plan)
		rng := rand.New(rand.NewPCG(seed, 0x0d))
		got := make([][][]*Conn, n)
		var wg sync.WaitGroup
		for i := range nodes {
			got[i] = make([][]*Conn, n)
			for _, j := range rng.Perm(n) {
				if j == i {
					continue
				}
				delay := time.Duration(rng.IntN(200)) * time.Microsecond
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(delay)
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					cs, err := nodes[i].d.Dial(ctx, nodes[j].id, nodes[j].d.Addr())
					if err != nil {
						t.Errorf("%d dials %d: %v", i, j, err)
					}
					got[i][j] = cs
				}()
			}
		}
		wg.Wait()
		require.False(t, t.Failed())
		var dialed, accepted, resent int64
		for i := 0; i < n; i++ {
			require.Equal(t, rails*(n-1), nodes[i].qps(), "node %d: one queue pair per rail and peer", i)
			for j := i + 1; j < n; j++ {
				requirePaired(t, nodes[i], nodes[j], got[i][j], got[j][i], rails)
			}
			s := nodes[i].d.Stats()
			dialed, accepted, resent = dialed+s.Dialed, accepted+s.Accepted, resent+s.Resent
			transfer(t, nodes[i], nodes[(i+1)%n], got[i][(i+1)%n][i%rails], 2048*i, byte(110+i))
		}
		require.Equal(t, int64(n*(n-1)/2), dialed, "one dialer per pair")
		require.Equal(t, int64(n*(n-1)/2), accepted, "one passive side per pair")
		t.Logf("resent %d", resent)
	})
}

// fabODNodes opens n fabric nodes with rails ports, each with a Manager whose CM runs on the
// node's device (one UD queue pair, rails ports) and an OnDemand (ids 100, 101, ...). Call it
// inside the bubble.
func fabODNodes(t *testing.T, n, rails int, plan fabric.Plan) []*odNode {
	t.Helper()
	return fabODNodesWith(t, testOptions(), n, rails, plan)
}

// fabODNodesWith is fabODNodes with the managers' options o.
func fabODNodesWith(t *testing.T, o Options, n, rails int, plan fabric.Plan) []*odNode {
	t.Helper()
	f, err := fabric.New(fabric.Config{Name: "od", Nodes: n, Ports: rails, Plan: plan})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.Close()) })
	nodes := make([]*odNode, n)
	for i := range nodes {
		dev, err := f.Open(i)
		require.NoError(t, err)
		o := o
		o.CMDevice = dev
		m, err := NewManager(o)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, m.Close()) })
		ep, err := m.NewEndpoint(dev, 1, 1<<12)
		require.NoError(t, err)
		nd := &node{m: m, dev: dev, ep: ep, buf: make([]byte, 1<<14)}
		nd.mr, err = ep.PD.RegMR(nd.buf, ibv.AccessAll)
		require.NoError(t, err)
		nodes[i] = attachOD(t, nd, uint32(100+i), odJob, rails)
	}
	return nodes
}

// The CM sends each message on every rail, so each arrives once per rail: the copies are not
// answered again (no REQ/REP/RTU storm growing with the rail count), the extra RTU is ignored.
func TestFabricOnDemandRailCopies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rails = 4
		nodes := fabODNodes(t, 2, rails, fabric.Plan{})
		a, b := nodes[0], nodes[1]
		ca := a.dial(t, b)
		cb := b.dial(t, a)
		requirePaired(t, a, b, ca, cb, rails)
		time.Sleep(time.Second) // virtual: every copy has arrived
		sa, sb := a.d.Stats(), b.d.Stats()
		require.Zero(t, sa.Duplicates+sb.Duplicates+sa.Resent+sb.Resent, "a: %+v b: %+v", sa, sb)
		require.Equal(t, int64(rails-1), sb.Ignored, "the RTU's other copies")
		transfer(t, a, b, ca[rails-1], 0, 7)
	})
}

// Without an accept callback, connections a peer dialed reach the consumer through Dial or
// Connected; Close closes those never handed out and leaves the others to the consumer.
func TestOnDemandNilAccept(t *testing.T) {
	for _, ask := range []bool{false, true} {
		t.Run(fmt.Sprintf("connected=%v", ask), func(t *testing.T) {
			testutil.CheckGoroutines(t)
			nd := newNode(t, testOptions(), 2, 1<<12)
			d, err := nd.m.OnDemand([]*Endpoint{nd.ep, nd.ep.WithPort(2)}, 1, odJob, nil)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, d.Close()) })
			a := &odNode{node: nd, id: 1, d: d}
			b := newODNode(t, 2, 2)
			cb := b.dial(t, a)
			require.Len(t, cb, 2)
			require.Eventually(t, func() bool {
				d.mu.Lock()
				defer d.mu.Unlock()
				p := d.core.peers[b.id]
				return p != nil && p.role == odDone
			}, 30*time.Second, time.Millisecond)
			require.Equal(t, 2, a.qps())
			var ca []*Conn
			if ask {
				require.Eventually(t, func() bool { ca = d.Connected(b.id); return ca != nil }, 30*time.Second, time.Millisecond)
				t.Cleanup(func() { closeConns(ca) })
			}
			require.NoError(t, d.Close())
			if ask {
				require.Equal(t, 2, a.qps(), "handed out: the consumer's")
				transfer(t, a, b, ca[1], 0, 5)
			} else {
				require.Zero(t, a.qps(), "never handed out: closed")
			}
		})
	}
}

// The other CONN_REJ paths: a dialer that cannot use a CONN_REP (undecodable payload) fails its
// Dial, closes its queue pairs and sends a CONN_REJ; the passive side that had accepted that
// attempt closes its queue pairs too; the next Dial is a new attempt that both sides complete
// (late REPs of the failed one are stale).
func TestOnDemandRejectPaths(t *testing.T) {
	testutil.CheckGoroutines(t)
	nonceOf := func(n *odNode, peer uint32) uint32 {
		n.d.mu.Lock()
		defer n.d.mu.Unlock()
		return n.d.core.peers[peer].nonce
	}
	for _, accepted := range []bool{false, true} {
		t.Run(fmt.Sprintf("accepted=%v", accepted), func(t *testing.T) {
			a, b := newODNode(t, 1, 2), newODNode(t, 2, 2)
			var gate atomic.Bool
			gate.Store(true)
			if accepted {
				// b accepts; its true REPs do not reach a
				a.setDrop(func(m *udcm.Msg) bool { return gate.Load() && m.Type == udcm.ConnREP && len(m.Payload) != 3 })
			} else {
				b.setDrop(func(*udcm.Msg) bool { return gate.Load() })
			}
			errc := make(chan error, 1)
			go func() { _, err := a.d.Dial(context.Background(), b.id, b.d.Addr()); errc <- err }()
			if accepted {
				require.Eventually(t, func() bool { r, _ := b.peerState(a.id); return r == odAccepting }, 30*time.Second,
					time.Millisecond)
			} else {
				require.Eventually(t, func() bool { r, _ := a.peerState(b.id); return r == odDialing }, 30*time.Second,
					time.Millisecond)
			}
			rep := udcm.Msg{Type: udcm.ConnREP, Src: uint64(b.id), Dst: uint64(a.id), Seq: odJob, Inc: nonceOf(a, b.id),
				Payload: []byte{1, 2, 3}}
			require.NoError(t, b.m.CM().Send(a.m.CM().Addrs(), a.m.CM().QPN(), &rep))
			require.ErrorIs(t, <-errc, ErrMalformed)
			require.Zero(t, a.qps())
			require.Equal(t, int64(1), a.d.Stats().Rejected, "a sent a REJ")
			if accepted {
				require.Eventually(t, func() bool { return b.d.Stats().Rejected == 1 }, 30*time.Second, time.Millisecond)
				// the REJ is counted just before the queue pairs are closed
				require.Eventually(t, func() bool { return b.qps() == 0 }, 30*time.Second, time.Millisecond,
					"b closed the rejected attempt's queue pairs")
			}
			gate.Store(false)
			ca := a.dial(t, b)
			cb := b.dial(t, a)
			requirePaired(t, a, b, ca, cb, 2)
			require.Equal(t, 2, b.qps())
			transfer(t, b, a, cb[1], 0, 9)
		})
	}
}

// A CONN_REP of an attempt the dialer abandoned (here: it closed its OnDemand and opened
// another) is answered with CONN_REJ, so the passive side closes the queue pairs it held for
// it; the new OnDemand then connects.
func TestOnDemandStaleREP(t *testing.T) {
	testutil.CheckGoroutines(t)
	a, b := newODNode(t, 1, 2), newODNode(t, 2, 2)
	a.setDrop(func(m *udcm.Msg) bool { return m.Type == udcm.ConnREP })
	errc := make(chan error, 1)
	go func() { _, err := a.d.Dial(context.Background(), b.id, b.d.Addr()); errc <- err }()
	require.Eventually(t, func() bool { r, _ := b.peerState(a.id); return r == odAccepting }, 30*time.Second, time.Millisecond)
	require.Equal(t, 2, b.qps())
	require.NoError(t, a.d.Close())
	require.ErrorIs(t, <-errc, ErrClosed)
	d2, err := a.m.OnDemand(a.eps, a.id, odJob, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d2.Close()) })
	b.d.mu.Lock()
	b.d.core.peers[a.id].resends = 0 // b's idle REP resends may have run out while the test was descheduled
	b.d.mu.Unlock()
	// b's REP resends reach d2, which rejects them
	require.Eventually(t, func() bool { return b.d.Stats().Rejected == 1 }, 30*time.Second, time.Millisecond)
	require.Positive(t, d2.Stats().Rejected)
	require.Zero(t, b.qps(), "b closed the abandoned attempt's queue pairs")
	ca, err := d2.Dial(context.Background(), b.id, b.d.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { closeConns(ca) })
	cb := b.dial(t, a)
	require.Len(t, ca, 2)
	for i := range ca {
		require.Equal(t, cb[i].QP().Num(), ca[i].QP().Query().DestQPN)
	}
	require.Equal(t, 2, b.qps())
	transfer(t, b, a, cb[0], 0, 11)
}

// On-demand connections are ordinary fault-tolerant connections: a rail pulled in the middle of
// a stream of writes striped over both is handled by APM (with APM) or by the software
// re-establishment over the same UD connection manager (without), every write completes once
// and the data arrive intact.
func TestOnDemandFailover(t *testing.T) {
	for _, useAPM := range []bool{true, false} {
		t.Run(fmt.Sprintf("apm=%v", useAPM), func(t *testing.T) {
			testutil.CheckGoroutines(t)
			const size, chunk = 4 << 20, 32 << 10
			o := testOptions()
			o.APM = useAPM
			a, b := newODNodeWith(t, o, 1, 2, size), newODNodeWith(t, o, 2, 2, size)
			ca := a.dial(t, b)
			cb := b.dial(t, a)
			requirePaired(t, a, b, ca, cb, 2)
			if useAPM {
				waitArmed(t, ca...)
				waitArmed(t, cb...)
			}
			for i := range a.buf {
				a.buf[i] = byte(i*13 + i>>10)
			}
			cl := newCollector(a.ep)
			n := size / chunk
			for i := 0; i < n; i++ {
				if i == n/3 {
					require.NoError(t, tcp.SetPortDown(a.dev, 1, true))
				}
				off := i * chunk
				postRetry(t, ca[i%2], cl, &ibv.SendWR{ID: uint64(i), Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{a.mr.SGE(off, chunk)},
					RemoteAddr: b.mr.Addr + uint64(off), RKey: b.mr.RKey})
				cl.poll(t)
			}
			cl.waitAll(t, n)
			requireAllOK(t, cl)
			require.Equal(t, a.buf, b.buf, "data at the target")
			// the manager handles the path migration event asynchronously: the writes may all
			// complete on the migrated path before it counts the migration and updates the port
			require.Eventually(t, func() bool {
				s := ca[0].Stats()
				return s.PathMigrations+s.Recoveries > 0 && ca[0].Port() == 2
			}, 30*time.Second, time.Millisecond, "rail 1's queue pair moved")
			s := ca[0].Stats()
			if useAPM {
				// APM moves it, once; only when the port error finds the alternate not ARMED at that
				// instant (a path load in progress) does the software recovery move it instead.
				require.LessOrEqual(t, s.PathMigrations, int64(1), "%+v", s)
				require.Positive(t, s.PathMigrations+s.Recoveries, "rail 1's queue pair moved: %+v", s)
			} else {
				require.Positive(t, s.Recoveries, "the software recovery re-established rail 1's queue pair")
			}
			require.Equal(t, uint8(2), ca[0].Port())
		})
	}
}

// A process's use of OnDemand: the tiny CM address goes through the bootstrap exchange at
// initialization, connections are made on a peer's first use; accept installs those the peers
// make (it runs on the manager's goroutine: it must not block).
func ExampleManager_OnDemand() {
	var (
		dev       *ibv.Context                     // the network device, one port per rail
		rank, job uint32                           // from the bootstrap
		allGather func(b []byte) [][]byte          // the bootstrap's all-gather
		install   func(peer uint32, conns []*Conn) // e.g. a multirail channel per peer
		ctx       = context.Background()
	)
	m, err := NewManager(Options{CMListen: []string{"169.254.10.1:0", "169.254.11.1:0"}})
	if err != nil {
		return
	}
	defer m.Close()
	ep, err := m.NewEndpoint(dev, 1, 1<<16)
	if err != nil {
		return
	}
	od, err := m.OnDemand([]*Endpoint{ep, ep.WithPort(2)}, rank, job, install)
	if err != nil {
		return
	}
	defer od.Close()
	addrs := allGather(od.Addr()) // a few dozen bytes per process
	// ... on the first put/get to peer 3:
	conns, err := od.Dial(ctx, 3, addrs[3])
	if err != nil {
		return
	}
	_ = conns // one connection per rail; accept has installed them too
}

// Resources follow use, not the job size [Sridhar08]: in a job of 5, a process that talks to one
// peer holds one queue pair per rail; the others hold nothing but their CM's UD queue pair.
func TestOnDemandSparse(t *testing.T) {
	testutil.CheckGoroutines(t)
	const n, rails = 5, 2
	nodes := make([]*odNode, n)
	for i := range nodes {
		nodes[i] = newODNode(t, uint32(i), rails)
	}
	c0 := nodes[0].dial(t, nodes[3])
	c3 := nodes[3].dial(t, nodes[0])
	requirePaired(t, nodes[0], nodes[3], c0, c3, rails)
	for i, nd := range nodes {
		want := 0
		if i == 0 || i == 3 {
			want = rails
		}
		require.Equal(t, want, nd.qps(), "node %d", i)
		nd.d.mu.Lock()
		require.Len(t, nd.d.core.peers, want/rails, "node %d: per-peer state", i)
		nd.d.mu.Unlock()
	}
}

// BenchmarkOnDemandDial measures an on-demand connection setup of 2 rails between two
// processes (CONN_REQ, CONN_REP, CONN_RTU over loopback UDP, 4 queue pairs to RTS, until both
// sides have returned); each iteration forgets the previous connection on both sides.
func BenchmarkOnDemandDial(b *testing.B) {
	x, y := benchOnDemand(b, 1), benchOnDemand(b, 2)
	forget := func(d *OnDemand, peer uint32) {
		d.mu.Lock()
		if l := d.links[peer]; l != nil {
			closeConns(l.conns)
			delete(d.links, peer)
			delete(d.core.peers, peer)
		}
		d.mu.Unlock()
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := x.Dial(ctx, 2, y.Addr()); err != nil {
			b.Fatal(err)
		}
		if _, err := y.Dial(ctx, 1, x.Addr()); err != nil { // returns once the RTU has arrived
			b.Fatal(err)
		}
		b.StopTimer()
		forget(x, 2)
		forget(y, 1)
		b.StartTimer()
	}
}

// benchOnDemand opens process id's OnDemand over a 2-port loopback tcp device, without accept.
func benchOnDemand(b *testing.B, id uint32) *OnDemand {
	dev, err := tcp.Open(tcp.Config{Ports: []tcp.PortConfig{{Listen: "127.0.0.1:0"}, {Listen: "127.0.0.1:0"}}})
	require.NoError(b, err)
	m, err := NewManager(testOptions())
	require.NoError(b, err)
	ep, err := m.NewEndpoint(dev, 1, 1<<10)
	require.NoError(b, err)
	d, err := m.OnDemand([]*Endpoint{ep, ep.WithPort(2)}, id, odJob, nil)
	require.NoError(b, err)
	b.Cleanup(func() {
		require.NoError(b, d.Close())
		require.NoError(b, m.Close())
		require.NoError(b, dev.Close())
	})
	return d
}

// BenchmarkOnDemandRedial measures an eviction and a re-promotion of a 2-rail connection between
// two processes over loopback UDP: a Disconnect (CONN_DREQ/DREP; the other end closes its 2
// queue pairs, no release callback), then a Dial from the other end (CONN_REQ/REP/RTU, 4 new
// queue pairs to RTS), until both ends have returned; the ends swap roles every iteration.
func BenchmarkOnDemandRedial(b *testing.B) {
	ds := [2]*OnDemand{benchOnDemand(b, 1), benchOnDemand(b, 2)}
	ids := [2]uint32{1, 2}
	ctx := context.Background()
	var conns [2][]*Conn
	dial := func(from, to int) {
		cs, err := ds[from].Dial(ctx, ids[to], ds[to].Addr())
		if err != nil {
			b.Fatal(err)
		}
		conns[from] = cs
	}
	dial(0, 1)
	dial(1, 0)
	b.Cleanup(func() { closeConns(conns[0]); closeConns(conns[1]) })
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x, y := i%2, 1-i%2
		if err := ds[x].Disconnect(ctx, ids[y]); err != nil {
			b.Fatal(err)
		}
		closeConns(conns[x])
		dial(y, x) // the other end promotes the peer again
		dial(x, y) // returns once the RTU has arrived
	}
}
