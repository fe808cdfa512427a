package fabric_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/ibv/ibvtest"
)

var testMGID = ibv.GID{0xff, 0x15, 0x40, 0x1b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34}

const testMLID = 0xC012

// mcastNode is a UD QP on one node with n receives posted.
type mcastNode struct {
	qp *ibv.QP
	ah *ibv.AH
}

func newMcastNode(t *testing.T, dev *ibv.Context, n int) *mcastNode {
	t.Helper()
	m := &mcastNode{qp: ibvtest.ConnectUD(t, dev, 1, 0x11)}
	mr, err := m.qp.PD().RegMR(make([]byte, 64*n), ibv.AccessLocalWrite)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		require.NoError(t, m.qp.PostRecv(&ibv.RecvWR{ID: uint64(i), SGL: []ibv.SGE{mr.SGE(64*i, 64)}}))
	}
	m.ah, err = m.qp.PD().CreateAH(ibv.AHAttr{DLID: testMLID, DGID: testMGID, PortNum: 1})
	require.NoError(t, err)
	return m
}

func (m *mcastNode) send(t *testing.T, i int) {
	t.Helper()
	require.NoError(t, m.qp.PostSend(&ibv.SendWR{ID: uint64(i), Opcode: ibv.OpSendImm, Imm: uint32(i),
		LocalBuf: []byte("release"), AH: m.ah, RemoteQPN: ibv.MulticastQPN, QKey: 0x11}))
}

// received returns the immediate values of the datagrams received, with their sender QPs.
func (m *mcastNode) received(t *testing.T) (imms []int, srcs []uint32) {
	t.Helper()
	var wcs [64]ibv.WC
	for {
		k := m.qp.RecvCQ().Poll(wcs[:])
		if k == 0 {
			return imms, srcs
		}
		for _, wc := range wcs[:k] {
			require.Equal(t, ibv.WCSuccess, wc.Status)
			imms = append(imms, int(wc.Imm))
			srcs = append(srcs, wc.SrcQP)
		}
	}
}

// A send to the group reaches every attached QP on every node — the sender's own node and the
// sender itself when attached — and no QP that is not attached or has detached.
func TestMulticastDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const nodes = 6
		f, devs := newFabric(t, fabric.Config{Nodes: nodes})
		ms := make([]*mcastNode, nodes)
		for i := range ms {
			ms[i] = newMcastNode(t, devs[i], 16)
		}
		// a second attached QP on node 2 gets its own copy
		extra := newMcastNode(t, devs[2], 16)
		for i := 0; i < nodes-1; i++ { // node 5 stays out
			require.NoError(t, ms[i].qp.AttachMcast(testMGID, testMLID))
		}
		require.NoError(t, ms[0].qp.AttachMcast(testMGID, testMLID), "attaching twice is one attachment")
		require.NoError(t, extra.qp.AttachMcast(testMGID, testMLID))
		assert.Equal(t, []int{0, 1, 2, 3, 4}, f.McastMembers(1, testMLID))
		ms[0].send(t, 7)
		synctest.Wait()
		for i, m := range append(ms, extra) {
			imms, srcs := m.received(t)
			if i == 5 {
				assert.Empty(t, imms, "node 5 is not attached")
				continue
			}
			require.Equal(t, []int{7}, imms, "QP %d: one copy", i)
			assert.Equal(t, []uint32{ms[0].qp.Num()}, srcs)
		}
		// detach node 1; node 3's QP is destroyed: neither gets the next datagram
		require.NoError(t, ms[1].qp.DetachMcast(testMGID, testMLID))
		require.ErrorIs(t, ms[1].qp.DetachMcast(testMGID, testMLID), ibv.ErrInvalidArgument)
		require.NoError(t, ms[3].qp.Destroy())
		assert.Equal(t, []int{0, 2, 4}, f.McastMembers(1, testMLID))
		ms[4].send(t, 8)
		synctest.Wait()
		for _, i := range []int{0, 2, 4} {
			imms, _ := ms[i].received(t)
			assert.Equal(t, []int{8}, imms, "node %d", i)
		}
		imms, _ := ms[1].received(t)
		assert.Empty(t, imms, "node 1 detached")
	})
}

// Argument checks and providers without multicast.
func TestMulticastErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, devs := newFabric(t, fabric.Config{Nodes: 2})
		assert.Positive(t, devs[0].QueryDevice().MaxMcastGrp)
		m := newMcastNode(t, devs[0], 1)
		assert.ErrorIs(t, m.qp.AttachMcast(ibv.GID{0xfe}, testMLID), ibv.ErrInvalidArgument, "not a multicast GID")
		assert.ErrorIs(t, m.qp.AttachMcast(testMGID, 0x1234), ibv.ErrInvalidArgument, "not a multicast LID")
		rc, _, _, _ := rcPair(t, devs, 64)
		assert.ErrorIs(t, rc.AttachMcast(testMGID, testMLID), ibv.ErrInvalidArgument, "RC QP")
		fresh := ibvtest.CreateQP(t, devs[0], nil, ibv.UD, 16, ibv.QPCap{}, false)
		assert.ErrorIs(t, fresh.AttachMcast(testMGID, testMLID), ibv.ErrInvalidState, "RESET")
		err := m.qp.PostSend(&ibv.SendWR{Opcode: ibv.OpSend, LocalBuf: []byte("x"), AH: m.ah, RemoteQPN: 5, QKey: 0x11})
		assert.ErrorIs(t, err, ibv.ErrInvalidArgument, "multicast send to a QPN other than 0xFFFFFF")
		_, err = m.qp.PD().CreateAH(ibv.AHAttr{DLID: testMLID, PortNum: 1})
		assert.ErrorIs(t, err, ibv.ErrInvalidArgument, "multicast LID without an MGID")
	})
}

// Seeded loss acts on every receiver's copy on its own: with a lossy plan each member misses
// some datagrams, not all the same ones, the same ones again for the same seed, and nothing is
// sent twice.
func TestMulticastSeededLossPerReceiver(t *testing.T) {
	const nodes, n = 5, 200
	run := func(seed uint64) [][]int {
		var got [][]int
		synctest.Test(t, func(t *testing.T) {
			_, devs := newFabric(t, fabric.Config{Nodes: nodes, Plan: fabric.Plan{Seed: seed, Rules: []fabric.Rule{{Drop: 0.2}}}})
			ms := make([]*mcastNode, nodes)
			for i := range ms {
				ms[i] = newMcastNode(t, devs[i], n)
				require.NoError(t, ms[i].qp.AttachMcast(testMGID, testMLID))
			}
			for i := 0; i < n; i++ {
				ms[0].send(t, i)
			}
			time.Sleep(time.Second)
			synctest.Wait()
			for _, m := range ms[1:] {
				imms, _ := m.received(t)
				got = append(got, imms)
			}
		})
		return got
	}
	a := run(0x5eed)
	require.Equal(t, a, run(0x5eed), "same seed, same losses")
	for i, imms := range a {
		assert.InDelta(t, 0.8*n, len(imms), 0.1*n, "member %d", i+1)
		for k := 1; k < len(imms); k++ {
			require.Less(t, imms[k-1], imms[k], "member %d: in order, no duplicate", i+1)
		}
	}
	assert.NotEqual(t, a[0], a[1], "members lose different copies")
}

// A copy to a member behind a partition is lost; the others get theirs.
func TestMulticastPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, devs := newFabric(t, fabric.Config{Nodes: 3, Plan: fabric.Plan{Rules: []fabric.Rule{{Src: []int{0}, Dst: []int{2}, Down: true}}}})
		ms := make([]*mcastNode, 3)
		for i := range ms {
			ms[i] = newMcastNode(t, devs[i], 4)
			require.NoError(t, ms[i].qp.AttachMcast(testMGID, testMLID))
		}
		ms[0].send(t, 1)
		synctest.Wait()
		got := make([]int, 3)
		for i, m := range ms {
			imms, _ := m.received(t)
			got[i] = len(imms)
		}
		assert.Equal(t, []int{1, 1, 0}, got)
	})
}

// On a fat tree the leaf switch copies a multicast packet: the sender's link to its leaf carries
// it once (busy for the host's per-packet cost, HostGap, and its bytes), each member's link from
// its leaf carries its own copy, and every member gets it.
func TestMulticastSwitchReplication(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const nodes = 8
		tree := &fabric.FatTree{Leaves: 2, Spines: 1, HostsPerLeaf: 4, LinkRate: 1e8, LinkLatency: time.Microsecond,
			HostGap: 3 * time.Microsecond}
		f, devs := newFabric(t, fabric.Config{Nodes: nodes, Topology: tree})
		ms := make([]*mcastNode, nodes)
		for i := range ms {
			ms[i] = newMcastNode(t, devs[i], 4)
			require.NoError(t, ms[i].qp.AttachMcast(testMGID, testMLID))
		}
		ms[1].send(t, 3)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		for i, m := range ms {
			imms, _ := m.received(t)
			assert.Equal(t, []int{3}, imms, "node %d", i)
		}
		up, err := f.HopStats(fabric.Hop{Rail: 1, From: fabric.Host(1), To: fabric.Leaf(0)})
		require.NoError(t, err)
		assert.Equal(t, uint64(1), up.Packets, "the sender's link carries the datagram once")
		assert.Equal(t, 3*time.Microsecond+time.Duration(up.Bytes)*10*time.Nanosecond, up.Busy, "gap + bytes at 100 MB/s")
		for i := range nodes {
			if i == 1 {
				continue
			}
			down, err := f.HopStats(fabric.Hop{Rail: 1, From: fabric.Leaf(tree.LeafOf(i)), To: fabric.Host(i)})
			require.NoError(t, err)
			assert.Equal(t, uint64(1), down.Packets, "node %d's link carries its copy", i)
		}
	})
}
