package fabric

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/goarmci/goarmci/ibv"
)

// netsim is the capacity model of a fabric with a Topology (FatTree documents it): a
// discrete-event simulation of the tree's hops on the fabric clock, run by one goroutine of the
// fabric and, for the events already due, by the senders that inject packets and the callers of
// the hop methods. Lock order: link.mu, netsim.mu, link.qmu.
type netsim struct {
	f       *Fabric
	t       FatTree
	ports   int
	quantum int

	mu     sync.Mutex
	hops   []hopState
	heap   []event
	seq    uint64
	wake   time.Duration // when run wakes next (-1: when kicked)
	routes map[routeKey][]int32
	kick   chan struct{}
	hca    *hca // the FatTree's HCAModel (nil without one)
}

// routeKey names a route, the unit of fairness (a flow).
type routeKey struct {
	src, dst   int32
	rail, bits uint8
}

// npkt is a packet in the network.
type npkt struct {
	l     *link
	buf   *[]byte
	size  int
	route []int32
	i     int           // the hop of route it is at
	tail  time.Duration // when its last byte reaches route[i]
	flow  routeKey
}

// event: a packet's head reaches the hop p.route[p.i] (p != nil), or hop finished sending size
// bytes, busy for svc (p == nil).
type event struct {
	at   time.Duration
	seq  uint64
	p    *npkt
	hop  int32
	size int
	svc  time.Duration
}

type flowQ struct {
	key     routeKey
	q       []*npkt
	head    int
	deficit int
}

type hopState struct {
	rate    int64         // bytes/s, 0: infinite
	gap     time.Duration // per packet, besides its bytes (FatTree.HostGap on a host's links)
	host    int32         // the node of a host's link (-1: a link between switches)
	out     bool          // a host's link to its leaf (host → leaf)
	rem     int64         // carried remainder of the service times (ns·bytes/s)
	down    bool
	busy    bool
	freeAt  time.Duration
	flows   map[routeKey]*flowQ
	ring    []*flowQ // backlogged flows in round-robin order
	cur     int
	granted bool // ring[cur] has had its quantum this turn
	queued  int

	packets, bytes, lost uint64
	busyTime             time.Duration
}

func newNetsim(f *Fabric, t FatTree) *netsim {
	n := &netsim{f: f, t: t, ports: f.cfg.Ports, quantum: f.cfg.MTU + 256, wake: -1,
		routes: map[routeKey][]int32{}, kick: make(chan struct{}, 1)}
	for _, h := range t.hops(n.ports) {
		rate := t.LinkRate
		if t.UplinkRate != 0 && h.From.Kind != KindHost && h.To.Kind != KindHost {
			rate = t.UplinkRate
		}
		var gap time.Duration
		host := int32(-1)
		switch {
		case h.From.Kind == KindHost:
			gap, host = t.HostGap, int32(h.From.Index)
		case h.To.Kind == KindHost:
			gap, host = t.HostGap, int32(h.To.Index)
		}
		n.hops = append(n.hops, hopState{rate: rate, gap: gap, host: host, out: h.From.Kind == KindHost,
			flows: map[routeKey]*flowQ{}})
	}
	if t.HCA.on() {
		n.hca = &hca{m: t.HCA, nodes: map[int32]*hcaNode{}}
	}
	return n
}

// route returns the hop ids of k's route. Errors wrap ibv.ErrUnreachable (a node the tree does
// not attach, a Spine function out of range).
func (n *netsim) route(k routeKey) ([]int32, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.routeLocked(k)
}

func (n *netsim) routeLocked(k routeKey) ([]int32, error) {
	if r, ok := n.routes[k]; ok {
		return r, nil
	}
	H := n.t.Hosts()
	if int(k.src) >= H || int(k.dst) >= H {
		return nil, fmt.Errorf("fabric: %w: node %d or %d is not attached to the fat tree of %d hosts",
			ibv.ErrUnreachable, k.src, k.dst, H)
	}
	if n.t.LeafOf(int(k.src)) != n.t.LeafOf(int(k.dst)) {
		if s := n.t.SpineOf(int(k.src), int(k.dst), k.bits); s < 0 || s >= n.t.Spines {
			return nil, fmt.Errorf("fabric: %w: route from node %d to %d (path bits %d) through spine %d of %d",
				ibv.ErrUnreachable, k.src, k.dst, k.bits, s, n.t.Spines)
		}
	}
	var ids []int32
	for _, h := range n.t.Route(k.rail, int(k.src), int(k.dst), k.bits) {
		ids = append(ids, int32(n.t.hopID(n.ports, h)))
	}
	n.routes[k] = ids
	return ids, nil
}

// inject puts a packet of l with route r (route's result for its flow k) into the network at
// time at ≥ now on the fabric clock; it runs the events due by now.
func (n *netsim) inject(l *link, k routeKey, r []int32, buf *[]byte, at, now time.Duration) {
	if len(r) == 0 {
		l.push(packet{buf: buf, due: at})
		return
	}
	p := &npkt{l: l, buf: buf, size: len(*buf), route: r, tail: at, flow: k}
	n.mu.Lock()
	n.push(event{at: at, p: p, hop: r[0]})
	n.advance(now)
	n.unlock()
}

// unlock releases mu and wakes run when the first event is now earlier than its wake-up.
func (n *netsim) unlock() {
	kick := len(n.heap) > 0 && (n.wake < 0 || n.heap[0].at < n.wake)
	n.mu.Unlock()
	if kick {
		select {
		case n.kick <- struct{}{}:
		default:
		}
	}
}

// run is the fabric's goroutine of the model: it runs the events as they fall due.
func (n *netsim) run(stop <-chan struct{}) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		n.mu.Lock()
		now := n.f.Now()
		n.advance(now)
		wait := time.Duration(-1)
		n.wake = -1
		if len(n.heap) > 0 {
			n.wake = n.heap[0].at
			wait = n.wake - now
		}
		n.mu.Unlock()
		if wait >= 0 {
			t.Reset(wait)
		}
		select {
		case <-stop:
			t.Stop()
			return
		case <-n.kick:
			t.Stop()
		case <-t.C:
		}
	}
}

// advance runs the events due by now, in time order.
func (n *netsim) advance(now time.Duration) {
	for len(n.heap) > 0 && n.heap[0].at <= now {
		e := n.pop()
		if e.p != nil {
			n.arrive(e.p, e.hop, e.at)
			continue
		}
		h := &n.hops[e.hop]
		h.packets++
		h.bytes += uint64(e.size)
		h.busyTime += e.svc
		h.busy = false
		h.freeAt = e.at
		n.start(e.hop, e.at)
	}
}

// arrive queues p at hop id (its head arriving at t), or loses it when the hop is down.
func (n *netsim) arrive(p *npkt, id int32, t time.Duration) {
	h := &n.hops[id]
	if h.down {
		h.lost++
		p.lose()
		return
	}
	fq := h.flows[p.flow]
	if fq == nil {
		fq = &flowQ{key: p.flow}
		h.flows[p.flow] = fq
	}
	if fq.head == len(fq.q) {
		h.ring = append(h.ring, fq)
	}
	fq.q = append(fq.q, p)
	h.queued++
	if !h.busy {
		n.start(id, max(t, h.freeAt))
	}
}

// start sends the next packet of hop id from time t, if any.
func (n *netsim) start(id int32, t time.Duration) {
	h := &n.hops[id]
	p := h.pick(n.quantum)
	if p == nil {
		return
	}
	h.busy = true
	svc := h.service(p.size)
	if n.hca != nil && h.host >= 0 {
		svc += n.hca.charge(h.host, h.out, p.flow, *p.buf)
	}
	fin := max(t+svc, p.tail)
	n.push(event{at: fin, hop: id, size: p.size, svc: svc})
	lat := n.t.LinkLatency
	if p.i+1 == len(p.route) {
		p.l.push(packet{buf: p.buf, due: fin + lat})
		return
	}
	p.i++
	p.tail = fin + lat
	// A switch cuts through onto the next link only as far as the packet's tail keeps up: it
	// starts there no earlier than the tail's arrival minus the packet's time on that link (no
	// underrun), so a faster link never idles behind a slower one (a hop slowed by SetHopRate, an
	// UplinkRate below LinkRate) while other flows wait for it.
	next := p.route[p.i]
	head := t + lat
	if r := n.hops[next].rate; r > 0 {
		head = max(head, p.tail-time.Duration(int64(p.size)*int64(time.Second)/r))
	}
	n.push(event{at: head, p: p, hop: next})
}

// service is the time a packet of size bytes occupies the hop.
func (h *hopState) service(size int) time.Duration {
	if h.rate <= 0 {
		return h.gap
	}
	ns := int64(size) * int64(time.Second)
	d := ns / h.rate
	h.rem += ns % h.rate
	if h.rem >= h.rate {
		d++
		h.rem -= h.rate
	}
	return time.Duration(d) + h.gap
}

// pick takes the next packet by deficit round robin over the backlogged flows.
func (h *hopState) pick(quantum int) *npkt {
	for len(h.ring) > 0 {
		if h.cur >= len(h.ring) {
			h.cur = 0
		}
		fq := h.ring[h.cur]
		if !h.granted {
			fq.deficit += quantum
			h.granted = true
		}
		if p := fq.q[fq.head]; p.size <= fq.deficit {
			fq.deficit -= p.size
			fq.q[fq.head] = nil
			fq.head++
			h.queued--
			if fq.head == len(fq.q) {
				fq.q, fq.head, fq.deficit = fq.q[:0], 0, 0
				h.ring = slices.Delete(h.ring, h.cur, h.cur+1)
				h.granted = false
			}
			return p
		}
		h.cur++
		h.granted = false
	}
	return nil
}

// purge loses the packets queued at the hop.
func (h *hopState) purge() {
	for _, fq := range h.ring {
		for _, p := range fq.q[fq.head:] {
			h.lost++
			p.lose()
		}
		fq.q, fq.head, fq.deficit = nil, 0, 0
	}
	h.ring, h.cur, h.granted, h.queued = nil, 0, false, 0
}

func (p *npkt) lose() {
	p.l.lost.Add(1)
	p.l.src.lost.Add(1)
	bufPool.Put(p.buf)
}

func (n *netsim) push(e event) {
	n.seq++
	e.seq = n.seq
	n.heap = append(n.heap, e)
	i := len(n.heap) - 1
	for i > 0 {
		j := (i - 1) / 2
		if !n.heap[i].less(&n.heap[j]) {
			break
		}
		n.heap[i], n.heap[j] = n.heap[j], n.heap[i]
		i = j
	}
}

func (n *netsim) pop() event {
	h := n.heap
	e := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = event{}
	h = h[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h[l].less(&h[m]) {
			m = l
		}
		if r < len(h) && h[r].less(&h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	n.heap = h
	return e
}

func (e *event) less(o *event) bool {
	return e.at < o.at || (e.at == o.at && e.seq < o.seq)
}

// HopStats are the counters and state of one directed link of the topology.
type HopStats struct {
	// Packets and Bytes the hop finished sending (bytes as on the wire: headers and payload).
	Packets, Bytes uint64
	// Lost: packets lost at the hop while it was down.
	Lost uint64
	// Busy is the virtual time the hop spent sending them (Bytes at its rates, and HostGap per
	// packet and the HCAModel's charges on a host's link).
	Busy time.Duration
	// Queued is the number of packets waiting for the hop now.
	Queued int
	// Rate is its capacity in bytes/s (0: infinite); Down whether it is down.
	Rate int64
	Down bool
}

// topo returns the model and the id of h. Errors wrap ErrNoTopology or ErrNoHop (and
// ibv.ErrInvalidArgument).
func (f *Fabric) topo(h Hop) (*netsim, int, error) {
	if f.net == nil {
		return nil, 0, fmt.Errorf("%w (%w)", ErrNoTopology, ibv.ErrInvalidArgument)
	}
	id := f.net.t.hopID(f.net.ports, h)
	if id < 0 {
		return nil, 0, fmt.Errorf("%w (%w): %v", ErrNoHop, ibv.ErrInvalidArgument, h)
	}
	return f.net, id, nil
}

// Hops lists the directed links of the topology, every rail's: host→leaf, leaf→host,
// leaf→spine, spine→leaf (nil without a Topology).
func (f *Fabric) Hops() []Hop {
	if f.net == nil {
		return nil
	}
	return f.net.t.hops(f.net.ports)
}

// Route returns the hops a packet from node src to node dst on rail with destination path bits
// bits crosses (FatTree.Route). Errors wrap ErrNoTopology, ibv.ErrInvalidArgument (an unknown
// rail) or ibv.ErrUnreachable (a node the tree does not attach).
func (f *Fabric) Route(src, dst int, rail, bits uint8) ([]Hop, error) {
	if f.net == nil {
		return nil, fmt.Errorf("%w (%w)", ErrNoTopology, ibv.ErrInvalidArgument)
	}
	if rail < 1 || int(rail) > f.cfg.Ports || int(bits) >= 1<<f.cfg.LMC || src < 0 || dst < 0 {
		return nil, fmt.Errorf("fabric: %w: route from node %d to %d on rail %d, path bits %d",
			ibv.ErrInvalidArgument, src, dst, rail, bits)
	}
	if _, err := f.net.route(routeKey{src: int32(src), dst: int32(dst), rail: rail, bits: bits}); err != nil {
		return nil, err
	}
	return f.net.t.Route(rail, src, dst, bits), nil
}

// HopStats returns the counters and state of hop h. Errors wrap ErrNoTopology or ErrNoHop.
func (f *Fabric) HopStats(h Hop) (HopStats, error) {
	n, id, err := f.topo(h)
	if err != nil {
		return HopStats{}, err
	}
	n.mu.Lock()
	defer n.unlock()
	n.advance(f.Now())
	s := &n.hops[id]
	return HopStats{Packets: s.packets, Bytes: s.bytes, Lost: s.lost, Busy: s.busyTime, Queued: s.queued,
		Rate: s.rate, Down: s.down}, nil
}

// SetHopRate sets the capacity of hop h in bytes/s (0: infinite) from now on: packets that start
// on it from now are sent at the new rate (a hot spot, or a degraded cable). Errors wrap
// ErrNoTopology, ErrNoHop or ibv.ErrInvalidArgument (a negative rate).
func (f *Fabric) SetHopRate(h Hop, rate int64) error {
	n, id, err := f.topo(h)
	if err != nil {
		return err
	}
	if rate < 0 {
		return fmt.Errorf("fabric: %w: rate %d B/s", ibv.ErrInvalidArgument, rate)
	}
	n.mu.Lock()
	defer n.unlock()
	n.advance(f.Now())
	n.hops[id].rate, n.hops[id].rem = rate, 0
	return nil
}

// SetHopDown takes hop h down (down true) or brings it back: while down, packets that reach it
// are lost, with those waiting for it when it goes down (a packet it has begun to send goes on),
// and path probes — APM path loads — across it fail. Nobody is told (no port event: a fault
// inside the network, found by ACK timeouts, as [Vishnu07 ch. 9]'s network faults); for a pulled
// host cable use SetPortDown. Errors wrap ErrNoTopology or ErrNoHop.
func (f *Fabric) SetHopDown(h Hop, down bool) error {
	n, id, err := f.topo(h)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.unlock()
	n.advance(f.Now())
	s := &n.hops[id]
	s.down = down
	if down {
		s.purge()
	}
	return nil
}

// downOn reports the first hop of the route of k that is down.
func (n *netsim) downOn(k routeKey) (Hop, bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r, err := n.routeLocked(k)
	if err != nil {
		return Hop{}, false, err
	}
	for i, id := range r {
		if n.hops[id].down {
			return n.t.Route(k.rail, int(k.src), int(k.dst), k.bits)[i], true, nil
		}
	}
	return Hop{}, false, nil
}
