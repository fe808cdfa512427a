package fabric_test

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/ibv/ibvtest"
)

// memProvider is what ibvtest's helpers need to register memory (any Go memory).
var memProvider = ibvtest.Funcs{}

// The DC queue pair's exactly-once guarantee under seeded loss, duplication and reordering on
// every link: two initiators run DCExactlyOnce at once — atomics (fetch-add and compare-and-swap,
// 32 and 64 bits), accumulates, writes and reads, messages of 4 packets at a 1 KiB path MTU — each
// to the same 3 DC QPs (one→many and many→one), each in its own windows; every fetched value and
// the final memory are exact, so no atomic or accumulate was applied twice although the
// responders saw duplicates and the requesters retransmitted.
func TestDCExactlyOnceUnderFaults(t *testing.T) {
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed%#x", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const mtu, msg = 1024, 3*1024 + 200
				plan := fabric.Plan{Seed: seed, Rules: []fabric.Rule{
					{Drop: 0.04, Duplicate: 0.05, Reorder: 0.05, ReorderBy: 300 * time.Microsecond}}}
				f, devs := newFabric(t, fabric.Config{Nodes: 5, MTU: mtu, Plan: plan})
				qa := ibvtest.ConnectDC(t, devs[0], nil, 1, ibv.AccessAll)
				qb := ibvtest.ConnectDC(t, devs[1], nil, 1, ibv.AccessAll)
				ta := ibvtest.DCTargets(t, memProvider, qa, devs[2:], 1, ibvtest.DCWindow(msg))
				tb := make([]ibvtest.DCTarget, len(ta))
				for i, d := range ta {
					tb[i] = d.Window(t, memProvider, qb, 1, ibvtest.DCWindow(msg))
				}
				wa := ibvtest.PostDCWorkload(t, qa, ta, 16, msg)
				wb := ibvtest.PostDCWorkload(t, qb, tb, 16, msg)
				wa.Check(t)
				wb.Check(t)

				var lost, sent uint64
				var dups uint64
				for i, d := range ta {
					for _, st := range []fabric.LinkStats{f.Stats(0, i+2, 1), f.Stats(i+2, 0, 1), f.Stats(1, i+2, 1), f.Stats(i+2, 1, 1)} {
						lost += st.Lost
						sent += st.Sent
					}
					dups += d.QP.Counters().DuplicateRequest
				}
				rtx := qa.Counters().Retransmissions() + qb.Counters().Retransmissions()
				t.Logf("%d packets sent, %d lost, %d duplicate requests suppressed, %d go-back-N retransmissions",
					sent, lost, dups, rtx)
				require.Positive(t, lost, "the plan lost packets")
				require.Positive(t, dups, "responders saw duplicates")
				require.Positive(t, rtx, "the requester retransmitted")
				assert.Equal(t, ibv.StateRTS, qa.State())
				assert.Equal(t, ibv.StateRTS, qb.State())
			})
		})
	}
}

// A message longer than the path MTU is carried as path-MTU packets (application-level
// fragmentation: a datagram never exceeds the MTU) and lands whole.
func TestDCFragmentsToPathMTU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const mtu, msg = 512, 10*512 + 3
		f, devs := newFabric(t, fabric.Config{Nodes: 2, MTU: mtu})
		qa := ibvtest.ConnectDC(t, devs[0], nil, 1, ibv.AccessAll)
		d := ibvtest.DCTargets(t, memProvider, qa, devs[1:], 1, msg)[0]
		src := ibvtest.Pattern(42, msg)
		before := f.Stats(0, 1, 1).Sent
		require.NoError(t, qa.PostSend(d.WR(ibv.SendWR{ID: 1, Flags: ibv.SendSignaled, Opcode: ibv.OpRDMAWrite, LocalBuf: src}, 0)))
		ibvtest.WaitOK(t, qa.SendCQ(), 1)
		ibvtest.SameBytes(t, "written", src, d.MR.Buf())
		assert.Equal(t, uint64(11), f.Stats(0, 1, 1).Sent-before, "⌈%d/%d⌉ request packets", msg, mtu)
		back := make([]byte, msg)
		require.NoError(t, qa.PostSend(d.WR(ibv.SendWR{ID: 2, Flags: ibv.SendSignaled, Opcode: ibv.OpRDMARead, LocalBuf: back}, 0)))
		ibvtest.WaitOK(t, qa.SendCQ(), 2)
		ibvtest.SameBytes(t, "read", src, back)
	})
}

// A dead peer (partitioned from the start) ends in WCRetryExcErr for its own requests only —
// the first, then WCWRFlushErr for the rest, and for requests posted to it later — while the
// DC QP stays in RTS and its other peers complete everything, before and after.
func TestDCDeadPeerFailsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var plan fabric.Plan
		plan.Partition([]int{0}, []int{3}, 0, 0)
		_, devs := newFabric(t, fabric.Config{Nodes: 4, Plan: plan})
		qa := ibvtest.ConnectDC(t, devs[0], nil, 1, ibv.AccessAll)
		win := ibvtest.DCWindow(64)
		targets := ibvtest.DCTargets(t, memProvider, qa, devs[1:], 1, win+64)
		const k = 3
		for i := 0; i < k; i++ {
			for j, d := range targets {
				wr := d.WR(ibv.SendWR{ID: uint64(10*j + i), Flags: ibv.SendSignaled, Opcode: ibv.OpRDMAWrite,
					LocalBuf: []byte{byte(j), byte(i)}}, win+2*i)
				require.NoError(t, qa.PostSend(wr))
			}
		}
		var dead []ibv.WC
		for range k * len(targets) {
			wc := ibvtest.WaitWC(t, qa.SendCQ())
			if wc.WRID >= 20 {
				dead = append(dead, wc)
				continue
			}
			require.Equal(t, ibv.WCSuccess, wc.Status, "WR %d to a live peer", wc.WRID)
		}
		require.Len(t, dead, k)
		assert.Equal(t, ibv.WCRetryExcErr, dead[0].Status)
		assert.ErrorIs(t, &ibv.WCError{Status: dead[0].Status}, ibv.ErrRetryExceeded)
		for _, wc := range dead[1:] {
			assert.Equal(t, ibv.WCWRFlushErr, wc.Status)
		}
		assert.Equal(t, ibv.StateRTS, qa.State(), "the DC QP outlives one dead peer")
		for j, d := range targets[:2] {
			for i := 0; i < k; i++ {
				assert.Equal(t, []byte{byte(j), byte(i)}, d.MR.Buf()[win+2*i:win+2*i+2])
			}
		}
		assert.Equal(t, make([]byte, 2*k), targets[2].MR.Buf()[win:win+2*k], "nothing reached the dead peer")
		require.NoError(t, qa.PostSend(targets[2].WR(ibv.SendWR{ID: 99, Flags: ibv.SendSignaled, Opcode: ibv.OpRDMAWrite,
			LocalBuf: []byte{1}}, win)))
		wc := ibvtest.WaitWC(t, qa.SendCQ())
		assert.Equal(t, ibv.WCWRFlushErr, wc.Status, "a failed peer record flushes")
		ibvtest.DCExactlyOnce(t, qa, targets[:2], 4, 64)
	})
}

// perPeer is the growth of the live heap since before (bytes, may be negative), per peer of n.
func perPeer(before uint64, n int) float64 {
	return float64(int64(heapBytes())-int64(before)) / float64(n)
}

// heapBytes is the live heap after a collection.
func heapBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// dcAndRCMemory measures, on a 2-node fabric, the heap that n connections cost (both ends): n
// DC peer records on each side (node 0's DC QP contacts n DC QPs of node 1 with one 8-byte
// write each), and n connected RC queue pairs on each side (default capacities, one shared CQ
// per node, as hybridft creates them), with one 8-byte write each. The targets' DC QPs exist
// before the DC measurement starts.
//
// It also returns what the queue pairs account for the same connections, per connection (both
// ends): dcEst the growth of the DC QPs' MemoryFootprint, rcEst the RC QPs' MemoryFootprint.
//
// afterBurst is the heap's growth per peer across a burst of 32 requests in flight to every
// peer (noisy: the heap holds more than the records), burstEst the growth of what the DC QPs
// account for over the same burst (the records' queues, exactly).
func dcAndRCMemory(t *testing.T, n int) (dc, replay, afterBurst, burstEst, rc, dcEst, rcEst float64) {
	_, devs := newFabric(t, fabric.Config{Nodes: 2})
	qa := ibvtest.ConnectDC(t, devs[0], nil, 1, ibv.AccessAll)
	var targets []ibvtest.DCTarget
	pd1, err := devs[1].AllocPD()
	require.NoError(t, err)
	mr, err := pd1.RegMR(make([]byte, 8), ibv.AccessAll)
	require.NoError(t, err)
	ah, err := qa.PD().CreateAH(ibvtest.PathTo(ibvtest.QueryPort(t, devs[1], 1), 1))
	require.NoError(t, err)
	for range n {
		targets = append(targets, ibvtest.DCTarget{QP: ibvtest.ConnectDC(t, devs[1], pd1, 1, ibv.AccessAll), MR: mr, AH: ah})
	}
	buf := make([]byte, 8)
	dcFootprint := func() int64 {
		f := qa.MemoryFootprint()
		for _, d := range targets {
			f += d.QP.MemoryFootprint()
		}
		return f
	}
	estBefore := dcFootprint()
	before := heapBytes()
	for i, d := range targets {
		require.NoError(t, qa.PostSend(d.WR(ibv.SendWR{ID: uint64(i), Flags: ibv.SendSignaled, Opcode: ibv.OpRDMAWrite, LocalBuf: buf}, 0)))
		ibvtest.WaitOK(t, qa.SendCQ(), uint64(i))
	}
	dc = perPeer(before, n)
	dcEst = float64(dcFootprint()-estBefore) / float64(n)
	before = heapBytes()
	for i, d := range targets {
		require.NoError(t, qa.PostSend(d.WR(ibv.SendWR{ID: uint64(i), Flags: ibv.SendSignaled, Opcode: ibv.OpAtomicFetchAdd,
			LocalBuf: buf, CompareAdd: 1}, 0)))
		ibvtest.WaitOK(t, qa.SendCQ(), uint64(i))
	}
	replay = perPeer(before, n)
	before, cqBefore, estBurstBefore := heapBytes(), qa.SendCQ().MemoryFootprint(), dcFootprint()
	const burst, wave = 32, 64 // 64 peers at a time: the CQ holds 4096 completions
	for lo := 0; lo < n; lo += wave {
		peers := targets[lo:min(lo+wave, n)]
		for k := range burst {
			for i, d := range peers {
				require.NoError(t, qa.PostSend(d.WR(ibv.SendWR{ID: uint64(k*n + lo + i), Flags: ibv.SendSignaled,
					Opcode: ibv.OpRDMAWrite, LocalBuf: buf}, 0)))
			}
		}
		for range burst * len(peers) {
			require.Equal(t, ibv.WCSuccess, ibvtest.WaitWC(t, qa.SendCQ()).Status)
		}
	}
	// the CQ, shared by every peer, keeps the ring the bursts grew (internal/wqring): not a
	// per-peer cost
	afterBurst = perPeer(before, n) - float64(qa.SendCQ().MemoryFootprint()-cqBefore)/float64(n)
	burstEst = float64(dcFootprint()-estBurstBefore) / float64(n)

	pd0, err := devs[0].AllocPD()
	require.NoError(t, err)
	cq0, err := devs[0].CreateCQ(4096)
	require.NoError(t, err)
	cq1, err := devs[1].CreateCQ(4096)
	require.NoError(t, err)
	p0, p1 := ibvtest.QueryPort(t, devs[0], 1), ibvtest.QueryPort(t, devs[1], 1)
	before = heapBytes()
	qps := make([]*ibv.QP, 0, 2*n)
	for i := range n {
		a, err := pd0.CreateQP(ibv.QPInitAttr{Type: ibv.RC, SendCQ: cq0, RecvCQ: cq0})
		require.NoError(t, err)
		b, err := pd1.CreateQP(ibv.QPInitAttr{Type: ibv.RC, SendCQ: cq1, RecvCQ: cq1})
		require.NoError(t, err)
		qps = append(qps, a, b)
		require.NoError(t, ibvtest.ModifyToInit(a, 1, ibv.AccessAll, 0))
		require.NoError(t, ibvtest.ModifyToInit(b, 1, ibv.AccessAll, 0))
		require.NoError(t, ibvtest.ModifyToRTR(a, ibvtest.PathTo(p1, 1), b.Num(), 1))
		require.NoError(t, ibvtest.ModifyToRTR(b, ibvtest.PathTo(p0, 1), a.Num(), 1))
		require.NoError(t, ibvtest.ModifyToRTS(a, 1))
		require.NoError(t, ibvtest.ModifyToRTS(b, 1))
		require.NoError(t, a.PostSend(&ibv.SendWR{ID: uint64(i), Flags: ibv.SendSignaled, Opcode: ibv.OpRDMAWrite,
			LocalBuf: buf, RemoteAddr: mr.Addr, RKey: mr.RKey}))
		ibvtest.WaitOK(t, cq0, uint64(i))
	}
	rc = perPeer(before, n)
	for _, q := range qps {
		rcEst += float64(q.MemoryFootprint()) / float64(n)
	}
	for _, q := range qps {
		require.NoError(t, q.Destroy())
	}
	return dc, replay, afterBurst, burstEst, rc, dcEst, rcEst
}

// The memory of a DC peer does not grow beyond a small record: at 64, 256 and 1024 peers a
// connection over DC (a record at each end) costs less than an RC connection (a queue pair at
// each end with its send and receive queues), and neither holds queues at its capacity: both
// grow with the requests outstanding and shrink back (internal/wqring).
func TestDCMemoryPerPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("memory measurement")
	}
	for _, n := range []int{64, 256, 1024} {
		dc, replay, burst, burstEst, rc, _, _ := dcAndRCMemory(t, n)
		t.Logf("%4d peers: DC %6.0f B per connection (both ends), +%4.0f B after a first atomic, %+5.0f B after a burst (accounted %+5.0f B); RC %7.0f B per connection (both ends), RC/DC %.0f×",
			n, dc, replay, burst, burstEst, rc, rc/dc)
		assert.Less(t, dc, rc, "%d peers: a DC record is not smaller than an RC queue pair", n)
		// an RC queue pair's queues follow its outstanding requests, not its capacities
		// (1024 × 168 B of send queue alone at the default MaxSendWR)
		assert.Less(t, rc, 16384.0, "%d peers: an RC connection holds queues at its capacity", n)
		// After a burst of 32 requests in flight to every peer a record's send queue may keep a
		// floor as deep as the burst (wqring: so that repeated bursts allocate nothing), how deep
		// depending on how the peers' posts and completions interleaved; what it must not keep
		// is its capacity (MaxSendWR entries of 168 B). Checked on the accounted bytes: the
		// heap's growth also holds whatever else the burst allocated.
		assert.Less(t, burstEst, 32*168.0, "%d peers: a burst left a send queue deeper than the burst", n)
	}
}

// Duplication and reordering are seeded like loss: the same seed gives the same arrivals; a
// Duplicate rule delivers some datagrams twice (the copy right behind), a Reorder rule lets later
// datagrams overtake held-back ones, and neither loses one.
func TestSeededDuplicationAndReordering(t *testing.T) {
	const n = 400
	for _, seed := range seeds[:3] {
		dup := udLoss(t, seed, n, fabric.Rule{Duplicate: 0.1})
		require.Equal(t, dup, udLoss(t, seed, n, fabric.Rule{Duplicate: 0.1}), "seed %#x: deterministic", seed)
		count := make([]int, n)
		for k, i := range dup {
			count[i]++
			if count[i] == 2 {
				require.Equal(t, i, dup[k-1], "a copy arrives right behind its original")
			}
			require.LessOrEqual(t, count[i], 2)
			require.True(t, k == 0 || i >= dup[k-1], "duplication keeps the order")
		}
		assert.InDelta(t, 0.1*n, len(dup)-n, 0.06*n, "seed %#x: duplication rate", seed)
		for i, c := range count {
			require.Positive(t, c, "datagram %d lost", i)
		}

		late := udLoss(t, seed, n, fabric.Rule{Reorder: 0.1, ReorderBy: time.Millisecond}, fabric.Rule{Delay: 10 * time.Microsecond})
		require.Len(t, late, n, "nothing lost")
		overtaken := 0
		for k := 1; k < n; k++ {
			if late[k] < late[k-1] {
				overtaken++
			}
		}
		require.Positive(t, overtaken, "seed %#x: some datagrams arrived out of order", seed)
		sorted := slices.Clone(late)
		slices.Sort(sorted)
		for i, v := range sorted {
			require.Equal(t, i, v)
		}
	}
}

// Moving a DC QP to ERROR flushes the outstanding requests of every peer record (here two peers
// behind a partition) with WCWRFlushErr, and later posts too; the QP cannot be reset.
func TestDCErrorFlushesEveryPeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var plan fabric.Plan
		plan.Partition([]int{0}, []int{1, 2}, 0, 0)
		_, devs := newFabric(t, fabric.Config{Nodes: 3, Plan: plan})
		qa := ibvtest.ConnectDC(t, devs[0], nil, 1, ibv.AccessAll)
		targets := ibvtest.DCTargets(t, memProvider, qa, devs[1:], 1, 64)
		const k = 4
		for i := range k {
			for j, d := range targets {
				require.NoError(t, qa.PostSend(d.WR(ibv.SendWR{ID: uint64(10*j + i), Flags: ibv.SendSignaled,
					Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{1}}, i)))
			}
		}
		time.Sleep(time.Millisecond)
		require.Zero(t, qa.SendCQ().Len(), "nothing completes behind the partition before the ACK timeout")
		require.NoError(t, qa.Modify(&ibv.QPAttr{State: ibv.StateError}, ibv.AttrState))
		require.NoError(t, qa.PostSend(targets[0].WR(ibv.SendWR{ID: 99, Flags: ibv.SendSignaled, Opcode: ibv.OpRDMAWrite,
			LocalBuf: []byte{1}}, 8)))
		ids := map[uint64]bool{}
		for range k*len(targets) + 1 {
			wc := ibvtest.WaitWC(t, qa.SendCQ())
			assert.Equal(t, ibv.WCWRFlushErr, wc.Status, "WR %d", wc.WRID)
			ids[wc.WRID] = true
		}
		assert.Len(t, ids, k*len(targets)+1, "every request completed once")
		for _, d := range targets {
			assert.Equal(t, make([]byte, 64), d.MR.Buf(), "nothing reached the peers")
		}
		assert.ErrorIs(t, qa.Modify(&ibv.QPAttr{State: ibv.StateReset}, ibv.AttrState), ibv.ErrInvalidTransition)
	})
}
