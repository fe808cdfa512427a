package hybridft

import (
	"context"
	"errors"
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
	"github.com/goarmci/goarmci/internal/testutil"
)

// End-to-end tests of the on-demand admission and disconnect (CONN_DREQ/DREP) on ibv/fabric
// under testing/synctest: the resend timers run on virtual time. The transitions themselves are
// scripted against the core in odcore_admit_disconnect_test.go.

// releaseLater makes n's consumer release a disconnecting peer's connections on a goroutine of
// its own (as a consumer draining them would): it closes them, then calls done. It counts the
// release calls per peer.
func releaseLater(n *odNode) *sync.Map {
	var calls sync.Map // peer -> *atomic.Int64
	n.d.SetRelease(func(peer uint32, conns []*Conn, done func()) {
		v, _ := calls.LoadOrStore(peer, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
		go func() {
			closeConns(conns)
			done()
			done() // a second call does nothing
		}()
	})
	return &calls
}

func releaseCalls(calls *sync.Map, peer uint32) int64 {
	v, ok := calls.Load(peer)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

// requireNewPair checks that ca and cb are the two ends of one queue pair per rail, in RTS, that
// none of them is one of old, and that accept got them last on each side.
func requireNewPair(t *testing.T, a, b *odNode, ca, cb, old []*Conn, rails int) {
	t.Helper()
	require.Len(t, ca, rails)
	require.Len(t, cb, rails)
	for i := range ca {
		require.Equal(t, cb[i].QP().Num(), ca[i].QP().Query().DestQPN, "rail %d", i+1)
		require.Equal(t, ca[i].QP().Num(), cb[i].QP().Query().DestQPN, "rail %d", i+1)
		require.Equal(t, ibv.StateRTS, ca[i].QP().State())
		require.Equal(t, ibv.StateRTS, cb[i].QP().State())
		for _, o := range old {
			require.NotSame(t, o, ca[i])
			require.NotSame(t, o, cb[i])
		}
	}
	acc := a.acceptCalls(b.id)
	require.True(t, sameConns(ca, acc[len(acc)-1]), "a: accept got the new connections")
	acc = b.acceptCalls(a.id)
	require.True(t, sameConns(cb, acc[len(acc)-1]), "b: accept got the new connections")
}

// requireForgotten checks that neither end holds anything for the other: no connection, no
// state, no queue pair.
func requireForgotten(t *testing.T, a, b *odNode) {
	t.Helper()
	require.Nil(t, a.d.Connected(b.id))
	require.Nil(t, b.d.Connected(a.id))
	ra, _ := a.peerState(b.id)
	rb, _ := b.peerState(a.id)
	require.Zero(t, ra, "a forgot b")
	require.Zero(t, rb, "b forgot a")
	require.Zero(t, a.qps())
	require.Zero(t, b.qps())
}

// Dial, RDMA write and read, Disconnect: both ends forgotten (the passive end's consumer
// released its connections before the DREP), no queue pair left; the OTHER end re-dials and gets
// new queue pairs on which data flow; and the first end disconnects again. With 4% packet loss on
// every link (the CM's datagrams and the RC traffic), with the passive end's release on a
// goroutine of its own or without release (the OnDemand closes the connections).
func TestFabricOnDemandDisconnectRedial(t *testing.T) {
	for _, loss := range []float64{0, 0.04} {
		for _, withRelease := range []bool{true, false} {
			t.Run(fmt.Sprintf("loss=%v/release=%v", loss, withRelease), func(t *testing.T) {
				forSeeds(t, func(t *testing.T, seed uint64) {
					const rails = 2
					plan := fabric.Plan{Seed: seed}
					if loss > 0 {
						plan.Noise(2, rails, loss, fabric.Range{Min: 10 * time.Microsecond, Max: 100 * time.Microsecond})
					}
					nodes := fabODNodes(t, 2, rails, plan)
					a, b := nodes[0], nodes[1]
					var relA, relB *sync.Map
					if withRelease {
						relA, relB = releaseLater(a), releaseLater(b)
					}
					ctx := context.Background()
					ca := a.dial(t, b)
					cb := b.dial(t, a)
					requirePaired(t, a, b, ca, cb, rails)
					transfer(t, a, b, ca[0], 0, 1)
					transfer(t, b, a, cb[1], 4096, 2)

					require.NoError(t, a.d.Disconnect(ctx, b.id))
					closeConns(ca)
					requireForgotten(t, a, b)
					if withRelease {
						require.Equal(t, int64(1), releaseCalls(relB, a.id), "b released once")
						require.Zero(t, releaseCalls(relA, b.id))
					}
					require.ErrorIs(t, a.d.Disconnect(ctx, b.id), ErrNotConnected, "already disconnected")

					cb2 := b.dial(t, a) // the other end re-dials
					ca2 := a.dial(t, b)
					requireNewPair(t, a, b, ca2, cb2, append(ca, cb...), rails)
					require.Equal(t, rails, a.qps())
					require.Equal(t, rails, b.qps())
					for i := range ca2 {
						transfer(t, a, b, ca2[i], 8192+2048*i, byte(3+i))
						transfer(t, b, a, cb2[i], 12288-2048*i, byte(5+i))
					}
					sa, sb := a.d.Stats(), b.d.Stats()
					require.Equal(t, int64(1), sa.Disconnected)
					require.Equal(t, int64(1), sb.Disconnected)
					require.Equal(t, int64(1), sa.Dialed+sa.Accepted-1, "a dialed, then accepted")
					require.Equal(t, int64(1), sb.Dialed)

					// and down again, from the end that dialed last
					require.NoError(t, b.d.Disconnect(ctx, a.id))
					closeConns(cb2)
					requireForgotten(t, a, b)
					t.Logf("a: %+v b: %+v", a.d.Stats(), b.d.Stats())
				})
			})
		}
	}
}

// Admission refused at the target: the dialer's Dial fails with ErrRejected, admit was asked
// once (not per rail copy nor per resend), no queue pair is left at either end; once admit
// accepts, the next Dial connects.
func TestFabricOnDemandAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rails = 2
		nodes := fabODNodes(t, 2, rails, fabric.Plan{})
		a, b := nodes[0], nodes[1]
		var allow atomic.Bool
		var asked atomic.Int64
		b.d.SetAdmit(func(peer uint32) bool {
			require.Equal(t, a.id, peer)
			require.Nil(t, b.d.Connected(peer), "admit may call the OnDemand")
			asked.Add(1)
			return allow.Load()
		})
		ctx := context.Background()
		_, err := a.d.Dial(ctx, b.id, b.d.Addr())
		require.ErrorIs(t, err, ErrRejected)
		synctest.Wait()
		time.Sleep(time.Second) // virtual: every copy and resend has arrived
		require.Equal(t, int64(1), asked.Load(), "admit asked once per attempt")
		require.Zero(t, a.qps(), "the dialer closed its queue pairs")
		require.Zero(t, b.qps(), "the target created none")
		require.Nil(t, a.d.Connected(b.id))
		require.Nil(t, b.d.Connected(a.id))
		require.Equal(t, int64(1), b.d.Stats().Refused)
		require.Equal(t, int64(1), a.d.Stats().Rejected)

		allow.Store(true)
		ca := a.dial(t, b)
		cb := b.dial(t, a)
		requirePaired(t, a, b, ca, cb, rails)
		require.Equal(t, int64(2), asked.Load())
		transfer(t, a, b, ca[1], 0, 9)
		// b's own dial of a and a's REQs to it afterwards are not put to admit
		time.Sleep(time.Second)
		require.Equal(t, int64(2), asked.Load())
	})
}

// Both ends Disconnect at once (their DREQs cross: each end's CM input is held until both are
// closing): each answers the other's DREQ and forgets; both Disconnects return nil, no release
// runs; then a re-dial connects anew.
func TestFabricOnDemandSimultaneousDisconnect(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		const rails = 2
		a, b := noisyODPair(t, seed, rails)
		relA, relB := releaseLater(a), releaseLater(b)
		ca := a.dial(t, b)
		cb := b.dial(t, a)
		requirePaired(t, a, b, ca, cb, rails)
		var open atomic.Bool
		hold := func(m *udcm.Msg) bool { return !open.Load() }
		a.setDrop(hold)
		b.setDrop(hold)
		ctx := context.Background()
		errs := make(chan error, 2)
		go func() { errs <- a.d.Disconnect(ctx, b.id) }()
		go func() { errs <- b.d.Disconnect(ctx, a.id) }()
		synctest.Wait()
		ra, _ := a.peerState(b.id)
		rb, _ := b.peerState(a.id)
		require.Equal(t, odClosing, ra)
		require.Equal(t, odClosing, rb)
		open.Store(true)
		require.NoError(t, <-errs)
		require.NoError(t, <-errs)
		closeConns(ca)
		closeConns(cb)
		requireForgotten(t, a, b)
		require.Zero(t, releaseCalls(relA, b.id)+releaseCalls(relB, a.id), "no release: both had drained")
		require.Equal(t, int64(1), a.d.Stats().Disconnected)
		require.Equal(t, int64(1), b.d.Stats().Disconnected)
		ca2 := a.dial(t, b)
		cb2 := b.dial(t, a)
		requireNewPair(t, a, b, ca2, cb2, append(ca, cb...), rails)
		transfer(t, b, a, cb2[0], 0, 11)
	})
}

// A Disconnect racing a Dial of the other end: b's consumer releases a's DREQ slowly and dials a
// meanwhile; that Dial waits for the disconnect to end (Connected is nil meanwhile), then makes
// new connections, which a accepts once its Disconnect has returned. Both ends are connected anew,
// with new queue pairs.
func TestFabricOnDemandDisconnectRacesDial(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		const rails = 2
		a, b := noisyODPair(t, seed, rails)
		ca := a.dial(t, b)
		cb := b.dial(t, a)
		requirePaired(t, a, b, ca, cb, rails)
		proceed := make(chan struct{})
		released := make(chan []*Conn, 1)
		b.d.SetRelease(func(peer uint32, conns []*Conn, done func()) {
			released <- conns
			go func() {
				<-proceed // draining
				closeConns(conns)
				done()
			}()
		})
		ctx := context.Background()
		discErr := make(chan error, 1)
		go func() { discErr <- a.d.Disconnect(ctx, b.id) }()
		require.True(t, sameConns(cb, <-released), "release got b's connections")
		dialed := make(chan []*Conn, 1)
		go func() {
			cs, err := b.d.Dial(ctx, a.id, a.d.Addr())
			if err != nil {
				t.Errorf("b dials a: %v", err)
			}
			dialed <- cs
		}()
		synctest.Wait()
		require.Nil(t, b.d.Connected(a.id), "being released")
		require.Nil(t, a.d.Connected(b.id), "being disconnected")
		select {
		case <-dialed:
			t.Fatal("the Dial returned during the disconnect")
		default:
		}
		close(proceed)
		require.NoError(t, <-discErr)
		closeConns(ca)
		cb2 := <-dialed
		ca2 := a.dial(t, b)
		requireNewPair(t, a, b, ca2, cb2, append(ca, cb...), rails)
		require.Equal(t, rails, a.qps())
		require.Equal(t, rails, b.qps())
		transfer(t, a, b, ca2[1], 0, 13)
		transfer(t, b, a, cb2[0], 4096, 14)
	})
}

// Disconnect's errors: ErrNotConnected for a peer never dialed or not established yet; a
// context that ends returns its error while the exchange goes on (a later Disconnect gets its
// end); ErrPartition when no DREP comes within the partition timeout (the peer is forgotten
// here; the other end's own Disconnect, or our next Dial, which it probes, ends its end);
// ErrClosed after Close.
func TestFabricOnDemandDisconnectErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := testOptions()
		o.PartitionTimeout = 2 * time.Second
		nodes := fabODNodesWith(t, o, 3, 1, fabric.Plan{})
		a, b, c := nodes[0], nodes[1], nodes[2]
		ctx := context.Background()
		require.ErrorIs(t, a.d.Disconnect(ctx, b.id), ErrNotConnected, "never dialed")
		require.ErrorIs(t, a.d.Disconnect(ctx, a.id), ErrNotConnected, "self")

		// the context ends: the exchange goes on and a later Disconnect waits for it
		ca := a.dial(t, b)
		var hold atomic.Bool
		hold.Store(true)
		b.setDrop(func(m *udcm.Msg) bool { return hold.Load() && m.Type == udcm.ConnDREQ })
		dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		require.ErrorIs(t, a.d.Disconnect(dctx, b.id), context.DeadlineExceeded)
		cancel()
		require.Nil(t, a.d.Connected(b.id), "still disconnecting")
		hold.Store(false)
		require.NoError(t, a.d.Disconnect(ctx, b.id))
		closeConns(ca)
		requireForgotten(t, a, b)

		// no DREP within the partition timeout
		ca = a.dial(t, b)
		cb := b.dial(t, a) // b's end is established (the RTU arrived)
		b.setDrop(func(*udcm.Msg) bool { return true })
		start := time.Now()
		err := a.d.Disconnect(ctx, b.id)
		require.ErrorIs(t, err, ErrPartition)
		require.GreaterOrEqual(t, time.Since(start), o.PartitionTimeout)
		require.Nil(t, a.d.Connected(b.id))
		ra, _ := a.peerState(b.id)
		require.Zero(t, ra, "forgotten here")
		closeConns(ca)
		// b still holds its end (its own Disconnect is answered at once)
		require.NotNil(t, b.d.Connected(a.id))
		b.setDrop(nil)
		require.NoError(t, b.d.Disconnect(ctx, a.id))
		closeConns(cb)
		requireForgotten(t, a, b)

		// again, and this time a dials b anew: b answers the REQ with a probe, a does not hold
		// the connection (DREP), b releases its end, a's resent REQ connects
		ca = a.dial(t, b)
		cb = b.dial(t, a)
		b.setDrop(func(*udcm.Msg) bool { return true })
		require.ErrorIs(t, a.d.Disconnect(ctx, b.id), ErrPartition)
		closeConns(ca)
		b.setDrop(nil)
		ca2 := a.dial(t, b)
		cb2 := b.dial(t, a)
		requireNewPair(t, a, b, ca2, cb2, append(ca, cb...), 1)
		require.Equal(t, 1, a.qps())
		require.Equal(t, 1, b.qps(), "b closed its end of the old connection (no release callback)")
		transfer(t, a, b, ca2[0], 0, 31)
		require.NoError(t, a.d.Disconnect(ctx, b.id))
		closeConns(ca2)
		requireForgotten(t, a, b)

		// not established yet: c drops everything
		c.setDrop(func(*udcm.Msg) bool { return true })
		dctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
		_, err = a.d.Dial(dctx, c.id, c.d.Addr())
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, a.d.Disconnect(ctx, c.id), ErrNotConnected, "dialing")

		require.NoError(t, a.d.Close())
		require.ErrorIs(t, a.d.Disconnect(ctx, b.id), ErrClosed)
	})
}

// churnConsumer is a consumer of one node's OnDemand that keeps a table of its connections per
// peer as rma would: accept installs them, release drops them on a goroutine that holds the
// peer's operation lock, and Dial and Disconnect run under that lock (one operation per peer at a
// time, as rma's per-peer switch does).
type churnConsumer struct {
	n    *odNode
	mu   sync.Mutex
	conn map[uint32][]*Conn
	ops  map[uint32]*sync.Mutex
	wg   sync.WaitGroup

	gaveUp atomic.Int64 // Disconnects that returned ErrPartition
}

func newChurnConsumer(n *odNode, peers []*odNode, seed uint64) *churnConsumer {
	c := &churnConsumer{n: n, conn: map[uint32][]*Conn{}, ops: map[uint32]*sync.Mutex{}}
	rng := rand.New(rand.NewPCG(seed, uint64(n.id)))
	n.d.SetAdmit(func(uint32) bool { return rng.IntN(4) > 0 }) // one in four refused (on the manager goroutine)
	for _, p := range peers {
		c.ops[p.id] = new(sync.Mutex)
	}
	n.mu.Lock()
	n.onAccept = c.install
	n.mu.Unlock()
	n.d.SetRelease(func(peer uint32, conns []*Conn, done func()) {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			op := c.ops[peer]
			op.Lock()
			defer op.Unlock()
			c.drop(peer, conns)
			done()
		}()
	})
	return c
}

// install is called by the node's accept.
func (c *churnConsumer) install(peer uint32, conns []*Conn) {
	c.mu.Lock()
	c.conn[peer] = conns
	c.mu.Unlock()
}

// drop closes conns and forgets them if they are still the table's.
func (c *churnConsumer) drop(peer uint32, conns []*Conn) {
	closeConns(conns)
	c.mu.Lock()
	if sameConns(c.conn[peer], conns) {
		delete(c.conn, peer)
	}
	c.mu.Unlock()
}

func (c *churnConsumer) dial(t *testing.T, to *odNode) {
	op := c.ops[to.id]
	op.Lock()
	defer op.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.n.d.Dial(ctx, to.id, to.d.Addr())
	if err != nil && !errors.Is(err, ErrRejected) { // refused by the peer's admission
		t.Errorf("%d dials %d: %v", c.n.id, to.id, err)
	}
}

// disconnect: on nil, and on ErrPartition when giveUp (the peer is forgotten here), the
// consumer closes its connections.
func (c *churnConsumer) disconnect(t *testing.T, to *odNode, giveUp bool) {
	op := c.ops[to.id]
	op.Lock()
	defer op.Unlock()
	c.mu.Lock()
	cs := c.conn[to.id]
	c.mu.Unlock()
	switch err := c.n.d.Disconnect(context.Background(), to.id); {
	case err == nil || giveUp && errors.Is(err, ErrPartition):
		if err != nil {
			c.gaveUp.Add(1)
		}
		c.drop(to.id, cs)
	case !errors.Is(err, ErrNotConnected):
		t.Errorf("%d disconnects %d: %v", c.n.id, to.id, err)
	}
}

// Churn: 4 processes, each dialing and disconnecting each other at random moments, from both
// ends of every pair at once, admission refusing one request in four, with 10% packet loss and
// per-link latencies up to 3 ms (copies of a message on the two rails arrive far apart, late
// copies of earlier attempts meet later ones). Once quiet, every pair is connected at both ends
// (the two ends of one queue pair per rail, data flow) or forgotten at both; no process holds a
// queue pair that is not in a connection of its table.
//
// giveUp: besides, each process loses three in four of the CONN_DREQs sent to it (not the
// probes) and the partition timeout is 60 ms, so some Disconnects give up (ErrPartition) and
// leave the other end holding its end; then every pair dials both ways (admission and losses
// off): the holders' probes find the ends forgotten, and every pair ends connected at both ends.
func TestFabricOnDemandChurn(t *testing.T) {
	for _, giveUp := range []bool{false, true} {
		t.Run(fmt.Sprintf("giveUp=%v", giveUp), func(t *testing.T) {
			forSeeds(t, func(t *testing.T, seed uint64) { churn(t, seed, giveUp) })
		})
	}
}

func churn(t *testing.T, seed uint64, giveUp bool) {
	{
		const n, rails, ops = 4, 2, 20
		plan := fabric.Plan{Seed: seed}
		plan.Noise(n, rails, 0.1, fabric.Range{Min: 10 * time.Microsecond, Max: 3 * time.Millisecond})
		o := testOptions()
		if giveUp {
			o.PartitionTimeout = 60 * time.Millisecond
		}
		nodes := fabODNodesWith(t, o, n, rails, plan)
		cons := make([]*churnConsumer, n)
		for i, nd := range nodes {
			cons[i] = newChurnConsumer(nd, nodes, seed)
			if giveUp {
				rng := rand.New(rand.NewPCG(seed, 0xd2e9+uint64(i)))
				nd.setDrop(func(m *udcm.Msg) bool { // under d.mu
					return m.Type == udcm.ConnDREQ && m.Status&udcm.DREQProbe == 0 && rng.IntN(4) > 0
				})
			}
		}
		rng := rand.New(rand.NewPCG(seed, 0xc4))
		var wg sync.WaitGroup
		for i := range nodes {
			for j := range nodes {
				if i == j {
					continue
				}
				script := make([]int, ops)
				pause := make([]time.Duration, ops)
				for k := range script {
					script[k] = rng.IntN(2)
					pause[k] = time.Duration(rng.IntN(3000)) * time.Microsecond
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k, op := range script {
						time.Sleep(pause[k])
						if op == 0 {
							cons[i].dial(t, nodes[j])
						} else {
							cons[i].disconnect(t, nodes[j], giveUp)
						}
					}
				}()
			}
		}
		wg.Wait()
		for _, c := range cons {
			c.wg.Wait()
		}
		time.Sleep(2 * time.Second) // virtual: every resend and late copy is over
		synctest.Wait()
		require.False(t, t.Failed())
		var gaveUp int64
		for _, c := range cons {
			gaveUp += c.gaveUp.Load()
		}
		if giveUp {
			for i, nd := range nodes {
				nd.setDrop(nil)
				nd.d.SetAdmit(nil)
				for j := range nodes {
					if i != j {
						cons[i].dial(t, nodes[j])
						cons[j].dial(t, nd)
					}
				}
			}
			time.Sleep(2 * time.Second)
			synctest.Wait()
			require.False(t, t.Failed())
		}
		connected := make([]int, n)
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				a, b := nodes[i], nodes[j]
				ca, cb := a.d.Connected(b.id), b.d.Connected(a.id)
				require.Equal(t, ca == nil, cb == nil, "%d-%d: connected at both ends or at neither", a.id, b.id)
				ra, _ := a.peerState(b.id)
				rb, _ := b.peerState(a.id)
				if ca == nil {
					require.Zero(t, ra, "%d forgot %d", a.id, b.id)
					require.Zero(t, rb, "%d forgot %d", b.id, a.id)
					continue
				}
				connected[i]++
				connected[j]++
				require.True(t, sameConns(ca, cons[i].conn[b.id]), "%d's table", a.id)
				require.True(t, sameConns(cb, cons[j].conn[a.id]), "%d's table", b.id)
				for r := range ca {
					require.Equal(t, cb[r].QP().Num(), ca[r].QP().Query().DestQPN)
					require.Equal(t, ca[r].QP().Num(), cb[r].QP().Query().DestQPN)
				}
				transfer(t, a, b, ca[0], 2048*(i+j), byte(i*n+j))
			}
		}
		var disc int64
		for i, nd := range nodes {
			require.Equal(t, rails*connected[i], nd.qps(), "node %d: no queue pair outside a connection", i)
			if giveUp {
				require.Equal(t, n-1, connected[i], "node %d: every pair connected after the final dials", i)
			}
			disc += nd.d.Stats().Disconnected
		}
		t.Logf("connected pairs %v, disconnects %d, gave up %d", connected, disc, gaveUp)
	}
}

// The same over loopback (tcp queue pairs, the CM on udp, real timers): dial, Disconnect with the
// passive end releasing on a goroutine, re-dial from the other end, data on the new queue pairs;
// no goroutine left behind.
func TestOnDemandDisconnectRedial(t *testing.T) {
	testutil.CheckGoroutines(t)
	a, b := newODNode(t, 1, 2), newODNode(t, 2, 2)
	relB := releaseLater(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ca := a.dial(t, b)
	cb := b.dial(t, a)
	requirePaired(t, a, b, ca, cb, 2)
	transfer(t, a, b, ca[0], 0, 21)
	require.NoError(t, a.d.Disconnect(ctx, b.id))
	closeConns(ca)
	requireForgotten(t, a, b)
	require.Equal(t, int64(1), releaseCalls(relB, a.id))
	cb2 := b.dial(t, a)
	ca2 := a.dial(t, b)
	requireNewPair(t, a, b, ca2, cb2, append(ca, cb...), 2)
	transfer(t, b, a, cb2[1], 8192, 22)
	transfer(t, a, b, ca2[0], 16384, 23)
}

// A process that opens its OnDemand again (after Close, its connections closed) re-dials a
// peer that still holds a connection to it: the peer's probe finds the connection forgotten, it
// releases its end, and the new OnDemand's Dial connects.
func TestFabricOnDemandReopenRedial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := fabODNodes(t, 2, 2, fabric.Plan{})
		a, b := nodes[0], nodes[1]
		relB := releaseLater(b)
		ca := a.dial(t, b)
		cb := b.dial(t, a)
		requirePaired(t, a, b, ca, cb, 2)
		require.NoError(t, a.d.Close())
		closeConns(ca)
		d2, err := a.m.OnDemand(a.eps, a.id, odJob, nil)
		require.NoError(t, err)
		defer func() { require.NoError(t, d2.Close()) }()
		ca2, err := d2.Dial(context.Background(), b.id, b.d.Addr())
		require.NoError(t, err)
		defer closeConns(ca2)
		require.Equal(t, int64(1), releaseCalls(relB, a.id), "b released the connection a forgot")
		cb2 := b.dial(t, a)
		for i := range ca2 {
			require.Equal(t, cb2[i].QP().Num(), ca2[i].QP().Query().DestQPN)
			require.Equal(t, ca2[i].QP().Num(), cb2[i].QP().Query().DestQPN)
			require.NotSame(t, cb[i], cb2[i])
		}
		require.Equal(t, 2, a.qps())
		require.Equal(t, 2, b.qps())
		transfer(t, b, a, cb2[1], 0, 41)
	})
}

// noisyODPair is two on-demand nodes of rails rails on a fabric whose links lose 4 % of the
// packets and delay some by 10–100 µs (seeded).
func noisyODPair(t *testing.T, seed uint64, rails uint8) (a, b *odNode) {
	plan := fabric.Plan{Seed: seed}
	plan.Noise(2, rails, 0.04, fabric.Range{Min: 10 * time.Microsecond, Max: 100 * time.Microsecond})
	nodes := fabODNodes(t, 2, int(rails), plan)
	return nodes[0], nodes[1]
}
