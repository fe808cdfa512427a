// Package engine owns the RC and UD transport semantics of every goarmci network provider (tcp,
// udp, ...): PSN assignment and segmentation into path-MTU packets, coalesced ACKs, the ACK timer
// with go-back-N retransmission and retry counts, RNR NAKs, RDMA write/read, the 64-bit atomics
// and goarmci's extended atomics and accumulate, the responder's PSN check with duplicate
// suppression (duplicate reads re-read, duplicate atomics replay a recorded result), memory
// access checks, automatic path migration (APM), and the DC queue pair, which runs the same RC
// requester and responder per peer over datagrams (dc.go). Providers only move packets: they give the
// engine a Transport and hand inbound packets to Deliver.
//
// The semantics follow the InfiniBand RC/UD transport (IBA vol. 1 ch. 9–10; [Vishnu07 §2.2] for the
// QP and APM states, ch. 9 for the APM modules: path loading on REARM, automatic migration on a
// fault of the primary path) and the reliability design of [Vishnu09] (timer-based resend,
// duplicates ignored, one sequence space per connection).
package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/wire"
)

// Transport is what a provider gives the engine to move packets.
type Transport interface {
	// Send transmits one packet — hdr followed by payload — on path (path.PortNum is the local
	// port, Addr/DLID/SrcPathBits name the destination). It must neither retain hdr or payload
	// after returning, nor block for long, nor call Engine.Deliver before returning. An error
	// means the packet was not sent (a path fault); the engine recovers by retransmission,
	// migration or failure of the QP.
	Send(path ibv.AHAttr, hdr, payload []byte) error
	// Probe checks that path can carry packets (APM path load, REARM→ARMED). It may block until
	// ctx ends.
	Probe(ctx context.Context, path ibv.AHAttr) error
}

// RefSender is an optional extension of a Transport that can send a payload without copying
// it: SendRef is Send, except that the transport may keep payload — a view of registered memory
// (an MR or a work request's local buffer) — and read it after returning, until the packet is
// written. The engine uses it only for such views, never for its scratch buffers. Reading after
// returning is safe because the engine completes a request only once it is acknowledged, which
// implies its packets were written; a packet still queued after that is a retransmitted
// duplicate, which the responder discards whatever bytes it carries. The transport must read
// the memory only through the kernel (a system call): memory unmapped meanwhile is then an
// error (EFAULT) instead of a fault, and the race detector, which does not see those reads,
// reports no race between a late duplicate and the owner's next use of its buffer.
type RefSender interface {
	SendRef(path ibv.AHAttr, hdr, payload []byte) error
}

// RefReplier is the RefSender extension of a Link (RDMA read responses are views of the
// responder's registered memory).
type RefReplier interface {
	ReplyRef(hdr, payload []byte) error
}

// Corker is an optional extension of a Transport that can batch packets: the engine calls Cork
// before it sends several packets on a path in a row and Uncork after them; the transport may
// hold the packets in between and write them together (one system call for a burst of
// segments). Cork/Uncork pairs on one path may nest and come from several goroutines.
type Corker interface {
	Cork(path ibv.AHAttr)
	Uncork(path ibv.AHAttr)
}

// LinkCorker is the Corker extension of a Link (read responses).
type LinkCorker interface {
	Cork()
	Uncork()
}

// StreamActivity is an optional extension of a Reliable Transport: LastActivity is when (ns,
// time.Now().UnixNano()) the stream of path last moved bytes in either direction (0: no
// stream). While it does, a missing ACK means bytes still queued on a slow path, not a dead
// one: the liveness timer (Config.Reliable) waits.
type StreamActivity interface {
	LastActivity(path ibv.AHAttr) int64
}

// Link is the way back to the sender of an inbound packet: responses (ACKs, read responses,
// atomic ACKs) go back on the link their request came in on.
type Link interface {
	// Reply sends a response packet back; the rules of Transport.Send apply.
	Reply(hdr, payload []byte) error
	// RemoteAddr is the provider address of the sending port (WC.SrcAddr of UD receives).
	RemoteAddr() string
}

// Batch collects the deferred ACKs of the packets one provider goroutine delivers in a row
// (ACK coalescing). A provider keeps one Batch per reader goroutine, passes it to every Deliver
// and calls EndBatch before it blocks for more input. A nil Batch sends ACKs at once.
type Batch struct {
	qps []*QP
	tmp [wire.MaxHeaderLen]byte // header scratch (place.go)
}

// Config configures an engine.
type Config struct {
	// Transport moves packets (required).
	Transport Transport
	// Port describes a local port (its MTU bounds the path MTU and UD datagrams).
	Port func(num uint8) (ibv.PortAttr, error)
	// MaxMsgSize bounds RC messages in bytes (default 1 GiB).
	MaxMsgSize uint64
	// TimeoutFloor is the smallest ACK timeout used whatever the QP's Timeout (default 10 ms):
	// 4.096 µs·2^t suits hardware, not a software stack behind a scheduler.
	TimeoutFloor time.Duration
	// Tick is the timer resolution (default 2 ms).
	Tick time.Duration
	// Window is the number of packets a QP keeps in flight before it waits for ACKs (default 128).
	Window int
	// WindowBytes, when not 0, also bounds the payload bytes a QP keeps in flight (at least 2
	// packets go out whatever their size). With large segments (SegmentSize) a window of packets
	// would put tens of MiB in flight, queued in front of every later request on a slow path;
	// a window of bytes alone would hold small messages to a few packets.
	WindowBytes int
	// SegmentSize, when larger than a queue pair's path MTU, is the RC segment size in bytes
	// (the payload of one PSN) on this engine (0: the path MTU). IB's path MTU (at most 4 KiB)
	// is a link-layer limit that a byte stream does not have, and per-packet costs (headers,
	// locks, system calls) dominate 4 KiB packets. Both ends of a connection must use the same
	// value: the responder segments read responses and the requester checks them.
	SegmentSize int
	// Log receives debug and warning messages (default: none).
	Log *zerolog.Logger
	// Reliable declares that the transport neither loses nor reorders packets while a path is
	// up (a byte stream). The ACK timer then works as a liveness timer: it fires only when no
	// response has arrived from the peer queue pair on the primary path (and the path's stream
	// moved no bytes: StreamActivity) for a whole timeout. On a stream a late ACK
	// means queueing (e.g. behind a large read response going the other way), not loss, and a
	// go-back-N would only add load; a broken stream is reported through PathFault, a silent
	// dead path still times out.
	Reliable bool
}

// Engine is the transport engine of one device.
type Engine struct {
	cfg    Config
	tr     Transport
	ref    RefSender // tr's zero-copy send, or nil
	corker Corker    // tr's batching, or nil
	log    zerolog.Logger
	floor  int64 // ns
	window int32

	mu     sync.RWMutex
	qps    map[uint32]*QP
	closed bool

	mcMu sync.RWMutex // guards mc and every QP's mcast
	mc   mcastState

	kick    chan struct{}
	ticking atomic.Bool            // the timer loop ticks every cfg.Tick (no kick needed)
	arrival atomic.Pointer[func()] // SetArrival's hook, called at the end of every batch
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New starts an engine; its timer goroutine runs until Close.
func New(cfg Config) *Engine {
	if cfg.MaxMsgSize == 0 {
		cfg.MaxMsgSize = 1 << 30
	}
	if cfg.TimeoutFloor <= 0 {
		cfg.TimeoutFloor = 10 * time.Millisecond
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 2 * time.Millisecond
	}
	if cfg.Window <= 0 {
		cfg.Window = 128
	}
	e := &Engine{cfg: cfg, tr: cfg.Transport, floor: int64(cfg.TimeoutFloor), window: int32(cfg.Window),
		qps: make(map[uint32]*QP), kick: make(chan struct{}, 1)}
	if rs, ok := cfg.Transport.(RefSender); ok {
		e.ref = rs
	}
	if c, ok := cfg.Transport.(Corker); ok {
		e.corker = c
	}
	if cfg.Log != nil {
		e.log = *cfg.Log
	} else {
		e.log = zerolog.Nop()
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.wg.Add(1)
	go e.timerLoop()
	return e
}

// Close stops the timer and every path-load probe and waits for them. QPs are not completed;
// the device destroys them first.
func (e *Engine) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	e.mu.Unlock()
	e.cancel()
	e.wg.Wait()
}

// windowFull reports whether a QP with packets unacknowledged packets may send no more: the
// packet window is full, or at least 2 packets are out and their payload (bytes, asked only
// then) has reached WindowBytes. Small messages are bounded by the packet count, large segments
// by their bytes.
func (e *Engine) windowFull(packets int32, bytes func() uint64) bool {
	if packets >= e.window {
		return true
	}
	return e.cfg.WindowBytes > 0 && packets >= 2 && bytes() >= uint64(e.cfg.WindowBytes)
}

// MaxMsgSize is the largest RC message in bytes.
func (e *Engine) MaxMsgSize() uint64 { return e.cfg.MaxMsgSize }

func (e *Engine) lookup(qpn uint32) *QP {
	e.mu.RLock()
	q := e.qps[qpn]
	e.mu.RUnlock()
	return q
}

// CreateQP creates the engine side of an RC, UD or DC queue pair; a provider's Driver.CreateQP
// delegates to it.
func (e *Engine) CreateQP(ibq *ibv.QP) (ibv.QPDriver, error) {
	if ibq.Type() != ibv.RC && ibq.Type() != ibv.UD && ibq.Type() != ibv.DC {
		return nil, fmt.Errorf("engine: %w: QP type %v", ibv.ErrUnsupported, ibq.Type())
	}
	if ibq.Num() >= ibv.MulticastQPN { // 0xFFFFFF addresses a multicast group
		return nil, fmt.Errorf("engine: %w: QP number %d beyond 24 bits", ibv.ErrInvalidArgument, ibq.Num())
	}
	if ibq.Num() > wire.MaxQPN {
		return nil, fmt.Errorf("engine: %w: QP number %d beyond 24 bits", ibv.ErrInvalidArgument, ibq.Num())
	}
	q := newQP(e, ibq)
	if q.typ == ibv.DC {
		q.dc = newDCTable(q)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ibv.ErrClosed
	}
	e.qps[q.num] = q
	return q, nil
}

func (e *Engine) removeQP(q *QP) {
	e.mu.Lock()
	if e.qps[q.num] == q {
		delete(e.qps, q.num)
	}
	e.mu.Unlock()
}

// Deliver processes one inbound packet that arrived on link. pkt is only read during the call
// (the payload is copied into memory). Malformed packets and packets for unknown QPs are
// dropped. b collects deferred ACKs (see Batch); it must not be used by two goroutines at once.
func (e *Engine) Deliver(b *Batch, pkt []byte, link Link) {
	raceAcquire()
	if len(pkt) > 0 && pkt[0] == McastMagic {
		e.deliverMcast(pkt, link)
		return
	}
	var p wire.Packet
	if err := wire.Decode(pkt, &p); err != nil {
		e.log.Debug().Err(err).Msg("engine: dropped malformed packet")
		return
	}
	e.deliver(b, &p, link)
}

func (e *Engine) deliver(b *Batch, p *wire.Packet, link Link) {
	q := e.lookup(p.DestQPN)
	if q != nil && q.dc != nil {
		q = q.dcRoute(p, link) // the record of the peer (dc.go)
	}
	if q == nil {
		return
	}
	// a packet on another link: a placement of its direction in progress may be stale
	q.revokeOnArrival(link, p.Opcode.IsRequest())
	if e.cfg.Reliable && q.deadline.Load() != 0 && !p.Opcode.IsRequest() && q.onPath(link) {
		q.lastRx.Store(time.Now().UnixNano())
	}
	switch {
	case p.Opcode == wire.OpUDSend:
		q.recvUD(p, link)
	case p.Opcode.IsRequest():
		if alt := q.altArmed.Load(); alt != nil && alt.Addr == link.RemoteAddr() {
			q.migrateResponder(alt)
		}
		q.respond(b, p, link)
	default:
		q.onResponse(p)
	}
}

// EndBatch sends the ACKs deferred during a batch of Deliver calls, then calls the arrival
// hook (SetArrival).
func (e *Engine) EndBatch(b *Batch) {
	if b == nil {
		return
	}
	for i, q := range b.qps {
		q.flushAck(b)
		b.qps[i] = nil
	}
	b.qps = b.qps[:0]
	if f := e.arrival.Load(); f != nil {
		(*f)()
	}
}

// SetArrival sets the function the device's receive loops call after each batch of packets
// they delivered (EndBatch): a consumer that parks while it waits for memory or completions
// the packets change learns that it may look again. f runs on the receive loop's goroutine and
// must not block; nil removes it.
func (e *Engine) SetArrival(f func()) {
	if f == nil {
		e.arrival.Store(nil)
		return
	}
	e.arrival.Store(&f)
}

// timeoutNS converts an IB local ACK timeout exponent (4.096 µs·2^t) to ns with the engine's
// floor; 0 is infinite (returns 0).
func (e *Engine) timeoutNS(t uint8) int64 {
	if t == 0 {
		return 0
	}
	if t > 31 {
		t = 31
	}
	ns := int64(4096) << t
	if ns < e.floor {
		ns = e.floor
	}
	return ns
}

// rnrDelayNS is the IB RNR timer table (IBA Table 45), in ns; code 0 (655 ms in IB) is the
// software default of 1 ms.
func rnrDelayNS(code uint8) int64 {
	us := [...]int64{1000, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560,
		3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880, 163840, 245760,
		327680, 491520}
	return us[code&31] * 1000
}

// kickTimer wakes the timer loop for a deadline just armed, unless the loop is ticking anyway
// (it then sees the deadline at its next tick): a timer goroutine woken for every request would
// cost a wake-up per operation.
func (e *Engine) kickTimer() {
	if e.ticking.Load() {
		return
	}
	e.forceKick()
}

// forceKick wakes the timer loop now (a deadline that expires at once).
func (e *Engine) forceKick() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// timerLoop is the engine's ACK/RNR timer: while any QP has a deadline it ticks every cfg.Tick
// and lets the due QPs retransmit; otherwise it sleeps until kicked.
func (e *Engine) timerLoop() {
	defer e.wg.Done()
	t := time.NewTimer(e.cfg.Tick)
	defer t.Stop()
	var list []*QP
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		case <-e.kick:
			// a QP armed a deadline; keep ticking
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
		list = list[:0]
		e.mu.RLock()
		for _, q := range e.qps {
			list = append(list, q)
		}
		e.mu.RUnlock()
		now := time.Now().UnixNano()
		busy := false
		for _, q := range list {
			if q.tickAll(now) {
				busy = true
			}
		}
		if !busy {
			// stop ticking; a deadline armed (or a QP created) after the scan but before
			// the store did not kick
			e.ticking.Store(false)
			e.mu.RLock()
			for _, q := range e.qps {
				if q.timerArmed() {
					busy = true
					break
				}
			}
			e.mu.RUnlock()
		}
		for i := range list {
			list[i] = nil
		}
		if busy {
			e.ticking.Store(true)
			t.Reset(e.cfg.Tick)
		}
	}
}

// PathFault is a transport's early fault report ([Vishnu09]: early detection): the stream or link
// from local port to the port at addr broke, so packets in flight on it may be lost. Every RC QP
// whose primary path it is and whose ACK timer runs (it has unacknowledged packets) has the timer
// expire now: it retransmits at once on a new stream, and when the path stays dead its retries run
// out in as many attempts (then APM migration or ERROR) instead of after the full timeout chain.
// It takes no QP lock, so a transport may call it from inside Send.
func (e *Engine) PathFault(port uint8, addr string) {
	hit := false
	e.mu.RLock()
	for _, q := range e.qps {
		if q.isDC() {
			hit = q.dcPathFault(port, addr) || hit
			continue
		}
		hit = q.pathFault(port, addr) || hit
	}
	e.mu.RUnlock()
	if hit {
		e.forceKick()
	}
}

// onPath reports whether link leads where q's primary path does. The liveness timer
// (Config.Reliable) counts only responses that came that way: they travel on the stream of the
// requests they answer. The peer's own requests travel on the peer's stream, which may reach the
// same address another way (its side re-dialled after a link went down, routed over another
// rail): counting them kept the timer of requests lost on the broken stream from ever expiring,
// so the requester never retried nor migrated.
func (q *QP) onPath(link Link) bool {
	p := q.pathPtr.Load()
	return p == nil || link == nil || p.Addr == link.RemoteAddr()
}

// pathFault expires the ACK timer of q now if its primary path leads from port to addr and the
// timer runs; it reports whether it did.
func (q *QP) pathFault(port uint8, addr string) bool {
	p := q.pathPtr.Load()
	if p == nil || p.PortNum != port || p.Addr != addr {
		return false
	}
	// packets received before the fault say nothing about the broken path: the liveness
	// timer (Config.Reliable) must not hold the expiry back by up to an ACK timeout
	defer q.lastRx.Store(0)
	dl := q.deadline.Load()
	return dl > 1 && q.deadline.CompareAndSwap(dl, 1)
}
