package fabric_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/ibv/ibvtest"
)

var seeds = []uint64{1, 2, 3, 0x5eed, 0xdecafbad}

// newFabric creates a fabric in the current (bubble) test and opens a device per node; both are
// closed at cleanup.
func newFabric(t testing.TB, cfg fabric.Config) (*fabric.Fabric, []*ibv.Context) {
	t.Helper()
	f, err := fabric.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.Close()) })
	devs := make([]*ibv.Context, cfg.Nodes)
	for i := range devs {
		devs[i], err = f.Open(i)
		require.NoError(t, err)
	}
	return f, devs
}

// udPair is a UD queue pair on node 0 sending to one on node 1 with n receives posted.
type udPair struct {
	qa, qb *ibv.QP
	ah     *ibv.AH
}

func newUDPair(t *testing.T, devs []*ibv.Context, n int) *udPair {
	t.Helper()
	u := &udPair{qa: ibvtest.ConnectUD(t, devs[0], 1, 0x11), qb: ibvtest.ConnectUD(t, devs[1], 1, 0x11)}
	mr, err := u.qb.PD().RegMR(make([]byte, 64*n), ibv.AccessLocalWrite)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		require.NoError(t, u.qb.PostRecv(&ibv.RecvWR{ID: uint64(i), SGL: []ibv.SGE{mr.SGE(64*i, 64)}}))
	}
	u.ah, err = u.qa.PD().CreateAH(ibvtest.PathTo(ibvtest.QueryPort(t, devs[1], 1), 1))
	require.NoError(t, err)
	return u
}

// send posts datagram i (its index travels as immediate data).
func (u *udPair) send(t *testing.T, i int) {
	t.Helper()
	require.NoError(t, u.qa.PostSend(&ibv.SendWR{ID: uint64(i), Opcode: ibv.OpSendImm, Imm: uint32(i),
		LocalBuf: []byte("datagram"), AH: u.ah, RemoteQPN: u.qb.Num(), QKey: 0x11}))
}

// received returns the indexes of the datagrams received so far, in arrival order.
func (u *udPair) received(t *testing.T) []int {
	t.Helper()
	var out []int
	var wcs [64]ibv.WC
	for {
		k := u.qb.RecvCQ().Poll(wcs[:])
		if k == 0 {
			return out
		}
		for _, wc := range wcs[:k] {
			require.Equal(t, ibv.WCSuccess, wc.Status)
			require.True(t, wc.HasImm)
			out = append(out, int(wc.Imm))
		}
	}
}

// udLoss sends n datagrams over a link with the given rules and returns the indexes received,
// in arrival order.
func udLoss(t *testing.T, seed uint64, n int, rules ...fabric.Rule) []int {
	var got []int
	synctest.Test(t, func(t *testing.T) {
		_, devs := newFabric(t, fabric.Config{Nodes: 2, Plan: fabric.Plan{Seed: seed, Rules: rules}})
		u := newUDPair(t, devs, max(n, min(2*n, ibv.DefaultMaxRecvWR))) // room for duplicates
		for i := 0; i < n; i++ {
			u.send(t, i)
		}
		time.Sleep(time.Second) // past every delay
		synctest.Wait()         // every link idle: whatever was not lost has arrived
		got = u.received(t)
	})
	return got
}

// Loss decisions are a function of the seed and of the packet's index on its link: the same
// seed loses the same datagrams, another seed others, at about the rule's rate; a lossless
// link delivers everything in order.
func TestSeededLossIsDeterministic(t *testing.T) {
	const n = 1000
	all := udLoss(t, 1, n)
	require.Len(t, all, n)
	for i, v := range all {
		require.Equal(t, i, v, "FIFO link")
	}
	drop := fabric.Rule{Drop: 0.3}
	for _, seed := range seeds {
		a := udLoss(t, seed, n, drop)
		b := udLoss(t, seed, n, drop)
		require.Equal(t, a, b, "seed %#x: same datagrams lost", seed)
		lost := n - len(a)
		assert.InDelta(t, 0.3*n, lost, 0.08*n, "seed %#x: loss rate", seed)
		c := udLoss(t, seed+100, n, drop)
		require.NotEqual(t, a, c, "seed %#x and %#x lose the same datagrams", seed, seed+100)
	}
}

// DropEvery loses exactly every n-th packet of the link; a rule for another rail or another
// pair of nodes does nothing here.
func TestDropEvery(t *testing.T) {
	got := udLoss(t, 7, 40, fabric.Rule{DropEvery: 4, Port: 1, Src: []int{0}, Dst: []int{1}},
		fabric.Rule{Down: true, Port: 2}, fabric.Rule{Down: true, Src: []int{1}})
	var want []int
	for i := 0; i < 40; i++ {
		if (i+1)%4 != 0 {
			want = append(want, i)
		}
	}
	require.Equal(t, want, got)
}

// A delay rule holds every packet for exactly its delay of virtual time, only while it is active.
func TestDelayExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = 5 * time.Millisecond
		f, devs := newFabric(t, fabric.Config{Nodes: 2, Plan: fabric.Plan{Rules: []fabric.Rule{
			{Delay: d, From: 100 * time.Millisecond, Until: 200 * time.Millisecond}}}})
		u := newUDPair(t, devs, 8)
		u.send(t, 0)
		synctest.Wait()
		require.Equal(t, []int{0}, u.received(t), "no delay before the rule's window")
		time.Sleep(100*time.Millisecond - f.Now())
		u.send(t, 1)
		synctest.Wait()
		require.Empty(t, u.received(t))
		time.Sleep(d - time.Nanosecond)
		synctest.Wait()
		require.Empty(t, u.received(t), "one ns before the delay")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		require.Equal(t, []int{1}, u.received(t), "at the delay")
		time.Sleep(200*time.Millisecond - f.Now())
		u.send(t, 2)
		synctest.Wait()
		require.Equal(t, []int{2}, u.received(t), "no delay after the window")
	})
}

// Scheduled port events take effect at their exact fabric time: the port's state, the async
// events on the node's device, the port log; datagrams from or to the down port are lost.
func TestScheduledPortDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p fabric.Plan
		p.PortDown(1, 1, 100*time.Millisecond, 300*time.Millisecond)
		f, devs := newFabric(t, fabric.Config{Nodes: 2, Ports: 2, Plan: p})
		u := newUDPair(t, devs, 8)
		ctx := context.Background()
		ev, err := devs[1].GetAsyncEvent(ctx)
		require.NoError(t, err)
		require.Equal(t, ibv.AsyncEvent{Type: ibv.EventPortErr, Port: 1, Detail: "link down"}, ev)
		require.Equal(t, 100*time.Millisecond, f.Now(), "EventPortErr at the planned time")
		pa, err := devs[1].QueryPort(1)
		require.NoError(t, err)
		require.Equal(t, ibv.PortDown, pa.State)
		pa, err = devs[1].QueryPort(2)
		require.NoError(t, err)
		require.Equal(t, ibv.PortActive, pa.State, "the other rail")
		u.send(t, 0)
		synctest.Wait()
		require.Empty(t, u.received(t), "datagram to a down port")
		ev, err = devs[1].GetAsyncEvent(ctx)
		require.NoError(t, err)
		require.Equal(t, ibv.EventPortActive, ev.Type)
		require.Equal(t, 300*time.Millisecond, f.Now())
		u.send(t, 1)
		synctest.Wait()
		require.Equal(t, []int{1}, u.received(t))
		require.Equal(t, []fabric.PortEvent{{At: 100 * time.Millisecond, Node: 1, Port: 1, Down: true},
			{At: 300 * time.Millisecond, Node: 1, Port: 1}}, f.PortLog())
		require.True(t, f.PortDown(1, 1) == false)
		// a send from a down local port fails at once (the engine counts it as a path fault)
		require.NoError(t, f.SetPortDown(0, 1, true))
		ev, err = devs[0].GetAsyncEvent(ctx)
		require.NoError(t, err)
		require.Equal(t, ibv.EventPortErr, ev.Type)
		u.send(t, 2)
		synctest.Wait()
		require.Empty(t, u.received(t))
	})
}

// rcPair connects RC queue pairs between nodes 0 and 1 on port 1 (ACK timeout at the engine's
// 10 ms floor, 7 retries) with a patterned source MR and a zeroed target MR of size bytes.
func rcPair(t testing.TB, devs []*ibv.Context, size int) (qa, qb *ibv.QP, src, dst *ibv.MR) {
	t.Helper()
	return rcPairCap(t, devs, size, ibv.QPCap{})
}

// rcPairCap is rcPair with queue pairs of capacities cp.
func rcPairCap(t testing.TB, devs []*ibv.Context, size int, cp ibv.QPCap) (qa, qb *ibv.QP, src, dst *ibv.MR) {
	t.Helper()
	qa = ibvtest.CreateQP(t, devs[0], nil, ibv.RC, 4096, cp, true)
	qb = ibvtest.CreateQP(t, devs[1], nil, ibv.RC, 4096, cp, true)
	for _, x := range []struct {
		q, peer *ibv.QP
		dev     *ibv.Context
	}{{qa, qb, devs[1]}, {qb, qa, devs[0]}} {
		require.NoError(t, ibvtest.ModifyToInit(x.q, 1, ibv.AccessAll, 0))
		require.NoError(t, ibvtest.ModifyToRTR(x.q, ibvtest.PathTo(ibvtest.QueryPort(t, x.dev, 1), 1), x.peer.Num(), 100+x.peer.Num()))
		require.NoError(t, x.q.Modify(&ibv.QPAttr{State: ibv.StateRTS, SQPSN: 100 + x.q.Num(), Timeout: 1, RetryCnt: 7},
			ibv.AttrState|ibv.AttrSQPSN|ibv.AttrTimeout|ibv.AttrRetryCnt))
	}
	var err error
	src, err = qa.PD().RegMR(ibvtest.Pattern(9, size), ibv.AccessAll)
	require.NoError(t, err)
	dst, err = qb.PD().RegMR(make([]byte, size), ibv.AccessAll)
	require.NoError(t, err)
	return qa, qb, src, dst
}

// writeAll writes src to dst in chunks and waits for every completion; it returns the statuses.
func writeAll(t *testing.T, qa *ibv.QP, src, dst *ibv.MR, chunk int, between func(i int)) []ibv.WCStatus {
	t.Helper()
	n := len(src.Buf()) / chunk
	for i := 0; i < n; i++ {
		if between != nil {
			between(i)
		}
		require.NoError(t, qa.PostSend(&ibv.SendWR{ID: uint64(i), Opcode: ibv.OpRDMAWrite,
			SGL: []ibv.SGE{src.SGE(i*chunk, chunk)}, RemoteAddr: dst.Addr + uint64(i*chunk), RKey: dst.RKey}))
	}
	st := make([]ibv.WCStatus, n)
	for i := 0; i < n; i++ {
		wc := ibvtest.WaitWC(t, qa.SendCQ())
		require.Less(t, wc.WRID, uint64(n))
		st[wc.WRID] = wc.Status
	}
	return st
}

// RC over lossy, delayed links (background noise of a seeded plan): the engine's go-back-N
// recovers every loss, data arrive intact, and the fabric counted losses.
func TestRCOverLossyLinks(t *testing.T) {
	for _, seed := range seeds {
		t.Run("", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var p fabric.Plan
				p.Seed = seed
				p.Noise(2, 1, 0.02, fabric.Range{Min: 20 * time.Microsecond, Max: 200 * time.Microsecond})
				f, devs := newFabric(t, fabric.Config{Nodes: 2, Plan: p})
				qa, qb, src, dst := rcPair(t, devs, 1<<20)
				require.Zero(t, qa.Counters(), "a new queue pair counted nothing")
				for i, s := range writeAll(t, qa, src, dst, 16<<10, nil) {
					require.Equal(t, ibv.WCSuccess, s, "write %d", i)
				}
				require.True(t, bytes.Equal(src.Buf(), dst.Buf()), "data at the target")
				st := f.Stats(0, 1, 1)
				require.Positive(t, st.Lost, "the plan lost packets")
				require.Equal(t, st.Sent, st.Lost+st.Delivered)
				// every loss was recovered by going back: the requester counted it, the responder
				// saw the gaps (or the duplicates of a lost ACK)
				ca, cb := qa.Counters(), qb.Counters()
				require.Positive(t, ca.Retransmissions(), "%+v", ca)
				require.Positive(t, cb.OutOfSequence+cb.DuplicateRequest, "%+v", cb)
			})
		})
	}
}

// APM on the fabric: an alternate path on port 2 is loaded only while its path is up (the probe
// fails across a down port or a Down rule: EventPathMigErr); once ARMED, pulling port 1 in the
// middle of a stream migrates the queue pair (one EventPathMig) and every write lands.
func TestAPMProbeAndMigration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, devs := newFabric(t, fabric.Config{Nodes: 2, Ports: 2})
		qa, _, src, dst := rcPair(t, devs, 1<<20)
		pb2 := ibvtest.QueryPort(t, devs[1], 2)
		rearm := func() {
			require.NoError(t, qa.Modify(&ibv.QPAttr{AltAV: ibvtest.PathTo(pb2, 2), AltPortNum: 2, AltTimeout: 1,
				PathMigState: ibv.Rearm}, ibv.AttrAltPath|ibv.AttrPathMigState))
		}
		next := func() ibv.AsyncEvent {
			ev, err := devs[0].GetAsyncEvent(context.Background())
			require.NoError(t, err)
			return ev
		}
		require.NoError(t, f.SetPortDown(1, 2, true)) // the remote port of the alternate path
		rearm()
		require.Equal(t, ibv.EventPathMigErr, next().Type, "probe across a down remote port")
		require.NoError(t, f.SetPortDown(1, 2, false))
		require.NoError(t, f.Apply(fabric.Plan{Rules: []fabric.Rule{{Port: 2, Src: []int{1}, Down: true,
			Until: f.Now() + 50*time.Millisecond}}}))
		rearm()
		require.Equal(t, ibv.EventPathMigErr, next().Type, "probe across a path down one way")
		time.Sleep(50 * time.Millisecond)
		rearm()
		synctest.Wait()
		require.Equal(t, ibv.Armed, qa.Query().PathMigState)

		sts := writeAll(t, qa, src, dst, 16<<10, func(i int) {
			if i == 20 {
				require.NoError(t, f.SetPortDown(0, 1, true))
			}
		})
		for i, s := range sts {
			require.Equal(t, ibv.WCSuccess, s, "write %d", i)
		}
		require.True(t, bytes.Equal(src.Buf(), dst.Buf()))
		require.Equal(t, uint8(2), qa.Query().AV.PortNum)
		var mig int
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			ev, err := devs[0].GetAsyncEvent(ctx)
			cancel()
			if err != nil {
				break
			}
			if ev.Type == ibv.EventPathMig {
				mig++
				require.Equal(t, qa.Num(), ev.QPNum)
			}
		}
		require.Equal(t, 1, mig, "one PATH_MIG")
	})
}

// A partition longer than the retries fails the queue pair with RETRY_EXC_ERR once its retries
// ran out in virtual time (8 attempts of at least the 10 ms ACK timeout floor); the ports stay
// up (no port event) and nothing crossed the partition.
func TestPartitionFailsQP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p fabric.Plan
		p.Partition([]int{0}, []int{1}, 0, 0)
		f, devs := newFabric(t, fabric.Config{Nodes: 2, Plan: p})
		qa, _, src, dst := rcPair(t, devs, 64<<10)
		start := f.Now()
		sts := writeAll(t, qa, src, dst, 16<<10, nil)
		require.Equal(t, ibv.WCRetryExcErr, sts[0])
		for _, s := range sts[1:] {
			require.Equal(t, ibv.WCWRFlushErr, s)
		}
		took := f.Now() - start
		require.GreaterOrEqual(t, took, 80*time.Millisecond)
		require.Less(t, took, time.Second)
		require.Equal(t, ibv.StateError, qa.State())
		pa, err := devs[0].QueryPort(1)
		require.NoError(t, err)
		require.Equal(t, ibv.PortActive, pa.State)
		require.Zero(t, f.Stats(0, 1, 1).Delivered)
	})
}

// Bad input: clear errors, nothing changed.
func TestErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, err := fabric.New(fabric.Config{Ports: 33})
		require.ErrorIs(t, err, ibv.ErrInvalidArgument)
		_, err = fabric.New(fabric.Config{Plan: fabric.Plan{Rules: []fabric.Rule{{Drop: 2}}}})
		require.ErrorIs(t, err, ibv.ErrInvalidArgument)
		f, devs := newFabric(t, fabric.Config{Nodes: 2, Ports: 2})
		_, err = f.Open(0)
		require.ErrorIs(t, err, ibv.ErrBusy)
		_, err = f.Open(5)
		require.ErrorIs(t, err, ibv.ErrInvalidArgument)
		require.ErrorIs(t, f.SetPortDown(0, 3, true), ibv.ErrInvalidArgument)
		require.ErrorIs(t, f.Apply(fabric.Plan{Events: []fabric.PortEvent{{Node: 9, Port: 1}}}), ibv.ErrInvalidArgument)
		addr, err := f.Addr(1, 2)
		require.NoError(t, err)
		pa, err := devs[1].QueryPort(2)
		require.NoError(t, err)
		require.Equal(t, addr, pa.Addr)
		// a device closes and its node opens again
		require.NoError(t, devs[1].Close())
		d, err := f.Open(1)
		require.NoError(t, err)
		require.NoError(t, d.Close())
		require.True(t, errors.Is(f.SetPortDown(-1, 1, true), ibv.ErrInvalidArgument))
	})
}
