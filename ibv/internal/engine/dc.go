package engine

import (
	"sync"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/goarmci/goarmci/ibv/wire"
	"github.com/goarmci/goarmci/internal/wqring"
)

// The DC queue pair (ibv.DC): one QP per port that is the initiator and the target of RDMA
// write, read, atomics and accumulates to and from any DC QP ([Takagi15 §2.1], the Dynamically
// Connected transport), carried as datagrams with the reliability in the engine ([Sridhar08]:
// UD as the scalable transport, with a reliability engine above it).
//
// A DC QP keeps one peer record per remote DC QP it talks to, keyed by the remote port's
// provider address and QP number (dcKey) and created on first contact: by the first work request
// posted to the peer, or by the first request that arrives from it. A record is an RC connection
// context between the two DC QPs — the RC requester (PSNs, segmentation at the path MTU, ACK
// timer, go-back-N retransmission, retry count) towards the peer and the RC responder (PSN check,
// duplicate suppression, atomic replay, access checks) for the peer's requests — so the
// exactly-once guarantees are the RC ones: a duplicate write or accumulate is re-ACKed and never
// applied twice, a duplicate atomic is answered from the responder's replay record. The record is
// an engine QP (the same code runs it) that shares the DC QP's ibv.QP, number, CQs and attributes,
// with a send queue that starts at wqring.First entries, doubles up to the DC QP's MaxSendWR while
// requests are outstanding and shrinks back when they have all completed (to a floor that follows
// the depth of the record's busy periods, as every queue of the engine: internal/wqring), and an
// atomic replay record allocated at the peer's first atomic. A record whose retries run out
// fails alone (its requests complete with WCRetryExcErr and WCWRFlushErr, later ones with
// WCWRFlushErr): the DC QP and its other peers go on.
//
// Differences from RC: no alternate path (APM), no send/receive (ibv.QP refuses it), and both
// records start at PSN 0 (no out-of-band PSN exchange). Records have no generation: a record in
// ERROR — after its retries ran out, or after a NAK (a bad rkey or bounds fails the record as it
// fails an RC QP) — stays there for the life of the DC QP, a DC QP that reached RTR cannot be reset
// (ibv.ValidTransition), and a peer that came back at the same address with the same QP number
// (a restarted process) would be taken for the old one.

// dcKey names a peer of a DC QP: the provider address of its port and its DC QP number.
type dcKey struct {
	addr string
	qpn  uint32
}

// dcTable is the peer table of a DC QP. Lock order: the DC QP's sqMu and rqMu, then mu, then a
// record's sqMu and rqMu.
type dcTable struct {
	qp    *QP // the DC QP
	maxWR int // the most send requests a record holds (the DC QP's MaxSendWR)

	mu     sync.RWMutex
	a      qpAttrs // the DC QP's attributes: the template of a new record
	peers  map[dcKey]*QP
	closed bool

	ticking []*QP // the timer goroutine's list of records with a timer (tickAll)
}

func newDCTable(q *QP) *dcTable {
	d := &dcTable{qp: q, maxWR: q.sq.wq.Limit(), a: q.sq.a, peers: map[dcKey]*QP{}}
	q.sq.wq, q.rq.q = wqring.Ring[swqe]{}, wqring.Ring[rwqe]{} // the records hold the queues
	return d
}

// isDC reports whether q is a DC QP (not one of its peer records).
func (q *QP) isDC() bool { return q.dc != nil && q.dc.qp == q }

// peer returns the record of k, creating it (with path, when the peer has none yet) if create;
// nil when there is none or the DC QP is destroyed.
func (d *dcTable) peer(k dcKey, path ibv.AHAttr, create bool) *QP {
	d.mu.RLock()
	p := d.peers[k]
	d.mu.RUnlock()
	if p != nil || !create {
		return p
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if p = d.peers[k]; p != nil || d.closed {
		return p
	}
	p = d.newPeer(k, path)
	d.peers[k] = p
	return p
}

// newPeer builds the record of k (mu held): an RC context in RTS between the DC QP and the peer.
func (d *dcTable) newPeer(k dcKey, path ibv.AHAttr) *QP {
	o := d.qp
	p := &QP{e: o.e, ibq: o.ibq, ctx: o.ctx, pd: o.pd, num: o.num, typ: ibv.RC, sigAll: o.sigAll, dc: d}
	a := d.a
	if path.PortNum == 0 {
		path.PortNum = a.port
	}
	a.path, a.destQPN, a.hasAlt = path, k.qpn, false
	if pm := o.portMTU(path.PortNum); pm > 0 && a.mtu > pm {
		a.mtu = pm // datagrams: segments never exceed the path MTU
	}
	a.pathMTU = a.mtu
	p.sq.a, p.rq.a = a, a
	p.sq.wq = wqring.New[swqe](d.maxWR)
	p.publishPath()
	p.state.Store(uint32(ibv.StateRTS))
	return p
}

// postDC starts a work request of a DC QP on the record of its destination (wr.AH, wr.RemoteQPN).
// The record's path follows the address handle of the requests posted to it; it changes only
// while the record has no request outstanding.
func (q *QP) postDC(wr *ibv.SendWR) error {
	if q.st() == ibv.StateError || wr.AH == nil {
		provider.Push(q.ibq.SendCQ(), ibv.WC{WRID: wr.ID, Status: ibv.WCWRFlushErr, Opcode: provider.WCOpcodeOf(wr.Opcode), QPNum: q.num})
		return nil
	}
	path := wr.AH.Attr
	p := q.dc.peer(dcKey{addr: path.Addr, qpn: wr.RemoteQPN & wire.MaxQPN}, path, true)
	if p == nil {
		return ibv.ErrClosed
	}
	p.sqMu.Lock()
	if path.PortNum == 0 {
		path.PortNum = p.sq.a.port
	}
	if p.sq.head == p.sq.tail && p.sq.a.path != path {
		p.sq.a.path = path
		p.publishPath()
	}
	p.sqMu.Unlock()
	return p.PostSend(wr)
}

// dcRoute returns the record that handles p, an inbound packet for the DC QP q from the port at
// link.RemoteAddr(): requests create the record of a new peer (in RTR and RTS), responses go to an
// existing one; nil drops the packet.
func (q *QP) dcRoute(p *wire.Packet, link Link) *QP {
	use, create := dcAdmit(q.st(), p.Opcode)
	if !use || !q.isDC() {
		return nil
	}
	addr := link.RemoteAddr()
	return q.dc.peer(dcKey{addr: addr, qpn: p.SrcQPN}, ibv.AHAttr{Addr: addr}, create)
}

// dcAdmit decides what a DC QP in state st does with an inbound packet of opcode op: pass it to
// the record of its sender (use), creating the record when there is none (create: a request, the
// first contact of a new peer). Packets before RTR or in ERROR, and UD sends, are dropped.
func dcAdmit(st ibv.QPState, op wire.Opcode) (use, create bool) {
	if op == wire.OpUDSend || (st != ibv.StateRTR && st != ibv.StateRTS) {
		return false, false
	}
	return true, op.IsRequest()
}

// migrateAuto is the automatic path migration of provider.MigrateAuto; a DC peer record has no
// alternate path and does not migrate.
func (q *QP) migrateAuto(detail string) bool {
	if q.dc != nil {
		return false
	}
	_, ok := provider.MigrateAuto(q.ibq, detail)
	return ok
}

// tickAll runs the timers of q, or of every peer record of a DC QP (see QP.tick).
func (q *QP) tickAll(now int64) bool {
	if !q.isDC() {
		return q.tick(now)
	}
	// tick without holding mu: a retransmission may reach a transport's Send, which may call
	// Engine.PathFault, which takes mu again (a read lock held twice deadlocks behind a writer)
	d := q.dc
	d.mu.RLock()
	list := d.ticking[:0]
	for _, p := range d.peers {
		if p.deadline.Load() != 0 {
			list = append(list, p)
		}
	}
	d.mu.RUnlock()
	busy := false
	for i, p := range list {
		if p.tick(now) {
			busy = true
		}
		list[i] = nil
	}
	d.ticking = list[:0]
	return busy
}

// timerArmed reports whether a timer of q, or of a peer record of a DC QP, runs.
func (q *QP) timerArmed() bool {
	if !q.isDC() {
		return q.deadline.Load() != 0
	}
	q.dc.mu.RLock()
	defer q.dc.mu.RUnlock()
	for _, p := range q.dc.peers {
		if p.deadline.Load() != 0 {
			return true
		}
	}
	return false
}

// dcModified applies a Modify of a DC QP to its records (the DC QP's locks held): new access
// flags and timer attributes; ERROR flushes every record. (RESET comes only from INIT, before
// any record exists.)
func (q *QP) dcModified(to ibv.QPState) {
	if !q.isDC() {
		return
	}
	d := q.dc
	d.mu.Lock()
	d.a = q.sq.a
	peers := make([]*QP, 0, len(d.peers))
	for _, p := range d.peers {
		peers = append(peers, p)
	}
	d.mu.Unlock()
	for _, p := range peers {
		switch to {
		case ibv.StateError:
			p.sqMu.Lock()
			if p.st() != ibv.StateError {
				p.state.Store(uint32(ibv.StateError))
				p.flushAllLocked(0, nil)
			}
			p.sqMu.Unlock()
		default:
			p.sqMu.Lock()
			p.rqMu.Lock()
			for _, a := range []*qpAttrs{&p.sq.a, &p.rq.a} {
				a.access, a.timeout, a.retryCnt, a.rnrRetry, a.minRNRTimer =
					d.a.access, d.a.timeout, d.a.retryCnt, d.a.rnrRetry, d.a.minRNRTimer
			}
			p.rqMu.Unlock()
			p.sqMu.Unlock()
		}
	}
}

// dcPathFault is Engine.PathFault for the records of a DC QP whose path leads from port to addr.
func (q *QP) dcPathFault(port uint8, addr string) bool {
	hit := false
	q.dc.mu.RLock()
	defer q.dc.mu.RUnlock()
	for _, p := range q.dc.peers {
		hit = p.pathFault(port, addr) || hit
	}
	return hit
}

// dcDestroy drops every record of a destroyed DC QP; their requests get no completions.
func (q *QP) dcDestroy() {
	if !q.isDC() {
		return
	}
	d := q.dc
	d.mu.Lock()
	d.closed = true
	peers := d.peers
	d.peers = map[dcKey]*QP{}
	d.mu.Unlock()
	for _, p := range peers {
		_ = p.Destroy()
	}
}

// dcCounters are the transport counters of a DC QP: the sums over its peer records.
func (q *QP) dcCounters() ibv.QPCounters {
	var sum ibv.QPCounters
	q.dc.mu.RLock()
	defer q.dc.mu.RUnlock()
	for _, p := range q.dc.peers {
		c := p.Counters()
		sum.LocalAckTimeoutErr += c.LocalAckTimeoutErr
		sum.PacketSeqErr += c.PacketSeqErr
		sum.ImpliedNakSeqErr += c.ImpliedNakSeqErr
		sum.RNRNakReceived += c.RNRNakReceived
		sum.OutOfSequence += c.OutOfSequence
		sum.DuplicateRequest += c.DuplicateRequest
		sum.MessagesReceived += c.MessagesReceived
	}
	return sum
}
