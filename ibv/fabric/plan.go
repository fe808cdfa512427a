package fabric

import (
	"math/rand/v2"
	"slices"
	"time"
)

// Plan is a seeded, deterministic fault plan (seeded faults per source, destination and
// path). Rules act on packets; port events pull and plug cables at set
// times. Times are on the fabric clock (Fabric.Now: the time since New), so under
// testing/synctest a plan replays exactly, to the nanosecond of virtual time.
//
// Every random decision is a pure function of (Seed, the rule, the link, the index of the
// packet among those the rule matched on that link): a link that carries the same packets sees
// the same faults whatever the other links do. The generators (Flaps) draw their times from
// Seed too.
type Plan struct {
	Seed   uint64
	Rules  []Rule
	Events []PortEvent
	// HopEvents take links of the Topology down and up (Fabric.SetHopDown).
	HopEvents []HopEvent
}

// Rule is a fault on the links it matches: the directed links from a node in Src to a node in
// Dst on rail Port (the source port number; a port reaches only the same port of other nodes),
// for packets sent with one of the source path bits in PathBits.
type Rule struct {
	// Src and Dst are node indexes; nil matches every node.
	Src, Dst []int
	// Port is the rail (1-based); 0 matches every rail.
	Port uint8
	// PathBits are the source path bits (LMC offsets, [Vishnu07 §2.2]) the rule applies to; nil:
	// every path of the rail.
	PathBits []uint8
	// From and Until bound the rule on the fabric clock: it acts on packets sent at times in
	// [From, Until); Until 0 means no end.
	From, Until time.Duration
	// Drop is the probability (0..1) that a matched packet is lost.
	Drop float64
	// DropEvery, when positive, loses every DropEvery-th matched packet of each link.
	DropEvery int
	// Delay is added to the one-way latency of matched packets (links stay FIFO).
	Delay time.Duration
	// Duplicate is the probability (0..1) that a matched packet arrives twice (the copy right
	// behind it), as on a datagram network.
	Duplicate float64
	// Reorder is the probability (0..1) that a matched packet is held back by ReorderBy (0: 1 ms)
	// while packets sent after it on the link overtake it. Without a Topology links are FIFO
	// otherwise; with one, a held-back packet is only delayed.
	Reorder   float64
	ReorderBy time.Duration
	// Down takes the path down: every matched packet is lost and path probes (APM path loads)
	// across it fail. The ports stay up (a fault inside the network: no port event); use a
	// PortEvent or Fabric.SetPortDown for a pulled cable.
	Down bool
}

// PortEvent pulls (Down true) or plugs back the cable of a node's port at time At on the fabric
// clock, as Fabric.SetPortDown does.
type PortEvent struct {
	At   time.Duration
	Node int
	Port uint8
	Down bool
}

// HopEvent takes a directed link of the Topology down (Down true) or brings it back at time At
// on the fabric clock, as Fabric.SetHopDown does.
type HopEvent struct {
	At   time.Duration
	Hop  Hop
	Down bool
}

// HopDown takes hop h down from from to until (until 0: for good). It returns p for chaining.
func (p *Plan) HopDown(h Hop, from, until time.Duration) *Plan {
	p.HopEvents = append(p.HopEvents, HopEvent{At: from, Hop: h, Down: true})
	if until > 0 {
		p.HopEvents = append(p.HopEvents, HopEvent{At: until, Hop: h})
	}
	return p
}

// CableDown cuts the cable of hop h, both directions (h and h.Reverse()), from from to until
// (until 0: for good). It returns p.
func (p *Plan) CableDown(h Hop, from, until time.Duration) *Plan {
	return p.HopDown(h, from, until).HopDown(h.Reverse(), from, until)
}

// Range is a closed interval of durations [Min, Max].
type Range struct{ Min, Max time.Duration }

func (r Range) draw(rng *rand.Rand) time.Duration {
	if r.Max <= r.Min {
		return r.Min
	}
	return r.Min + time.Duration(rng.Int64N(int64(r.Max-r.Min)+1))
}

// PortDown adds a pulled cable on (node, port) from from to until (until 0: for good). It
// returns p for chaining.
func (p *Plan) PortDown(node int, port uint8, from, until time.Duration) *Plan {
	p.Events = append(p.Events, PortEvent{At: from, Node: node, Port: port, Down: true})
	if until > 0 {
		p.Events = append(p.Events, PortEvent{At: until, Node: node, Port: port, Down: false})
	}
	return p
}

// Partition takes every path between the node sets a and b down, both ways, on every rail,
// from from to until (until 0: for good), without port events: the nodes see their ports up
// and learn of the partition only from lost packets. It returns p.
func (p *Plan) Partition(a, b []int, from, until time.Duration) *Plan {
	p.Rules = append(p.Rules,
		Rule{Src: slices.Clone(a), Dst: slices.Clone(b), From: from, Until: until, Down: true},
		Rule{Src: slices.Clone(b), Dst: slices.Clone(a), From: from, Until: until, Down: true})
	return p
}

// Flaps adds n flaps of (node, port) starting at start: down for a duration drawn from down,
// then up for one drawn from up, the draws seeded by p.Seed and the port. It returns the time
// the last flap ends (the port is up from then on).
func (p *Plan) Flaps(node int, port uint8, n int, start time.Duration, down, up Range) time.Duration {
	rng := rand.New(rand.NewPCG(p.Seed, mix(uint64(node)<<8|uint64(port)|0xf1a9<<32)))
	t := start
	for i := 0; i < n; i++ {
		d := down.draw(rng)
		p.PortDown(node, port, t, t+d)
		t += d + up.draw(rng)
	}
	return t
}

// Noise adds a rule that loses each packet on every link with probability drop and delays it
// by a per-link latency drawn from delay (seeded by p.Seed and the link's ends): background
// loss and latency for fault tests. nodes is the number of nodes, ports the rails per node.
// It returns p.
func (p *Plan) Noise(nodes int, ports uint8, drop float64, delay Range) *Plan {
	rng := rand.New(rand.NewPCG(p.Seed, 0x6e6f697365))
	for s := 0; s < nodes; s++ {
		for d := 0; d < nodes; d++ {
			if s == d {
				continue
			}
			for r := uint8(1); r <= ports; r++ {
				p.Rules = append(p.Rules, Rule{Src: []int{s}, Dst: []int{d}, Port: r, Drop: drop, Delay: delay.draw(rng)})
			}
		}
	}
	return p
}

// rule is an applied Rule with its identity for the per-link decisions.
type rule struct {
	Rule
	id   uint64
	seed uint64
}

func (r *rule) active(now time.Duration) bool {
	return now >= r.From && (r.Until == 0 || now < r.Until)
}

func (r *rule) matches(k linkKey) bool {
	if r.Port != 0 && r.Port != k.rail {
		return false
	}
	if r.Src != nil && !slices.Contains(r.Src, int(k.src)) {
		return false
	}
	if r.Dst != nil && !slices.Contains(r.Dst, int(k.dst)) {
		return false
	}
	return r.PathBits == nil || slices.Contains(r.PathBits, k.bits)
}

// lose decides, for the n-th packet (1-based) the rule matched on the link with hash lh,
// whether it is lost.
func (r *rule) lose(lh, n uint64) bool {
	if r.Down {
		return true
	}
	if r.DropEvery > 0 && n%uint64(r.DropEvery) == 0 {
		return true
	}
	return r.chance(r.Drop, lh, n, 0)
}

// Salts of the independent random decisions of a rule on one packet (0: loss).
const (
	saltDuplicate = 1 << 32
	saltReorder   = 2 << 32
)

// chance draws the decision salt, of probability prob, for the n-th packet the rule matched on
// the link with hash lh.
func (r *rule) chance(prob float64, lh, n, salt uint64) bool {
	if prob <= 0 {
		return false
	}
	u := mix(r.seed ^ mix(r.id+0x9e37+salt) ^ mix(lh) ^ mix(n+0x51ed))
	return float64(u>>11)/(1<<53) < prob
}

// holdBack is how long the rule holds back the n-th packet it matched on the link lh (Reorder).
func (r *rule) holdBack(lh, n uint64) time.Duration {
	if !r.chance(r.Reorder, lh, n, saltReorder) {
		return 0
	}
	if r.ReorderBy > 0 {
		return r.ReorderBy
	}
	return time.Millisecond
}

// mix is splitmix64's finalizer: a bijective hash of 64 bits.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
