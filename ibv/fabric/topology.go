package fabric

import (
	"errors"
	"fmt"
	"time"

	"github.com/goarmci/goarmci/ibv"
)

// FatTree is a two-level fat tree (leaf/spine, a folded Clos network) built once per rail: every
// rail has its own leaf and spine switches of this shape, as the separate subnets of a
// multi-rail cluster [Vishnu07 ch. 4]. Node n attaches to leaf n / HostsPerLeaf on every rail;
// every leaf has one link to every spine. Every cable is a pair of directed links (Hop). The hot
// spots of [Vishnu07 ch. 3, 7] arise where the routes of several pairs share a leaf↔spine link.
//
// Capacity and time: a hop is a server of rate R bytes/s and latency L on the fabric clock
// (virtual time in a synctest bubble). A packet of b bytes (headers and payload) occupies it for
// b/R, in whole ns with the remainders carried so the long-run rate is exact. The flows waiting
// for a hop — a flow is a route: source node, destination node, rail and destination path bits
// — take turns by deficit round robin with a quantum of one MTU plus 256 bytes, as a switch
// arbitrating among its inputs: n backlogged flows get R/n each, in bytes, to a quantum.
// Switching is virtual cut-through: a packet's head reaches the next hop L after it starts on a
// hop and may start there at once, but no hop finishes a packet before its tail has arrived;
// the destination has it L after the last hop finished (an idle route of h hops delivers b bytes
// in h·L + b/R). Queues are unbounded: there is no link-level flow control (no credits, no back
// pressure) and no packet is lost to congestion; a sender's RC window waits in the queues. One
// goroutine of the fabric runs the model as a discrete-event simulation (a heap of events on
// the fabric clock, no goroutine per hop); Plan delays and losses act before a packet enters
// the tree, port faults when it is delivered, hop faults (SetHopDown) at the hop.
//
// Routing is by destination, as the linear forwarding tables of InfiniBand switches are indexed
// by the destination LID [IBA ch. 18]: a packet to node dst with destination path bits b (its
// DLID minus the base LID of the destination port, LMC [Vishnu07 §2.2]) goes up from its leaf
// to spine Spine(src, dst, b) — by default (dst + b) mod Spines, destination-mod-k up/down
// routing where consecutive path bits of one destination take consecutive spines — then down to
// the leaf of dst. Nodes on one leaf do not go up; a node reaches itself without the network.
// There is no subnet manager: a route keeps its spine while a hop of it is down (packets on it
// are lost, which is what APM's alternate path is for [Vishnu07 ch. 9]).
type FatTree struct {
	// Leaves, Spines and HostsPerLeaf give the shape: Leaves·HostsPerLeaf nodes at most (New
	// fails with more; nodes added beyond by AddNode are not attached: sends from or to them
	// fail with ibv.ErrUnreachable). Spines may be 0 only with one leaf.
	Leaves, Spines, HostsPerLeaf int
	// LinkRate is the capacity of every directed link in bytes/s (0: infinite, no serialization:
	// only latencies).
	LinkRate int64
	// UplinkRate, when not 0, is the capacity of the leaf↔spine links in bytes/s (e.g. lower than
	// LinkRate for an oversubscribed tree).
	UplinkRate int64
	// LinkLatency is the latency of every directed link in virtual time (cable and switch).
	LinkLatency time.Duration
	// HostGap is the time every packet occupies a host's links (host → leaf, leaf → host) besides
	// its bytes at the rate: a host's per-message cost (LogP's gap), paid by the sender for every
	// packet it sends and by the receiver for every packet it receives.
	HostGap time.Duration
	// HCA, when not the zero value, charges every node's host links for the queue pair
	// contexts its HCA misses and for DC connects (HCAModel).
	HCA HCAModel
	// Spine, when not nil, replaces the default spine choice (dst + bits) mod Spines; it must be
	// a pure function returning 0..Spines-1.
	Spine func(src, dst int, bits uint8) int
}

// Errors of the topology.
var (
	// ErrNoTopology: the fabric has no Topology (Route, hop statistics and hop faults need one).
	ErrNoTopology = errors.New("fabric: no topology")
	// ErrNoHop: a Hop that is not a link of the topology.
	ErrNoHop = errors.New("fabric: no such hop")
)

// Hosts is the number of nodes the tree attaches.
func (t *FatTree) Hosts() int { return t.Leaves * t.HostsPerLeaf }

// LeafOf is the leaf switch of node n.
func (t *FatTree) LeafOf(n int) int { return n / t.HostsPerLeaf }

func (t *FatTree) validate() error {
	if t.Leaves < 1 || t.HostsPerLeaf < 1 || t.Spines < 0 || (t.Spines == 0 && t.Leaves > 1) ||
		t.LinkRate < 0 || t.UplinkRate < 0 || t.LinkLatency < 0 || t.HostGap < 0 || t.Hosts() > 1<<20 || t.Leaves*t.Spines > 1<<20 {
		return fmt.Errorf("fabric: %w: fat tree of %d leaves, %d spines, %d hosts per leaf, rates %d/%d B/s, latency %v",
			ibv.ErrInvalidArgument, t.Leaves, t.Spines, t.HostsPerLeaf, t.LinkRate, t.UplinkRate, t.LinkLatency)
	}
	return t.HCA.validate()
}

// SpineOf is the spine a packet from node src to node dst with destination path bits bits goes
// through when their leaves differ: Spine's choice, by default (dst + bits) mod Spines.
func (t *FatTree) SpineOf(src, dst int, bits uint8) int {
	if t.Spine != nil {
		return t.Spine(src, dst, bits)
	}
	return (dst + int(bits)) % t.Spines
}

// Route returns the directed links a packet from node src to node dst with destination path
// bits bits crosses on rail, in order: host→leaf, then for nodes on different leaves
// leaf→spine and spine→leaf, then leaf→host; nil when src == dst. It is a pure function of its
// arguments and the tree's shape. Both nodes must be attached (0 ≤ src, dst < Hosts()).
func (t *FatTree) Route(rail uint8, src, dst int, bits uint8) []Hop {
	if src == dst {
		return nil
	}
	ls, ld := t.LeafOf(src), t.LeafOf(dst)
	r := make([]Hop, 0, 4)
	r = append(r, Hop{Rail: rail, From: Host(src), To: Leaf(ls)})
	if ls != ld {
		s := t.SpineOf(src, dst, bits)
		r = append(r, Hop{Rail: rail, From: Leaf(ls), To: Spine(s)}, Hop{Rail: rail, From: Spine(s), To: Leaf(ld)})
	}
	return append(r, Hop{Rail: rail, From: Leaf(ld), To: Host(dst)})
}

// Kind is the kind of a vertex of the topology.
type Kind uint8

// The kinds of vertex.
const (
	KindHost Kind = iota
	KindLeaf
	KindSpine
)

func (k Kind) String() string {
	switch k {
	case KindHost:
		return "host"
	case KindLeaf:
		return "leaf"
	case KindSpine:
		return "spine"
	}
	return fmt.Sprintf("kind%d", uint8(k))
}

// Vertex is a node (host) or a switch of one rail's tree.
type Vertex struct {
	Kind  Kind
	Index int
}

// Host, Leaf and Spine name vertices.
func Host(n int) Vertex  { return Vertex{KindHost, n} }
func Leaf(l int) Vertex  { return Vertex{KindLeaf, l} }
func Spine(s int) Vertex { return Vertex{KindSpine, s} }

func (v Vertex) String() string { return fmt.Sprintf("%v%d", v.Kind, v.Index) }

// Hop is a directed link of the topology on a rail (1-based, the port number): host→leaf,
// leaf→host, leaf→spine or spine→leaf.
type Hop struct {
	Rail     uint8
	From, To Vertex
}

// Reverse is the hop of the same cable the other way.
func (h Hop) Reverse() Hop { return Hop{Rail: h.Rail, From: h.To, To: h.From} }

func (h Hop) String() string { return fmt.Sprintf("r%d:%v>%v", h.Rail, h.From, h.To) }

// hopID numbers the hops of ports rails: per rail, host→leaf links 0..H-1, leaf→host H..2H-1,
// leaf→spine 2H+l·S+s, spine→leaf 2H+L·S+s·L+l. It returns -1 for a Hop not in the tree.
func (t *FatTree) hopID(ports int, h Hop) int {
	H, L, S := t.Hosts(), t.Leaves, t.Spines
	per := 2*H + 2*L*S
	if h.Rail < 1 || int(h.Rail) > ports {
		return -1
	}
	base := (int(h.Rail) - 1) * per
	in := func(i, n int) bool { return i >= 0 && i < n }
	f, to := h.From, h.To
	switch {
	case f.Kind == KindHost && to.Kind == KindLeaf && in(f.Index, H) && to.Index == t.LeafOf(f.Index):
		return base + f.Index
	case f.Kind == KindLeaf && to.Kind == KindHost && in(to.Index, H) && f.Index == t.LeafOf(to.Index):
		return base + H + to.Index
	case f.Kind == KindLeaf && to.Kind == KindSpine && in(f.Index, L) && in(to.Index, S):
		return base + 2*H + f.Index*S + to.Index
	case f.Kind == KindSpine && to.Kind == KindLeaf && in(f.Index, S) && in(to.Index, L):
		return base + 2*H + L*S + f.Index*L + to.Index
	}
	return -1
}

// hops lists the hops of ports rails in hopID order.
func (t *FatTree) hops(ports int) []Hop {
	H, L, S := t.Hosts(), t.Leaves, t.Spines
	var out []Hop
	for r := 1; r <= ports; r++ {
		rail := uint8(r)
		for h := 0; h < H; h++ {
			out = append(out, Hop{rail, Host(h), Leaf(t.LeafOf(h))})
		}
		for h := 0; h < H; h++ {
			out = append(out, Hop{rail, Leaf(t.LeafOf(h)), Host(h)})
		}
		for l := 0; l < L; l++ {
			for s := 0; s < S; s++ {
				out = append(out, Hop{rail, Leaf(l), Spine(s)})
			}
		}
		for s := 0; s < S; s++ {
			for l := 0; l < L; l++ {
				out = append(out, Hop{rail, Spine(s), Leaf(l)})
			}
		}
	}
	return out
}
