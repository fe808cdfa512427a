package fabric_test

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/ibv/ibvtest"
)

const (
	hcaLat  = time.Microsecond
	hcaMiss = 700 * time.Nanosecond
	hcaConn = 1500 * time.Nanosecond
)

// hcaTree is a one-switch tree of n hosts with the HCA model m.
func hcaTree(n int, m fabric.HCAModel) fabric.Config {
	return fabric.Config{Nodes: n, Topology: &fabric.FatTree{Leaves: 1, HostsPerLeaf: n, LinkRate: 1e9,
		LinkLatency: hcaLat, HostGap: 200 * time.Nanosecond, HCA: m}}
}

// rcWrites connects k RC queue pairs from node 0 to node 1 and writes 8 bytes over them
// round-robin, rounds times; with burst every round posts its k writes at once and then waits
// for them, else it waits for each write before the next. It returns the virtual time of every
// round.
func rcWrites(t *testing.T, f *fabric.Fabric, devs []*ibv.Context, k, rounds int, burst bool) []time.Duration {
	t.Helper()
	qps := make([]*ibv.QP, k)
	mrs := make([]*ibv.MR, k)
	for i := range qps {
		var qb *ibv.QP
		qps[i], qb = ibvtest.ConnectRCWith(t, devs[0], devs[1], ibvtest.RCOptions{SigAll: true})
		mrs[i] = ibvtest.RegMR(t, memProvider, qb.PD(), 8, ibv.AccessAll, nil)
	}
	var times []time.Duration
	for r := range rounds {
		t0 := f.Now()
		for i, q := range qps {
			require.NoError(t, q.PostSend(&ibv.SendWR{ID: uint64(r*k + i), Opcode: ibv.OpRDMAWrite,
				LocalBuf: []byte{byte(r), byte(i), 1, 2, 3, 4, 5, 6}, RemoteAddr: mrs[i].Addr, RKey: mrs[i].RKey}))
			if !burst {
				ibvtest.WaitOK(t, q.SendCQ(), uint64(r*k+i))
			}
		}
		if burst {
			for i, q := range qps {
				ibvtest.WaitOK(t, q.SendCQ(), uint64(r*k+i))
			}
		}
		times = append(times, f.Now()-t0)
	}
	for i, mr := range mrs {
		require.Equal(t, []byte{byte(rounds - 1), byte(i), 1, 2, 3, 4, 5, 6}, mr.Buf())
	}
	return times
}

func hcaStats(t *testing.T, f *fabric.Fabric, node int) fabric.HCAStats {
	t.Helper()
	s, err := f.HCAStats(node)
	require.NoError(t, err)
	return s
}

// The zero HCAModel changes nothing: no lookup, the times of the fabric without it. With a
// cache large enough, a write's first packets miss at both ends (the request's sender and
// receiver; the ACK finds its contexts cached), which adds exactly two miss penalties to the
// first write and nothing to the next ones.
func TestHCAMissAddsPenalty(t *testing.T) {
	run := func(m fabric.HCAModel) (times []time.Duration, s0, s1 fabric.HCAStats) {
		synctest.Test(t, func(t *testing.T) {
			f, devs := newFabric(t, hcaTree(2, m))
			times = rcWrites(t, f, devs, 1, 3, false)
			s0, s1 = hcaStats(t, f, 0), hcaStats(t, f, 1)
		})
		return
	}
	off, s0, s1 := run(fabric.HCAModel{})
	require.Zero(t, s0)
	require.Zero(t, s1)
	require.Equal(t, off[1], off[2], "a write's time is steady")
	on, s0, s1 := run(fabric.HCAModel{QPCache: 4, MissPenalty: hcaMiss})
	require.Equal(t, []time.Duration{off[0] + 2*hcaMiss, off[1], off[2]}, on)
	require.Equal(t, fabric.HCAStats{Lookups: 6, Misses: 1}, s0, "3 writes, 3 ACKs")
	require.Equal(t, fabric.HCAStats{Lookups: 6, Misses: 1}, s1)
	// a DC connect cost alone charges no RC packet
	conn, _, _ := run(fabric.HCAModel{DCConnect: hcaConn})
	require.Equal(t, off, conn)
}

// With a cache of 2 contexts, 3 RC queue pairs used round-robin miss on every packet at the
// origin (each round's writes leave before their ACKs return: each ACK, too, finds its context
// evicted); 2 queue pairs miss only while the cache warms up.
func TestHCAThrashingRoundRobin(t *testing.T) {
	const rounds = 5
	m := fabric.HCAModel{QPCache: 2, MissPenalty: hcaMiss}
	synctest.Test(t, func(t *testing.T) {
		f, devs := newFabric(t, hcaTree(2, m))
		rcWrites(t, f, devs, 3, rounds, true)
		s := hcaStats(t, f, 0)
		tx, rx, _ := f.PortStats(0, 1)
		require.Equal(t, tx+rx, s.Lookups, "every packet of the node is looked up")
		require.Equal(t, uint64(2*3*rounds), s.Lookups, "a write and its ACK per queue pair and round")
		require.Equal(t, s.Lookups, s.Misses, "every packet misses")
		require.Equal(t, s.Misses, hcaStats(t, f, 1).Misses, "so does the target's every packet")
	})
	synctest.Test(t, func(t *testing.T) {
		f, devs := newFabric(t, hcaTree(2, m))
		times := rcWrites(t, f, devs, 2, rounds, true)
		for node := range 2 {
			s := hcaStats(t, f, node)
			require.Equal(t, uint64(2*2*rounds), s.Lookups)
			require.Equal(t, uint64(2), s.Misses, "the first packet of each queue pair")
		}
		for _, d := range times[1:] {
			require.Equal(t, times[1], d, "no miss after the warm-up")
		}
	})
}

// A DC initiator pays a connect for every request to another target than its previous one,
// and nothing for more requests to the same target; a DC target pays one for every request
// from another initiator than its previous one. A DC queue pair is one context of the cache, or
// one per peer with DCContextPerPeer.
func TestHCADCConnects(t *testing.T) {
	for _, perPeer := range []bool{false, true} {
		t.Run(fmt.Sprintf("per-peer=%v", perPeer), func(t *testing.T) { testHCADCConnects(t, perPeer) })
	}
}

func testHCADCConnects(t *testing.T, perPeer bool) {
	m := fabric.HCAModel{QPCache: 8, MissPenalty: hcaMiss, DCConnect: hcaConn, DCContextPerPeer: perPeer}
	synctest.Test(t, func(t *testing.T) {
		f, devs := newFabric(t, hcaTree(4, m))
		qa := ibvtest.ConnectDC(t, devs[0], nil, 1, ibv.AccessAll)
		targets := ibvtest.DCTargets(t, memProvider, qa, devs[1:3], 1, 64)
		write := func(id uint64, d ibvtest.DCTarget, wait bool) {
			require.NoError(t, qa.PostSend(d.WR(ibv.SendWR{ID: id, Flags: ibv.SendSignaled, Opcode: ibv.OpRDMAWrite,
				LocalBuf: []byte{byte(id)}}, int(id))))
			if wait {
				ibvtest.WaitOK(t, qa.SendCQ(), id)
			}
		}
		// alternating targets: a connect per request
		for i := range 6 {
			write(uint64(i), targets[i%2], true)
		}
		s := hcaStats(t, f, 0)
		require.Equal(t, uint64(6), s.Connects)
		if perPeer {
			require.Equal(t, uint64(2), s.Misses, "one context per target")
		} else {
			require.Equal(t, uint64(1), s.Misses, "one context")
		}
		require.Equal(t, uint64(12), s.Lookups)
		// one target: one connect
		t0 := f.Now()
		for i := 6; i < 10; i++ {
			write(uint64(i), targets[0], true)
		}
		require.Equal(t, uint64(7), hcaStats(t, f, 0).Connects)
		one := f.Now() - t0
		t0 = f.Now()
		for i := 10; i < 14; i++ {
			write(uint64(i), targets[i%2], true)
		}
		require.Equal(t, uint64(10), hcaStats(t, f, 0).Connects)
		require.Equal(t, one+2*hcaConn, f.Now()-t0, "3 connects instead of 1, each on the initiator's link")
		for i := range 14 {
			want := targets[0]
			if i < 6 && i%2 == 1 || i >= 10 && i%2 == 1 {
				want = targets[1]
			}
			require.Equal(t, byte(i), want.MR.Buf()[i], "write %d", i)
		}
		require.Zero(t, hcaStats(t, f, 1).Connects, "a target's ACKs connect nothing")
		require.Equal(t, uint64(1), hcaStats(t, f, 1).Accepts, "one initiator")

		// two initiators alternating on one target: an accept per request
		qc := ibvtest.ConnectDC(t, devs[3], nil, 1, ibv.AccessAll)
		other := ibvtest.DCTargets(t, memProvider, qc, devs[1:2], 1, 64)[0]
		other.MR = targets[0].MR
		other.QP = targets[0].QP
		for i := range 4 {
			if i%2 == 0 {
				write(uint64(40+i), targets[0], true)
				continue
			}
			require.NoError(t, qc.PostSend(other.WR(ibv.SendWR{ID: uint64(40 + i), Flags: ibv.SendSignaled,
				Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{byte(40 + i)}}, 40+i)))
			ibvtest.WaitOK(t, qc.SendCQ(), uint64(40+i))
		}
		require.Equal(t, uint64(1+3), hcaStats(t, f, 1).Accepts)
		require.Equal(t, []byte{40, 41, 42, 43}, targets[0].MR.Buf()[40:44])
	})
}

// A negative field is refused; HCAStats needs a topology and a node.
func TestHCAErrors(t *testing.T) {
	for _, m := range []fabric.HCAModel{{QPCache: -1}, {MissPenalty: -1}, {DCConnect: -1}} {
		_, err := fabric.New(hcaTree(2, m))
		require.ErrorIs(t, err, ibv.ErrInvalidArgument, "%+v", m)
	}
	synctest.Test(t, func(t *testing.T) {
		f, err := fabric.New(fabric.Config{Nodes: 1})
		require.NoError(t, err)
		_, err = f.HCAStats(0)
		require.True(t, errors.Is(err, fabric.ErrNoTopology))
		require.NoError(t, f.Close())
		f, err = fabric.New(hcaTree(2, fabric.HCAModel{QPCache: 1}))
		require.NoError(t, err)
		_, err = f.HCAStats(2)
		require.ErrorIs(t, err, ibv.ErrInvalidArgument)
		require.NoError(t, f.Close())
	})
}
