package fabric_test

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/ibv/ibvtest"
)

func hop(rail uint8, from, to fabric.Vertex) fabric.Hop {
	return fabric.Hop{Rail: rail, From: from, To: to}
}

// spines returns the spines of a route (none on one leaf).
func spines(r []fabric.Hop) []int {
	var out []int
	for _, h := range r {
		if h.To.Kind == fabric.KindSpine {
			out = append(out, h.To.Index)
		}
	}
	return out
}

// Routing is a pure function of the pair, the rail and the destination path bits: host→leaf,
// leaf→spine (dst + bits) mod Spines, spine→leaf, leaf→host; no spine within a leaf; nothing to
// oneself.
func TestFatTreeRoute(t *testing.T) {
	ft := &fabric.FatTree{Leaves: 4, Spines: 4, HostsPerLeaf: 4}
	for _, c := range []struct {
		src, dst int
		bits     uint8
		want     []fabric.Hop
	}{
		{0, 0, 0, nil},
		{0, 1, 3, []fabric.Hop{hop(2, fabric.Host(0), fabric.Leaf(0)), hop(2, fabric.Leaf(0), fabric.Host(1))}},
		{0, 5, 0, []fabric.Hop{hop(2, fabric.Host(0), fabric.Leaf(0)), hop(2, fabric.Leaf(0), fabric.Spine(1)),
			hop(2, fabric.Spine(1), fabric.Leaf(1)), hop(2, fabric.Leaf(1), fabric.Host(5))}},
		{15, 2, 3, []fabric.Hop{hop(2, fabric.Host(15), fabric.Leaf(3)), hop(2, fabric.Leaf(3), fabric.Spine(1)),
			hop(2, fabric.Spine(1), fabric.Leaf(0)), hop(2, fabric.Leaf(0), fabric.Host(2))}},
	} {
		got := ft.Route(2, c.src, c.dst, c.bits)
		require.Equal(t, c.want, got, "%d→%d bits %d", c.src, c.dst, c.bits)
		require.Equal(t, got, ft.Route(2, c.src, c.dst, c.bits), "deterministic")
	}

	// the 2^LMC paths of every pair on different leaves take distinct spines when Spines ≥ 2^LMC
	for _, lmc := range []uint8{0, 1, 2} {
		for src := 0; src < ft.Hosts(); src++ {
			for dst := 0; dst < ft.Hosts(); dst++ {
				if ft.LeafOf(src) == ft.LeafOf(dst) {
					require.Empty(t, spines(ft.Route(1, src, dst, 0)), "same leaf: no spine")
					continue
				}
				seen := map[int]bool{}
				for b := 0; b < 1<<lmc; b++ {
					s := spines(ft.Route(1, src, dst, uint8(b)))
					require.Len(t, s, 1)
					require.False(t, seen[s[0]], "%d→%d: path bits %d reuse spine %d", src, dst, b, s[0])
					seen[s[0]] = true
				}
			}
		}
	}
	// fewer spines than paths: path bits b and b+Spines share a spine
	ft2 := &fabric.FatTree{Leaves: 2, Spines: 2, HostsPerLeaf: 2}
	require.Equal(t, spines(ft2.Route(1, 0, 3, 0)), spines(ft2.Route(1, 0, 3, 2)))
	require.NotEqual(t, spines(ft2.Route(1, 0, 3, 0)), spines(ft2.Route(1, 0, 3, 1)))

	// a shift by one leaf (every host of leaf 0 to its counterpart on leaf 1) is contention free
	// when HostsPerLeaf ≤ Spines: the pairs' leaf↔spine links are disjoint
	used := map[fabric.Hop]int{}
	for i := 0; i < 4; i++ {
		for _, h := range ft.Route(1, i, 4+i, 0) {
			used[h]++
		}
	}
	for h, n := range used {
		if h.From.Kind == fabric.KindSpine || h.To.Kind == fabric.KindSpine {
			require.Equal(t, 1, n, "%v shared", h)
		}
	}
	// destinations 5 and 9 (≡ 1 mod 4) from leaf 0 collide on leaf0→spine1, then part
	r1, r2 := ft.Route(1, 0, 5, 0), ft.Route(1, 1, 9, 0)
	require.Equal(t, r1[1], r2[1])
	require.Equal(t, hop(1, fabric.Leaf(0), fabric.Spine(1)), r1[1])
	require.NotEqual(t, r1[2], r2[2])
	// ... and a path bit moves one of them off it
	require.NotEqual(t, r1[1], ft.Route(1, 1, 9, 1)[1])

	// a custom spine choice (e.g. by source)
	ft3 := &fabric.FatTree{Leaves: 2, Spines: 4, HostsPerLeaf: 4, Spine: func(src, dst int, bits uint8) int { return src % 4 }}
	require.Equal(t, []int{3}, spines(ft3.Route(1, 3, 4, 0)))
}

// The fabric's own routing: its errors, its hops, and routes a packet actually takes (the byte
// counters of the hops it crosses move, and only those).
func TestFabricRouteAndHops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, err := fabric.New(fabric.Config{Nodes: 9, Topology: &fabric.FatTree{Leaves: 2, Spines: 2, HostsPerLeaf: 4}})
		require.ErrorIs(t, err, ibv.ErrInvalidArgument, "more nodes than hosts")
		_, err = fabric.New(fabric.Config{Nodes: 2, Topology: &fabric.FatTree{Leaves: 2, HostsPerLeaf: 4}})
		require.ErrorIs(t, err, ibv.ErrInvalidArgument, "two leaves, no spine")

		plain, _ := newFabric(t, fabric.Config{Nodes: 2})
		_, err = plain.Route(0, 1, 1, 0)
		require.ErrorIs(t, err, fabric.ErrNoTopology)
		require.ErrorIs(t, plain.SetHopDown(hop(1, fabric.Leaf(0), fabric.Spine(0)), true), fabric.ErrNoTopology)
		require.Nil(t, plain.Hops())

		ft := &fabric.FatTree{Leaves: 2, Spines: 2, HostsPerLeaf: 2, LinkRate: 1e9, LinkLatency: time.Microsecond}
		f, devs := newFabric(t, fabric.Config{Nodes: 4, Ports: 2, LMC: 1, Topology: ft})
		require.Len(t, f.Hops(), 2*(2*4+2*2*2))
		r, err := f.Route(0, 3, 2, 1)
		require.NoError(t, err)
		require.Equal(t, ft.Route(2, 0, 3, 1), r)
		_, err = f.Route(0, 3, 3, 0)
		require.ErrorIs(t, err, ibv.ErrInvalidArgument, "rail 3 of 2")
		_, err = f.Route(0, 3, 1, 2)
		require.ErrorIs(t, err, ibv.ErrInvalidArgument, "path bits 2 with LMC 1")
		_, err = f.HopStats(hop(1, fabric.Leaf(0), fabric.Host(3)))
		require.ErrorIs(t, err, fabric.ErrNoHop, "host 3 hangs on leaf 1")
		require.ErrorIs(t, f.SetHopRate(hop(1, fabric.Leaf(0), fabric.Spine(1)), -1), ibv.ErrInvalidArgument)
		extra := f.AddNode()
		_, err = f.Route(0, extra, 1, 0)
		require.ErrorIs(t, err, ibv.ErrUnreachable, "a node beyond the tree")

		// one datagram 0→3 with path bits 1 on rail 2 crosses exactly Route's hops
		u := udFlow(t, devs, 0, 3, 2, 1)
		u.send(t, 1, 100)
		synctest.Wait()
		time.Sleep(time.Millisecond)
		synctest.Wait()
		on := map[fabric.Hop]bool{}
		for _, h := range r {
			on[h] = true
		}
		for _, h := range f.Hops() {
			st, err := f.HopStats(h)
			require.NoError(t, err)
			if on[h] {
				require.Equal(t, uint64(1), st.Packets, "%v", h)
			} else {
				require.Zero(t, st.Packets, "%v", h)
			}
		}
		require.Equal(t, uint64(1), f.Stats(0, 3, 2).Delivered)

		// cut-through on an idle route of 4 hops: 4 latencies and one serialization (1 ns/B)
		wire := time.Duration(pktSize(t, f, r[0]))
		u.send(t, 1, 100)
		time.Sleep(4*time.Microsecond + wire - time.Nanosecond)
		synctest.Wait()
		require.Equal(t, uint64(1), f.Stats(0, 3, 2).Delivered, "1 ns early")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		require.Equal(t, uint64(2), f.Stats(0, 3, 2).Delivered, "at 4·L + b/R")
	})
}

// flow is a UD queue pair of node src sending datagrams to one of node dst (no receives posted:
// the fabric counts what it delivers) on a rail with destination and source path bits bits.
type flow struct {
	qp     *ibv.QP
	ah     *ibv.AH
	remote uint32
}

func udFlow(t *testing.T, devs []*ibv.Context, src, dst int, rail, bits uint8) *flow {
	t.Helper()
	qa, qb := ibvtest.ConnectUD(t, devs[src], rail, 0x11), ibvtest.ConnectUD(t, devs[dst], rail, 0x11)
	pa := ibvtest.QueryPort(t, devs[dst], rail)
	ah, err := qa.PD().CreateAH(ibv.AHAttr{Addr: pa.Addr, DLID: pa.LID + uint16(bits), SrcPathBits: bits, PortNum: rail})
	require.NoError(t, err)
	return &flow{qp: qa, ah: ah, remote: qb.Num()}
}

// send posts n datagrams of size bytes (at once: a saturating flow).
func (u *flow) send(t *testing.T, n, size int) {
	t.Helper()
	buf := make([]byte, size)
	for i := 0; i < n; i++ {
		require.NoError(t, u.qp.PostSend(&ibv.SendWR{ID: uint64(i), Opcode: ibv.OpSend, LocalBuf: buf, AH: u.ah,
			RemoteQPN: u.remote, QKey: 0x11}))
	}
}

// pktSize is the size on the wire of the datagrams of udFlow.send (read from a hop's counters).
func pktSize(t *testing.T, f *fabric.Fabric, h fabric.Hop) uint64 {
	t.Helper()
	st, err := f.HopStats(h)
	require.NoError(t, err)
	require.Positive(t, st.Packets)
	require.Zero(t, st.Bytes%st.Packets, "one size")
	return st.Bytes / st.Packets
}

// The capacity of a hop is exact and shared fairly: two saturating flows whose routes share one
// leaf→spine link (one spine) each get half of it, to a packet, at any virtual time; the link
// is busy from its first packet on and has carried exactly rate·time bytes. With two spines the
// same flows take disjoint spines and each gets the whole rate; with path bits that bring one of
// them onto the other's spine they share again. Slowing the shared link (a hot spot) slows both.
func TestFairShareExact(t *testing.T) {
	const (
		rate = int64(1e9) // 1 ns per byte
		lat  = time.Microsecond
		n    = 600
		size = 2000
	)
	type result struct{ a, b uint64 }
	sizeB := size // the datagram size of flow b
	var wireB uint64
	run := func(t *testing.T, spinesN int, bitsA, bitsB uint8, slow bool) (res result, bottleneck fabric.HopStats, wire uint64) {
		synctest.Test(t, func(t *testing.T) {
			ft := &fabric.FatTree{Leaves: 2, Spines: spinesN, HostsPerLeaf: 2, LinkRate: rate, LinkLatency: lat}
			f, devs := newFabric(t, fabric.Config{Nodes: 4, LMC: 1, Topology: ft})
			shared := hop(1, fabric.Leaf(0), fabric.Spine(0))
			if slow {
				require.NoError(t, f.SetHopRate(shared, rate/2))
			}
			a, b := udFlow(t, devs, 0, 2, 1, bitsA), udFlow(t, devs, 1, 3, 1, bitsB)
			start := f.Now()
			a.send(t, n, size)
			b.send(t, n*size/sizeB, sizeB)
			time.Sleep(time.Millisecond)
			synctest.Wait()
			require.Equal(t, start+time.Millisecond, f.Now())
			res = result{f.Stats(0, 2, 1).Delivered, f.Stats(1, 3, 1).Delivered}
			rs, err := f.Route(0, 2, 1, bitsA)
			require.NoError(t, err)
			bottleneck, err = f.HopStats(rs[1])
			require.NoError(t, err)
			wire = pktSize(t, f, rs[0])
			wireB = pktSize(t, f, hop(1, fabric.Host(1), fabric.Leaf(0)))
		})
		return
	}
	t.Run("shared", func(t *testing.T) {
		got, st, wire := run(t, 1, 0, 0, false)
		// busy from the first head's arrival (lat), one packet per wire ns
		want := uint64((time.Millisecond - lat) / time.Duration(wire))
		require.Equal(t, want, st.Packets, "work conserving at exactly the rate")
		require.Equal(t, want*wire, st.Bytes)
		require.Equal(t, time.Duration(st.Bytes), st.Busy)
		t.Logf("bottleneck %d packets of %d B; delivered %+v", st.Packets, wire, got)
		require.LessOrEqual(t, max(got.a, got.b)-min(got.a, got.b), uint64(1), "half each: %+v", got)
		require.InDelta(t, float64(want), float64(got.a+got.b), 3, "the rest is in the pipeline")
		require.Positive(t, st.Queued, "still saturated")
	})
	t.Run("disjoint", func(t *testing.T) {
		got, st, wire := run(t, 2, 0, 0, false) // 0→2 by spine 0, 1→3 by spine 1
		full := uint64((time.Millisecond - 4*lat) / time.Duration(wire))
		require.InDelta(t, float64(full), float64(got.a), 1, "the whole rate")
		require.InDelta(t, float64(full), float64(got.b), 1, "the whole rate")
		require.Zero(t, st.Queued)
	})
	t.Run("path-bits-collide", func(t *testing.T) {
		got, _, _ := run(t, 2, 1, 0, false) // 0→2 bits 1: spine 1, as 1→3 bits 0
		require.LessOrEqual(t, max(got.a, got.b)-min(got.a, got.b), uint64(1), "%+v", got)
		full, _, _ := run(t, 2, 0, 0, false)
		require.InDelta(t, float64(full.a), float64(got.a+got.b), 4)
	})
	t.Run("hot-spot", func(t *testing.T) {
		got, st, wire := run(t, 1, 0, 0, true)
		want := uint64((time.Millisecond - lat) / time.Duration(2*wire))
		require.Equal(t, want, st.Packets, "half the rate")
		require.Equal(t, time.Duration(2*st.Bytes), st.Busy)
		require.LessOrEqual(t, max(got.a, got.b)-min(got.a, got.b), uint64(1), "%+v", got)
	})
	// deficit round robin is fair in bytes: a flow of datagrams a quarter the size gets the same
	// bytes, four times the packets (to a quantum, one MTU and headers)
	t.Run("bytes-not-packets", func(t *testing.T) {
		sizeB = size / 4
		defer func() { sizeB = size }()
		got, st, wire := run(t, 1, 0, 0, false)
		ba, bb := got.a*wire, got.b*wireB
		require.InDelta(t, float64(ba), float64(bb), 4096+256+float64(wire), "bytes %d and %d", ba, bb)
		require.Greater(t, got.b, 3*got.a)
		// busy since the first head, 1 ns per byte: all but the packet on the wire at 1 ms
		require.LessOrEqual(t, st.Bytes, uint64(time.Millisecond-lat))
		require.Greater(t, st.Bytes, uint64(time.Millisecond-lat)-wire)
		require.Equal(t, time.Duration(st.Bytes), st.Busy)
	})
}

// A leaf→spine hop down: packets of the routes that cross it are lost (counted on the hop),
// path probes across it fail, and an RC queue pair whose primary path crosses it migrates to an
// alternate path on other path bits, through the other spine (APM [Vishnu07 ch. 9]); scheduled
// hop events take effect at their exact time.
func TestHopDownMigrates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ft := &fabric.FatTree{Leaves: 2, Spines: 2, HostsPerLeaf: 1, LinkRate: 1e9, LinkLatency: time.Microsecond}
		var p fabric.Plan
		cut := hop(1, fabric.Leaf(1), fabric.Spine(1))
		p.CableDown(cut, 10*time.Millisecond, 20*time.Millisecond)
		f, devs := newFabric(t, fabric.Config{Nodes: 2, LMC: 1, Topology: ft, Plan: p})
		time.Sleep(10 * time.Millisecond)
		synctest.Wait() // the scheduled events of this instant have run
		for _, h := range []fabric.Hop{cut, cut.Reverse()} {
			st, err := f.HopStats(h)
			require.NoError(t, err)
			require.True(t, st.Down, "%v at 10 ms", h)
		}
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		st, err := f.HopStats(cut)
		require.NoError(t, err)
		require.False(t, st.Down, "back at 20 ms")

		qa, _, src, dst := rcPair(t, devs, 1<<20)
		primary, err := f.Route(0, 1, 1, 0)
		require.NoError(t, err)
		require.Equal(t, []int{1}, spines(primary))
		alt, err := f.Route(0, 1, 1, 1)
		require.NoError(t, err)
		require.Equal(t, []int{0}, spines(alt))
		pb := ibvtest.QueryPort(t, devs[1], 1)
		rearm := func() {
			require.NoError(t, qa.Modify(&ibv.QPAttr{AltAV: ibv.AHAttr{Addr: pb.Addr, DLID: pb.LID + 1, SrcPathBits: 1, PortNum: 1},
				AltPortNum: 1, AltTimeout: 1, PathMigState: ibv.Rearm}, ibv.AttrAltPath|ibv.AttrPathMigState))
		}
		next := func() ibv.AsyncEvent {
			ev, err := devs[0].GetAsyncEvent(context.Background())
			require.NoError(t, err)
			return ev
		}
		require.NoError(t, f.SetHopDown(alt[1], true))
		rearm()
		require.Equal(t, ibv.EventPathMigErr, next().Type, "probe across a down hop")
		require.NoError(t, f.SetHopDown(alt[1], false))
		rearm()
		synctest.Wait()
		require.Equal(t, ibv.Armed, qa.Query().PathMigState)

		sts := writeAll(t, qa, src, dst, 16<<10, func(i int) {
			if i == 20 {
				require.NoError(t, f.SetHopDown(primary[1], true))
			}
		})
		for i, s := range sts {
			require.Equal(t, ibv.WCSuccess, s, "write %d", i)
		}
		require.True(t, bytes.Equal(src.Buf(), dst.Buf()))
		require.Equal(t, ibv.Migrated, qa.Query().PathMigState)
		st, err = f.HopStats(primary[1])
		require.NoError(t, err)
		require.Positive(t, st.Lost, "packets lost on the down hop")
		require.Equal(t, ibv.EventPathMig, next().Type)
	})
}
