package fabric

import (
	"container/list"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/wire"
)

// HCAModel is the cost of queue pair contexts in the host channel adapter of every node of a
// FatTree (FatTree.HCA), the two effects behind [Takagi15 §2.1]'s choice between RC and DC:
//
//   - The HCA keeps the contexts of the queue pairs it serves in an on-board cache of QPCache
//     entries, least recently used out; a packet sent or received by a node whose queue pair's
//     context is not cached fetches it from host memory over PCIe first: the packet occupies the
//     node's host link (host → leaf when sent, leaf → host when received) MissPenalty longer.
//     RC slows down when a node has more active queue pairs than the cache holds ("cache
//     thrashing", [Takagi15 §2.1] after Koop et al., whom [Sridhar08] surveys); the literature
//     puts a miss at about 0.5–1 µs. The context of an RC or UD queue pair is the queue pair
//     (the packet's local QPN: the BTH source QPN when sent, destination QPN when received).
//     A DC queue pair is one context too: the hardware's DC initiator holds one target's
//     connection at a time and its DC target one initiator's, inside the queue pair's context,
//     which is why moving peers from RC to DC limits the active contexts ([Takagi15 §3.2]:
//     offloading source ranks to DC against the cache thrashing). With DCContextPerPeer a DC
//     queue pair has one context per remote peer (node and QPN) instead: the bound for an HCA
//     that caches every DC connection's state apart.
//   - A DC initiator connects to its target before it sends and disconnects before it
//     connects to another ([Takagi15 §2.1, Fig. 1]): a request packet of a DC queue pair to
//     another destination (node, QPN) than its previous request occupies the initiator's host
//     link DCConnect longer. A DC target serves one initiator's connection at a time; a second
//     initiator is refused and retries after the first disconnects ([Takagi15 §2.1, Fig. 2]): a
//     request reaching a DC queue pair from another initiator than its previous request
//     occupies the target's host link DCConnect longer. Responses (ACKs, read responses) ride
//     the connection of their request and pay no connect.
//
// A node's cache, its DC queue pairs' last peers and its counters (HCAStats) follow the order in
// which its packets start on its host links on the fabric clock. Loopback packets (a node to
// itself, no host link) and packets that are not transport packets of the engine are not
// looked up. The zero value is no model: no lookup, nothing charged, the fabric's times as
// without it. Reasonable values for an HCA of [Takagi15 §4.1]'s generation: QPCache a few tens
// of contexts (its AQPS keeps at most 26 RC plus 8 DC queue pairs active per process to stay
// clear of the thrashing, [Takagi15 §4.3]), MissPenalty 0.5–1 µs, DCConnect about one small message's half round
// trip.
type HCAModel struct {
	// QPCache is the number of queue pair contexts the HCA of a node caches (0: no cache, no
	// miss is charged).
	QPCache int
	// MissPenalty is the time a packet whose context misses the cache adds to the node's host
	// link.
	MissPenalty time.Duration
	// DCConnect is the time a DC connect adds to the initiator's host link (a DC initiator's
	// request to a new target) and to the target's (a DC target's request from a new
	// initiator).
	DCConnect time.Duration
	// DCContextPerPeer caches a DC queue pair's state per remote peer (one context per DC
	// queue pair and peer) instead of one context per DC queue pair.
	DCContextPerPeer bool
}

func (m HCAModel) on() bool { return m.QPCache > 0 || m.DCConnect > 0 }

func (m HCAModel) validate() error {
	if m.QPCache < 0 || m.MissPenalty < 0 || m.DCConnect < 0 {
		return fmt.Errorf("fabric: %w: HCA model: cache of %d contexts, miss penalty %v, DC connect %v",
			ibv.ErrInvalidArgument, m.QPCache, m.MissPenalty, m.DCConnect)
	}
	return nil
}

// HCAStats counts what a node's HCA did under the HCAModel.
type HCAStats struct {
	// Lookups is the number of packets the node sent or received through its host links and
	// looked up in its context cache; Misses those whose context was not cached.
	Lookups, Misses uint64
	// Connects is the number of DC connects the node's DC initiators made (a request to
	// another target than the previous one); Accepts the number its DC targets made (a request
	// from another initiator than the previous one).
	Connects, Accepts uint64
}

// qpContext names a queue pair context of a node: its QP number and, for a DC queue pair with
// HCAModel.DCContextPerPeer, the remote peer's node and QP number (peer -1 otherwise); also the
// peer of a DC queue pair's last request.
type qpContext struct {
	qpn     uint32
	peer    int32
	peerQPN uint32
}

// hcaNode is the HCA state of one node: its context cache (an LRU: the list's front is the
// most recently used), its DC queue pairs with the peer of their last request, and its counts.
type hcaNode struct {
	lru    list.List // of qpContext
	cached map[qpContext]*list.Element
	dc     map[uint32]dcLast // the node's DC queue pairs by QPN
	stats  HCAStats
}

// dcLast is the peer of a DC queue pair's last request sent (to) and received (from); peer -1:
// none yet (noDCPeer).
type dcLast struct {
	to, from qpContext
}

// noDCPeer is a new DC queue pair's dcLast: no request sent or received yet.
var noDCPeer = dcLast{to: qpContext{peer: -1}, from: qpContext{peer: -1}}

// hca is the HCA model of a fabric's nodes, guarded by netsim.mu.
type hca struct {
	m     HCAModel
	nodes map[int32]*hcaNode
}

func (h *hca) node(i int32) *hcaNode {
	n := h.nodes[i]
	if n == nil {
		n = &hcaNode{cached: map[qpContext]*list.Element{}, dc: map[uint32]dcLast{}}
		h.nodes[i] = n
	}
	return n
}

// touch looks c up in the node's cache, inserting it (and evicting the least recently used
// context when full): whether it missed.
func (n *hcaNode) touch(c qpContext, size int) bool {
	if size <= 0 {
		return false
	}
	if e := n.cached[c]; e != nil {
		n.lru.MoveToFront(e)
		return false
	}
	if n.lru.Len() >= size {
		old := n.lru.Back()
		delete(n.cached, n.lru.Remove(old).(qpContext))
	}
	n.cached[c] = n.lru.PushFront(c)
	return true
}

// charge is the time the packet buf of flow k adds to a host link: node is the host, sent
// whether the link is the node's way out (host → leaf) or in (leaf → host).
func (h *hca) charge(node int32, sent bool, k routeKey, buf []byte) time.Duration {
	if len(buf) < wire.BTHLen || buf[0] != wire.Version {
		return 0
	}
	op := wire.Opcode(buf[1])
	local, remote := binary.LittleEndian.Uint32(buf[12:]), binary.LittleEndian.Uint32(buf[4:]) // source, destination QPN
	peer := k.dst
	if !sent {
		local, remote, peer = remote, local, k.src
	}
	n := h.node(node)
	n.stats.Lookups++
	c := qpContext{qpn: local, peer: -1}
	var d time.Duration
	if last, isDC := n.dc[local]; isDC {
		if h.m.DCContextPerPeer {
			c.peer, c.peerQPN = peer, remote
		}
		if op.IsRequest() {
			p := qpContext{qpn: remote, peer: peer}
			switch {
			case sent && last.to != p:
				n.stats.Connects++
				d += h.m.DCConnect
				last.to = p
			case !sent && last.from != p:
				n.stats.Accepts++
				d += h.m.DCConnect
				last.from = p
			}
			n.dc[local] = last
		}
	}
	if n.touch(c, h.m.QPCache) {
		n.stats.Misses++
		d += h.m.MissPenalty
	}
	return d
}

// markDC records that QP qpn of node is a DC queue pair.
func (n *netsim) markDC(node int, qpn uint32) {
	if n.hca == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.hca.node(int32(node)).dc[qpn] = noDCPeer
}

// forgetHCA clears a node's cache and DC queue pairs (its device closed: QP numbers start over).
func (n *netsim) forgetHCA(node int) {
	if n.hca == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if hn := n.hca.nodes[int32(node)]; hn != nil {
		hn.lru.Init()
		clear(hn.cached)
		clear(hn.dc)
	}
}

// CreateQP creates the engine's queue pair; with an HCA model the fabric notes a DC queue pair.
func (d *driver) CreateQP(qp *ibv.QP) (ibv.QPDriver, error) {
	q, err := d.Device.CreateQP(qp)
	if err == nil && qp.Type() == ibv.DC && d.n.f.net != nil {
		d.n.f.net.markDC(d.n.idx, qp.Num())
	}
	return q, err
}

// HCAStats returns what node's HCA counted under the topology's HCAModel since New (zero
// without a model). Errors wrap ErrNoTopology or ibv.ErrInvalidArgument (an unknown node).
func (f *Fabric) HCAStats(node int) (HCAStats, error) {
	if f.net == nil {
		return HCAStats{}, fmt.Errorf("%w (%w)", ErrNoTopology, ibv.ErrInvalidArgument)
	}
	if _, err := f.node(node); err != nil {
		return HCAStats{}, err
	}
	n := f.net
	n.mu.Lock()
	defer n.unlock()
	n.advance(f.Now())
	if n.hca == nil || n.hca.nodes[int32(node)] == nil {
		return HCAStats{}, nil
	}
	return n.hca.nodes[int32(node)].stats, nil
}
