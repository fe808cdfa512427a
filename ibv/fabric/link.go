package fabric

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/internal/engine"
)

// linkKey names a directed link: source and destination node, rail (the port number at both
// ends) and the source path bits.
type linkKey struct {
	src, dst int32
	rail     uint8
	bits     uint8
}

func (k linkKey) hash() uint64 {
	return mix(uint64(uint32(k.src))<<32|uint64(uint32(k.dst))) ^ mix(uint64(k.rail)<<8|uint64(k.bits)|1<<40)
}

// link is a FIFO of packets from one port to another, served by its own goroutine.
type link struct {
	f        *Fabric
	key      linkKey
	lh       uint64
	src, dst *port
	back     replyLink // the way back for responses to the packets of this link

	mu     sync.Mutex        // guards counts and injAt; taken before netsim.mu and qmu
	counts map[uint64]uint64 // packets matched per rule id
	injAt  time.Duration     // when the last packet entered the network (FIFO with a Topology)

	qmu    sync.Mutex // guards the packets due for delivery
	q      []packet
	head   int
	dead   bool // the goroutine has ended: packets pushed now are lost
	signal chan struct{}
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once

	sent, lost, delivered atomic.Uint64
}

type packet struct {
	buf  *[]byte
	due  time.Duration // fabric clock
	late bool          // held back (Rule.Reorder): later packets due earlier overtake it
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096+128); return &b }}

// linkTo returns the link for key, starting it when there is none; nil when either node has no
// open device or the fabric is closed.
func (f *Fabric) linkTo(k linkKey, src, dst *port) *link {
	f.mu.RLock()
	l := f.links[k]
	f.mu.RUnlock()
	if l != nil {
		return l
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if l = f.links[k]; l != nil {
		return l
	}
	if f.closed || !src.n.open || !dst.n.open {
		return nil
	}
	l = &link{f: f, key: k, lh: k.hash(), src: src, dst: dst, counts: map[uint64]uint64{},
		signal: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	l.back = replyLink{f: f, from: dst, to: src, bits: k.bits}
	f.links[k] = l
	go l.run()
	return l
}

// send carries one packet from port src to port dst with source path bits bits and destination
// path bits dbits (the route in a Topology). It never blocks on the network: the packet is
// queued on its link or in the network (or lost).
func (f *Fabric) send(src, dst *port, bits, dbits uint8, hdr, payload []byte) error {
	_, err := f.sendCopy(src, dst, bits, dbits, hdr, payload, false)
	return err
}

// sendCopy is send; with replica set, in a Topology, the packet is a switch's copy of one that
// already crossed the sender's first link (multicast: the leaf switch replicates, [IBA] §10.5):
// it starts at the route's second hop, one link latency and one service time of that first link
// later, and does not load the first link again. up reports whether the route has a first link
// (a packet to the sender's own node has none).
func (f *Fabric) sendCopy(src, dst *port, bits, dbits uint8, hdr, payload []byte, replica bool) (up bool, err error) {
	if src.down.Load() {
		return false, fmt.Errorf("fabric: %w: port %d of node %d is down", ibv.ErrUnreachable, src.num, src.n.idx)
	}
	if src.num != dst.num {
		return false, fmt.Errorf("fabric: %w: port %d of node %d and port %d of node %d are on different rails",
			ibv.ErrUnreachable, src.num, src.n.idx, dst.num, dst.n.idx)
	}
	var rk routeKey
	var route []int32
	if f.net != nil {
		rk = routeKey{src: int32(src.n.idx), dst: int32(dst.n.idx), rail: src.num, bits: dbits}
		var err error
		if route, err = f.net.route(rk); err != nil {
			return false, err
		}
	}
	up = len(route) > 0
	var skip time.Duration // a replica's head start: the first link, crossed by the original
	if replica && len(route) > 1 {
		route = route[1:]
		skip = f.net.t.LinkLatency + f.net.t.HostGap
		if r := f.net.t.LinkRate; r > 0 {
			skip += time.Duration(int64(len(hdr)+len(payload)) * int64(time.Second) / r)
		}
	}
	src.tx.Add(1)
	l := f.linkTo(linkKey{src: int32(src.n.idx), dst: int32(dst.n.idx), rail: src.num, bits: bits}, src, dst)
	if l == nil {
		src.lost.Add(1)
		return up, nil // nobody there: lost in the network, as a packet to a dead host
	}
	now := f.Now()
	rules := *f.rules.Load()
	l.mu.Lock()
	l.sent.Add(1)
	var delay, hold time.Duration
	lost, dup := false, false
	for _, r := range rules {
		if !r.active(now) || !r.matches(l.key) {
			continue
		}
		n := l.counts[r.id] + 1
		l.counts[r.id] = n
		if !lost && r.lose(l.lh, n) {
			lost = true
		}
		dup = dup || r.chance(r.Duplicate, l.lh, n, saltDuplicate)
		hold = max(hold, r.holdBack(l.lh, n))
		delay += r.Delay
	}
	if lost {
		l.mu.Unlock()
		l.lost.Add(1)
		src.lost.Add(1)
		return up, nil
	}
	copies := 1
	if dup {
		copies = 2
	}
	for range copies {
		bp := bufPool.Get().(*[]byte)
		*bp = append(append((*bp)[:0], hdr...), payload...)
		if f.net != nil {
			at := max(now+delay+hold+skip, l.injAt)
			l.injAt = at
			f.net.inject(l, rk, route, bp, at, now)
		} else {
			l.push(packet{buf: bp, due: now + delay + hold, late: hold > 0})
		}
	}
	l.mu.Unlock()
	return up, nil
}

// push queues a packet for delivery at p.due; it is lost when the link has stopped.
func (l *link) push(p packet) {
	l.qmu.Lock()
	if l.dead {
		l.qmu.Unlock()
		l.lost.Add(1)
		l.src.lost.Add(1)
		bufPool.Put(p.buf)
		return
	}
	// FIFO, except that a packet due earlier overtakes held-back ones (Rule.Reorder)
	i := len(l.q)
	for i > l.head && l.q[i-1].late && l.q[i-1].due > p.due {
		i--
	}
	l.q = slices.Insert(l.q, i, p)
	l.qmu.Unlock()
	select {
	case l.signal <- struct{}{}:
	default:
	}
}

// halt stops the link's goroutine and waits for it; queued packets are dropped.
func (l *link) halt() {
	l.once.Do(func() { close(l.stop) })
	<-l.done
}

// next returns the head packet when it is due at now; otherwise how long until it is (wait > 0),
// or false when the queue is empty.
func (l *link) next(now time.Duration) (p packet, wait time.Duration, ok bool) {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	if l.head == len(l.q) {
		l.q, l.head = l.q[:0], 0
		return packet{}, 0, false
	}
	p = l.q[l.head]
	if p.due > now {
		return packet{}, p.due - now, true
	}
	l.q[l.head] = packet{}
	l.head++
	return p, 0, true
}

// idle reports whether no packet is due now (the batch of deferred ACKs may be flushed).
func (l *link) idle(now time.Duration) bool {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	return l.head == len(l.q) || l.q[l.head].due > now
}

func (l *link) run() {
	defer close(l.done)
	var b engine.Batch
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
		l.qmu.Lock()
		for i := l.head; i < len(l.q); i++ {
			bufPool.Put(l.q[i].buf)
		}
		l.q, l.head, l.dead = nil, 0, true
		l.qmu.Unlock()
	}()
	for {
		p, d, ok := l.next(l.f.Now())
		if !ok {
			select {
			case <-l.signal:
				continue
			case <-l.stop:
				return
			}
		}
		if d > 0 {
			if t == nil {
				t = time.NewTimer(d)
			} else {
				t.Reset(d)
			}
			select {
			case <-t.C:
			case <-l.signal: // a packet due earlier may have overtaken the head (Rule.Reorder)
				t.Stop()
			case <-l.stop:
				return
			}
			continue
		}
		l.deliver(&b, *p.buf)
		bufPool.Put(p.buf)
	}
}

// deliver hands pkt to the destination device (a down port at either end loses it).
func (l *link) deliver(b *engine.Batch, pkt []byte) {
	if l.src.down.Load() || l.dst.down.Load() {
		l.lost.Add(1)
		l.src.lost.Add(1)
		return
	}
	n := l.dst.n
	n.devMu.RLock()
	defer n.devMu.RUnlock()
	if n.dev == nil {
		l.lost.Add(1)
		l.src.lost.Add(1)
		return
	}
	e := n.dev.Engine()
	e.Deliver(b, pkt, &l.back)
	l.delivered.Add(1)
	l.dst.rx.Add(1)
	if l.idle(l.f.Now()) {
		e.EndBatch(b)
	}
}

// replyLink is the engine.Link of a link's packets: responses travel the reverse link.
type replyLink struct {
	f        *Fabric
	from, to *port
	bits     uint8
}

// Reply sends a response back: its DLID is the request's SLID, so it is routed by the request's
// source path bits.
func (r *replyLink) Reply(hdr, payload []byte) error {
	return r.f.send(r.from, r.to, r.bits, r.bits, hdr, payload)
}
func (r *replyLink) RemoteAddr() string { return r.to.addr }

// transport is the engine.Transport of a node's device.
type transport node

func (t *transport) ends(path ibv.AHAttr) (*port, *port, error) {
	n := (*node)(t)
	src, err := n.port(path.PortNum)
	if err != nil {
		return nil, nil, err
	}
	n.f.mu.RLock()
	dst := n.f.addrs[path.Addr]
	n.f.mu.RUnlock()
	if dst == nil {
		return nil, nil, fmt.Errorf("fabric: %w: no port at %q", ibv.ErrUnreachable, path.Addr)
	}
	return src, dst, nil
}

// Send queues one packet on the link of path (engine.Transport).
func (t *transport) Send(path ibv.AHAttr, hdr, payload []byte) error {
	src, dst, err := t.ends(path)
	if err != nil {
		return err
	}
	return (*node)(t).f.send(src, dst, path.SrcPathBits, dstBits(path, dst), hdr, payload)
}

// dstBits are the destination path bits of path: its DLID minus the base LID of the destination
// port when the DLID is one of the port's 2^LMC LIDs, else its source path bits (software
// consumers that set only those).
func dstBits(path ibv.AHAttr, dst *port) uint8 {
	if d := int(path.DLID) - int(dst.lid); d >= 0 && d < 1<<dst.n.f.cfg.LMC {
		return uint8(d)
	}
	return path.SrcPathBits
}

// Probe checks a path both ways for an APM path load (engine.Transport): both ports up, on one
// rail, a device at the far end, and no rule taking the path down or losing every packet; it
// waits the round-trip delay of the rules and checks again. Errors wrap ErrPathDown (and
// ibv.ErrUnreachable) or ctx's error.
func (t *transport) Probe(ctx context.Context, path ibv.AHAttr) error {
	f := (*node)(t).f
	src, dst, err := t.ends(path)
	if err != nil {
		return err
	}
	dbits := dstBits(path, dst)
	rtt, err := f.probe(src, dst, path.SrcPathBits, dbits)
	if err != nil || rtt <= 0 {
		return err
	}
	tm := time.NewTimer(rtt)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
		return fmt.Errorf("fabric: probe %s: %w", path.Addr, ctx.Err())
	}
	_, err = f.probe(src, dst, path.SrcPathBits, dbits)
	return err
}

func (f *Fabric) probe(src, dst *port, bits, dbits uint8) (time.Duration, error) {
	fail := func(why string) error {
		return fmt.Errorf("fabric: %w (%w): port %d of node %d to node %d: %s", ErrPathDown, ibv.ErrUnreachable,
			src.num, src.n.idx, dst.n.idx, why)
	}
	switch {
	case src.num != dst.num:
		return 0, fail("different rails")
	case src.down.Load():
		return 0, fail("local port down")
	case dst.down.Load():
		return 0, fail("remote port down")
	}
	f.mu.RLock()
	open := dst.n.open
	f.mu.RUnlock()
	if !open {
		return 0, fail("no device at the remote node")
	}
	if f.net != nil {
		// the request's route by the destination path bits, the response's by the source's
		for _, k := range []routeKey{{src: int32(src.n.idx), dst: int32(dst.n.idx), rail: src.num, bits: dbits},
			{src: int32(dst.n.idx), dst: int32(src.n.idx), rail: src.num, bits: bits}} {
			h, down, err := f.net.downOn(k)
			if err != nil {
				return 0, fail(err.Error())
			}
			if down {
				return 0, fail(fmt.Sprintf("hop %v down", h))
			}
		}
	}
	now := f.Now()
	var rtt time.Duration
	for _, k := range []linkKey{{src: int32(src.n.idx), dst: int32(dst.n.idx), rail: src.num, bits: bits},
		{src: int32(dst.n.idx), dst: int32(src.n.idx), rail: src.num, bits: bits}} {
		for _, r := range *f.rules.Load() {
			if !r.active(now) || !r.matches(k) {
				continue
			}
			if r.Down || r.Drop >= 1 || r.DropEvery == 1 {
				return 0, fail("path down")
			}
			rtt += r.Delay
		}
	}
	return rtt, nil
}

var _ ibv.Driver = (*driver)(nil)
var _ ibv.SRQCreator = (*driver)(nil)
var _ engine.Transport = (*transport)(nil)
var _ engine.Link = (*replyLink)(nil)
