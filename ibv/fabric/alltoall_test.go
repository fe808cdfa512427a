package fabric_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/ibv/ibvtest"
)

// a2a is the result of an all-to-all of RDMA writes.
type a2a struct {
	took       time.Duration // virtual time from the first post to the last completion
	sent, lost uint64        // packets on all links (requests, responses, retransmissions)
	maxUp      uint64        // the most bytes any leaf→spine hop carried
	upBytes    uint64        // bytes on all leaf→spine hops
	hostBytes  uint64        // bytes on all host→leaf hops
}

// allToAll runs, on a fabric of n nodes with cfg (Nodes set), an all-to-all of size bytes per
// ordered pair: node i writes its pattern to every other node j with one RC queue pair per pair on
// rail 1, in chunks of chunk bytes, destinations in shifted order (i+1, i+2, ...), all posted
// at once. With verify, every pair has its own target region and the data are checked (n·n·size
// bytes of memory); without, the writes to a node overlap.
func allToAll(t *testing.T, cfg fabric.Config, size, chunk int, verify bool) a2a {
	n := cfg.Nodes
	f, devs := newFabric(t, cfg)
	type nodeRes struct {
		pd       *ibv.PD
		cq       *ibv.CQ
		src, dst *ibv.MR
		qps      []*ibv.QP // qps[j]: to node j (requester) — and the responder of j's writes
		peer     []*ibv.QP
	}
	nodes := make([]*nodeRes, n)
	chunks := size / chunk
	for i := range nodes {
		pd, err := devs[i].AllocPD()
		require.NoError(t, err)
		cq, err := devs[i].CreateCQ(n * chunks)
		require.NoError(t, err)
		src, err := pd.RegMR(ibvtest.Pattern(uint64(i+1), size), ibv.AccessAll)
		require.NoError(t, err)
		dlen := size
		if verify {
			dlen = n * size
		}
		dst, err := pd.RegMR(make([]byte, dlen), ibv.AccessAll)
		require.NoError(t, err)
		nodes[i] = &nodeRes{pd: pd, cq: cq, src: src, dst: dst, qps: make([]*ibv.QP, n), peer: make([]*ibv.QP, n)}
	}
	pas := make([]ibv.PortAttr, n)
	for i := range pas {
		pas[i] = ibvtest.QueryPort(t, devs[i], 1)
	}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i == j {
				continue
			}
			a, err := nodes[i].pd.CreateQP(ibv.QPInitAttr{Type: ibv.RC, SendCQ: nodes[i].cq, RecvCQ: nodes[i].cq, SigAll: true})
			require.NoError(t, err)
			b, err := nodes[j].pd.CreateQP(ibv.QPInitAttr{Type: ibv.RC, SendCQ: nodes[j].cq, RecvCQ: nodes[j].cq})
			require.NoError(t, err)
			nodes[i].qps[j], nodes[j].peer[i] = a, b
			for _, x := range []struct {
				q, p *ibv.QP
				pa   ibv.PortAttr
			}{{a, b, pas[j]}, {b, a, pas[i]}} {
				require.NoError(t, ibvtest.ModifyToInit(x.q, 1, ibv.AccessAll, 0))
				require.NoError(t, ibvtest.ModifyToRTR(x.q, ibvtest.PathTo(x.pa, 1), x.p.Num(), 1))
				require.NoError(t, x.q.Modify(&ibv.QPAttr{State: ibv.StateRTS, SQPSN: 1, Timeout: 14, RetryCnt: 7},
					ibv.AttrState|ibv.AttrSQPSN|ibv.AttrTimeout|ibv.AttrRetryCnt))
			}
		}
	}
	start := f.Now()
	for c := 0; c < chunks; c++ {
		for i := 0; i < n; i++ {
			for k := 1; k < n; k++ {
				j := (i + k) % n
				off := 0
				if verify {
					off = i * size
				}
				require.NoError(t, nodes[i].qps[j].PostSend(&ibv.SendWR{ID: uint64(j), Opcode: ibv.OpRDMAWrite,
					SGL: []ibv.SGE{nodes[i].src.SGE(c*chunk, chunk)}, RemoteAddr: nodes[j].dst.Addr + uint64(off+c*chunk),
					RKey: nodes[j].dst.RKey}))
			}
		}
	}
	for i := 0; i < n; i++ {
		for k := 0; k < (n-1)*chunks; k++ {
			wc := ibvtest.WaitWC(t, nodes[i].cq)
			require.Equal(t, ibv.WCSuccess, wc.Status, "node %d to %d", i, wc.WRID)
		}
	}
	var r a2a
	r.took = f.Now() - start
	if verify {
		for j := 0; j < n; j++ {
			for i := 0; i < n; i++ {
				if i != j {
					require.True(t, bytes.Equal(nodes[i].src.Buf(), nodes[j].dst.Buf()[i*size:(i+1)*size]), "%d→%d", i, j)
				}
			}
		}
	}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			st := f.Stats(i, j, 0)
			r.sent += st.Sent
			r.lost += st.Lost
		}
	}
	for _, h := range f.Hops() {
		st, err := f.HopStats(h)
		require.NoError(t, err)
		switch {
		case h.To.Kind == fabric.KindSpine:
			r.upBytes += st.Bytes
			r.maxUp = max(r.maxUp, st.Bytes)
		case h.From.Kind == fabric.KindHost:
			r.hostBytes += st.Bytes
		}
	}
	return r
}

// An all-to-all of RC writes on a fat tree of 4 leaves × 4 hosts, 2 spines (oversubscribed
// 2:1): every write lands intact, nothing is lost, and the virtual time it takes is bounded by
// the links: at least the bytes each host sends at the link rate, and at least the bytes
// crossing the busiest leaf→spine link at its rate.
func TestAllToAllFatTree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			n    = 16
			size = 64 << 10
			rate = int64(2e9)
		)
		ft := &fabric.FatTree{Leaves: 4, Spines: 2, HostsPerLeaf: 4, LinkRate: rate, LinkLatency: 200 * time.Nanosecond}
		r := allToAll(t, fabric.Config{Nodes: n, Topology: ft}, size, 16<<10, true)
		require.Zero(t, r.lost)
		payload := uint64(n * (n - 1) * size)
		require.Greater(t, r.hostBytes, payload, "payload and headers (and ACKs) on the host links")
		perHost := time.Duration(uint64((n-1)*size) * uint64(time.Second) / uint64(rate))
		require.GreaterOrEqual(t, r.took, perHost)
		require.GreaterOrEqual(t, r.took, time.Duration(r.maxUp*uint64(time.Second)/uint64(rate)))
		// 12 of each host's 15 destinations are off its leaf: 12/15 of the traffic goes up
		require.InDelta(t, 0.8, float64(r.upBytes)/float64(r.hostBytes), 0.01)
		t.Logf("all-to-all %d×%d KiB: %v virtual, busiest uplink %d KiB, %d packets sent", n, size>>10, r.took, r.maxUp>>10, r.sent)
	})
}

// TestAllToAllScale measures the model: FABRIC_A2A="nodes:bytes" (e.g. 64:1048576) runs an
// all-to-all of that many bytes per pair (targets overlapping, unverified) on a fat tree of
// 8-host leaves and 8 spines at 2 GB/s (4X DDR), and logs the wall and virtual times.
func TestAllToAllScale(t *testing.T) {
	spec := os.Getenv("FABRIC_A2A")
	if spec == "" {
		t.Skip("FABRIC_A2A=nodes:bytes not set")
	}
	var n, size int
	_, err := fmt.Sscanf(spec, "%d:%d", &n, &size)
	require.NoError(t, err)
	chunk := min(size, 64<<10)
	var r a2a
	wall := time.Now() // outside the bubble: the real clock
	synctest.Test(t, func(t *testing.T) {
		leaves := (n + 7) / 8
		ft := &fabric.FatTree{Leaves: leaves, Spines: 8, HostsPerLeaf: 8, LinkRate: 2e9, LinkLatency: 200 * time.Nanosecond}
		r = allToAll(t, fabric.Config{Nodes: n, Topology: ft}, size, chunk, false)
	})
	t.Logf("all-to-all %d nodes × %d B per pair: %v virtual, %d packets (%d lost), busiest uplink %d B, wall %v",
		n, size, r.took, r.sent, r.lost, r.maxUp, time.Since(wall))
}
