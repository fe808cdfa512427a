package engine

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/goarmci/goarmci/ibv/wire"
	"github.com/goarmci/goarmci/internal/wqring"
)

// QP is the engine side of one queue pair (ibv.QPDriver). The requester state is guarded by
// sqMu, the responder and receive-queue state by rqMu; when both are taken, sqMu comes first.
// Neither is held while calling into ibv.QP methods that take the QP's modify lock
// (MigrateAuto, SetArmed).
type QP struct {
	e      *Engine
	ibq    *ibv.QP
	ctx    *ibv.Context
	pd     *ibv.PD
	num    uint32
	typ    ibv.QPType
	sigAll bool

	state    atomic.Uint32 // ibv.QPState as the engine sees it
	dead     atomic.Bool
	deadline atomic.Int64               // ns; 0: no timer running (ACK timeout or RNR wait)
	lastRx   atomic.Int64               // ns: last packet from the peer while a timer ran (Config.Reliable)
	pathPtr  atomic.Pointer[ibv.AHAttr] // the primary path, for lock-free PathFault
	// altArmed is the alternate path while the QP is ARMED on it (nil otherwise): a request
	// arriving from it makes the responder migrate (migrateResponder).
	altArmed atomic.Pointer[ibv.AHAttr]

	sqMu sync.Mutex
	sq   sendState

	rqMu sync.Mutex
	rq   recvQueue
	rsp  responder
	srq  *SRQ // shared receive queue, or nil
	srqW rwqe // the receive taken from the SRQ last

	place [2]placer // direct placement reservations: of a request, of a response (place.go)

	ctr qpCounters // transport counters (ibv.QPCounters)

	// failed records the PSNs of the send requests flushed by the last move to ERROR (sqMu held);
	// see FailedRequests.
	failed []failedWQE

	mcast []mcastJoin // the multicast groups the QP is attached to (Engine.mcMu)

	// dc is the peer table of a DC QP, and of each of its peer records (dc.go); nil otherwise.
	dc *dcTable
}

// attrs the engine keeps (set in Modify under both locks; read under either).
type qpAttrs struct {
	port        uint8
	access      ibv.Access
	qkey        uint32
	mtu         int // RC: the segment size (SegmentSize when larger than the path MTU)
	pathMTU     int // the path MTU: the packet size of messages shorter than a segment
	destQPN     uint32
	path, alt   ibv.AHAttr
	hasAlt      bool
	timeout     uint8
	altTimeout  uint8
	retryCnt    uint8
	rnrRetry    uint8
	minRNRTimer uint8
}

type rwqe struct {
	id  uint64
	sgl []ibv.SGE
}

type recvQueue struct {
	a          qpAttrs           // responder's copy
	q          wqring.Ring[rwqe] // the receive queue (MaxRecvWR entries at most)
	head, tail uint64
	scratch    [][]byte
}

func newQP(e *Engine, ibq *ibv.QP) *QP {
	q := &QP{e: e, ibq: ibq, ctx: ibq.Context(), pd: ibq.PD(), num: ibq.Num(), typ: ibq.Type(), sigAll: ibq.SigAll()}
	a := ibq.Query()
	at := qpAttrs{port: a.PortNum, access: a.AccessFlags, qkey: a.QKey, mtu: a.PathMTU, timeout: a.Timeout,
		retryCnt: a.RetryCnt, rnrRetry: a.RNRRetry, minRNRTimer: a.MinRNRTimer}
	if at.mtu <= 0 {
		at.mtu = 4096
	}
	at.pathMTU = at.mtu
	cp := ibq.Cap()
	q.sq.a = at
	q.sq.wq = wqring.New[swqe](cp.MaxSendWR)
	q.rq.a = at
	q.rq.q = wqring.New[rwqe](cp.MaxRecvWR)
	if s := ibq.SRQ(); s != nil {
		q.srq, _ = provider.SRQDriver(s).(*SRQ)
	}
	q.state.Store(uint32(ibv.StateReset))
	return q
}

// popRecv takes the next receive for an incoming message: from the SRQ when the QP has one
// (rqMu held).
func (q *QP) popRecv() (*rwqe, bool) {
	if q.srq != nil {
		if !q.srq.popInto(&q.srqW) {
			return nil, false
		}
		return &q.srqW, true
	}
	return q.rq.pop()
}

// recvEmpty reports whether no receive is available (rqMu held).
func (q *QP) recvEmpty() bool {
	if q.srq != nil {
		return q.srq.empty()
	}
	return q.rq.head == q.rq.tail
}

func (q *QP) st() ibv.QPState { return ibv.QPState(q.state.Load()) }

// portMTU is the MTU of local port n (0 when unknown).
func (q *QP) portMTU(n uint8) int {
	if q.e.cfg.Port == nil {
		return 0
	}
	pa, err := q.e.cfg.Port(n)
	if err != nil {
		return 0
	}
	return pa.MTU
}

// Modify applies an accepted state/attribute change (ibv.QPDriver).
func (q *QP) Modify(cur *ibv.QPAttr, attr *ibv.QPAttr, mask ibv.AttrMask) error {
	to := cur.State
	if mask&ibv.AttrState != 0 {
		to = attr.State
	}
	q.sqMu.Lock()
	defer q.sqMu.Unlock()
	q.releaseLocked() // a burst held for SendMore goes out before any state change
	q.rqMu.Lock()
	q.revokePlacement(nil)
	locked := true
	defer func() {
		if locked {
			q.rqMu.Unlock()
		}
	}()
	a := q.sq.a
	if mask&ibv.AttrPort != 0 {
		a.port = attr.PortNum
	}
	if mask&ibv.AttrAccessFlags != 0 {
		a.access = attr.AccessFlags
	}
	if mask&ibv.AttrQKey != 0 {
		a.qkey = attr.QKey
	}
	if mask&ibv.AttrPathMTU != 0 {
		m := attr.PathMTU
		if m < 256 || m&(m-1) != 0 {
			return fmt.Errorf("engine: %w: path MTU %d (a power of two ≥ 256)", ibv.ErrInvalidArgument, m)
		}
		a.mtu = m
	}
	if mask&ibv.AttrAV != 0 {
		a.path = attr.AV
		if a.path.PortNum == 0 {
			a.path.PortNum = a.port
		}
	}
	if mask&ibv.AttrAltPath != 0 {
		a.alt = attr.AltAV
		if a.alt.PortNum == 0 {
			a.alt.PortNum = attr.AltPortNum
		}
		if a.alt.PortNum == 0 {
			a.alt.PortNum = a.port
		}
		a.altTimeout = attr.AltTimeout
		a.hasAlt = a.alt.Addr != ""
	}
	if mask&ibv.AttrTimeout != 0 {
		a.timeout = attr.Timeout
	}
	if mask&ibv.AttrRetryCnt != 0 {
		a.retryCnt = attr.RetryCnt
	}
	if mask&ibv.AttrRNRRetry != 0 {
		a.rnrRetry = attr.RNRRetry
	}
	if mask&ibv.AttrMinRNRTimer != 0 {
		a.minRNRTimer = attr.MinRNRTimer
	}
	if mask&ibv.AttrDestQPN != 0 {
		a.destQPN = attr.DestQPN & wire.MaxQPN
	}
	if pm := q.portMTU(a.path.PortNum); pm > 0 && a.mtu > pm && q.typ == ibv.RC && a.path.PortNum != 0 {
		a.mtu = pm
	}
	a.pathMTU = a.mtu
	if seg := q.e.cfg.SegmentSize; q.typ == ibv.RC && seg > a.mtu {
		a.mtu = seg
	}
	if mask&(ibv.AttrAltPath|ibv.AttrPathMigState|ibv.AttrState) != 0 {
		q.altArmed.Store(nil) // a new alternate, a migration or a state change: not ARMED on the old one
	}
	if mask&ibv.AttrPathMigState != 0 {
		switch {
		case attr.PathMigState == ibv.Migrated && cur.PathMigState == ibv.Armed:
			// manual migration: the alternate path becomes primary (the generic layer swaps its copy)
			a.path, a.alt = a.alt, a.path
			a.timeout, a.altTimeout = a.altTimeout, a.timeout
			if a.timeout == 0 {
				a.timeout = a.altTimeout
			}
		case attr.PathMigState == ibv.Rearm:
			q.loadAltPath(a.alt)
		}
	}
	if mask&ibv.AttrRQPSN != 0 {
		q.rsp.reset(attr.RQPSN & wire.PSNMask)
	}
	if mask&ibv.AttrSQPSN != 0 {
		q.sq.resetPSN(attr.SQPSN & wire.PSNMask)
	}
	q.sq.a = a
	q.rq.a = a
	q.publishPath()

	from := q.st()
	var ev ibv.AsyncEvent
	switch to {
	case ibv.StateReset:
		q.sq.clear()
		q.rq.head, q.rq.tail = 0, 0
		q.rsp.reset(0)
		q.deadline.Store(0)
	case ibv.StateError:
		if from != ibv.StateError {
			q.state.Store(uint32(ibv.StateError))
			q.rqMu.Unlock()
			locked = false
			q.flushAllLocked(0, nil)
		}
	case ibv.StateSQD:
		q.sq.draining = true
		q.sq.drainPosted = false
		if q.sq.drained() {
			q.sq.drainPosted = true
			ev = ibv.AsyncEvent{Type: ibv.EventSQDrained, QPNum: q.num}
		}
	case ibv.StateRTS:
		q.sq.draining = false
	}
	q.state.Store(uint32(to))
	q.dcModified(to)
	if to == ibv.StateRTS && q.typ == ibv.RC {
		if locked {
			q.rqMu.Unlock()
			locked = false
		}
		q.pumpLocked()
	}
	if ev.Type != 0 {
		provider.PostEvent(q.ctx, ev)
	}
	return nil
}

// publishPath makes the current primary path visible to PathFault (sqMu held).
func (q *QP) publishPath() {
	p := q.sq.a.path
	q.pathPtr.Store(&p)
}

// loadAltPath is the APM path load ([Vishnu07 ch. 9], "path loading request"): check that the
// alternate path is reachable, then REARM→ARMED (or EventPathMigErr). It runs on an engine-owned
// goroutine because provider.SetArmed needs the QP's modify lock, which the caller holds.
func (q *QP) loadAltPath(alt ibv.AHAttr) {
	e := q.e
	e.mu.RLock()
	closed := e.closed
	if !closed {
		e.wg.Add(1)
	}
	e.mu.RUnlock()
	if closed {
		return
	}
	go func() {
		defer e.wg.Done()
		err := e.tr.Probe(e.ctx, alt)
		if e.ctx.Err() != nil || q.dead.Load() {
			return
		}
		detail := ""
		if err != nil {
			detail = fmt.Sprintf("alternate path %s port %d: %v", alt.Addr, alt.PortNum, err)
		}
		provider.SetArmed(q.ibq, err == nil, detail)
		if err == nil {
			// still the alternate of the QP (no new path load or migration meanwhile), and ARMED.
			// Query takes the modify lock, which comes before rqMu: ask first. A path load that
			// slips in between can leave a stale altArmed; migrateResponder checks ARMED again.
			armed := q.ibq.Query().PathMigState == ibv.Armed
			q.rqMu.Lock()
			if armed && q.rq.a.hasAlt && q.rq.a.alt == alt {
				q.altArmed.Store(&alt)
			}
			q.rqMu.Unlock()
		}
	}()
}

// PostRecv queues a receive buffer (ibv.QPDriver). In ERROR it completes at once with
// WCWRFlushErr.
func (q *QP) PostRecv(wr *ibv.RecvWR) error {
	q.rqMu.Lock()
	defer q.rqMu.Unlock()
	if q.st() == ibv.StateError {
		provider.Push(q.ibq.RecvCQ(), ibv.WC{WRID: wr.ID, Status: ibv.WCWRFlushErr, Opcode: ibv.WCRecv, QPNum: q.num})
		return nil
	}
	if err := q.rq.push(wr); err != nil {
		return fmt.Errorf("engine: %w: %d receives posted", err, q.rq.tail-q.rq.head)
	}
	return nil
}

// push queues a receive; ibv.ErrQueueFull when the queue holds its limit.
func (r *recvQueue) push(wr *ibv.RecvWR) error {
	if !r.q.Reserve(r.head, r.tail) {
		return ibv.ErrQueueFull
	}
	s := r.q.At(r.tail)
	s.id = wr.ID
	s.sgl = append(s.sgl[:0], wr.SGL...)
	r.tail++
	return nil
}

// pop takes the oldest posted receive (rqMu held). The entry stays valid until the next push:
// a queue that empties gives its grown ring back, and the entry then lives on in the old one.
func (r *recvQueue) pop() (*rwqe, bool) {
	if r.head == r.tail {
		return nil, false
	}
	s := r.q.At(r.head)
	r.head++
	r.q.Idle(r.head, r.tail)
	return s, true
}

// flushRecvLocked completes every posted receive with WCWRFlushErr (rqMu held).
func (q *QP) flushRecvLocked() {
	cq := q.ibq.RecvCQ()
	for {
		s, ok := q.rq.pop()
		if !ok {
			return
		}
		provider.Push(cq, ibv.WC{WRID: s.id, Status: ibv.WCWRFlushErr, Opcode: ibv.WCRecv, QPNum: q.num})
	}
}

// Destroy releases the QP; outstanding requests are dropped without completions.
func (q *QP) Destroy() error {
	q.dead.Store(true)
	q.dcDestroy()
	q.e.removeQP(q)
	q.e.detachAll(q)
	q.revokePlacement(nil)
	q.sqMu.Lock()
	q.releaseLocked()
	q.sq.clear()
	q.deadline.Store(0)
	q.sqMu.Unlock()
	q.rqMu.Lock()
	q.rq.head, q.rq.tail = 0, 0
	q.rqMu.Unlock()
	return nil
}

// scatter copies src into the buffers bufs starting at byte offset off; it returns false when
// they are too short.
func scatter(bufs [][]byte, off uint64, src []byte) bool {
	for _, b := range bufs {
		if len(src) == 0 {
			return true
		}
		if off >= uint64(len(b)) {
			off -= uint64(len(b))
			continue
		}
		var n int
		if samePlace(b[off:], src) { // placed there directly (place.go)
			n = min(len(b)-int(off), len(src))
		} else {
			n = copy(b[off:], src)
		}
		src = src[n:]
		off = 0
	}
	return len(src) == 0
}

// gather returns n bytes at offset off of bufs: a view when they lie in one buffer (view true),
// otherwise a copy into scratch.
func gather(bufs [][]byte, off uint64, n int, scratch []byte) (out []byte, view bool) {
	for i, b := range bufs {
		if off >= uint64(len(b)) {
			off -= uint64(len(b))
			continue
		}
		if off+uint64(n) <= uint64(len(b)) {
			return b[off : off+uint64(n) : off+uint64(n)], true
		}
		out := scratch[:0]
		for _, bb := range bufs[i:] {
			if len(out) == n {
				break
			}
			bb = bb[off:]
			off = 0
			k := min(len(bb), n-len(out))
			out = append(out, bb[:k]...)
		}
		return out, false
	}
	return scratch[:0], false
}

func buffersLen(bufs [][]byte) uint64 {
	var n uint64
	for _, b := range bufs {
		n += uint64(len(b))
	}
	return n
}

// qpCounters are the transport counters of a QP (Counters).
type qpCounters struct {
	ackTimeout, seqNak, impliedNak, rnrNak, outOfSeq, dup atomic.Uint64
}

// Counters implements ibv.CounterReader.
func (q *QP) Counters() ibv.QPCounters {
	if q.isDC() {
		return q.dcCounters()
	}
	c := &q.ctr
	q.rqMu.Lock()
	msgs := uint64(q.rsp.msn) // the responder's message sequence number: the request messages it executed
	q.rqMu.Unlock()
	return ibv.QPCounters{LocalAckTimeoutErr: c.ackTimeout.Load(), PacketSeqErr: c.seqNak.Load(),
		ImpliedNakSeqErr: c.impliedNak.Load(), RNRNakReceived: c.rnrNak.Load(), OutOfSequence: c.outOfSeq.Load(),
		DuplicateRequest: c.dup.Load(), MessagesReceived: msgs}
}

var _ ibv.CounterReader = (*QP)(nil)
