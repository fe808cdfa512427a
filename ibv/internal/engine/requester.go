package engine

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/goarmci/goarmci/ibv/wire"
	"github.com/goarmci/goarmci/internal/wqring"
)

// swqe is a send work queue entry. Slots are reused; bufs keeps its capacity.
type swqe struct {
	id       uint64
	op       ibv.Opcode
	flags    ibv.SendFlags
	signaled bool
	status   ibv.WCStatus // preset local error (WCLocProtErr, WCLocLenErr): completes when it reaches the head
	bufs     [][]byte
	inline   []byte
	length   uint64
	imm      uint32
	raddr    uint64
	rkey     uint32
	cmpAdd   uint64
	swap     uint64
	accType  uint8
	scale    complex128

	firstPSN uint32
	npkts    uint32
	pkt      uint32 // payload bytes per packet: the segment size, or the path MTU (see PostSend)
	off      uint64 // payload bytes of the send queue posted before this WQE (the byte window)
	done     bool   // read: all response bytes arrived; atomic: result arrived
}

func (w *swqe) isReadAtomic() bool {
	return w.op == ibv.OpRDMARead || w.op.IsAtomic() && w.op != ibv.OpAccumulate
}

// sendState is the requester of an RC QP (and the PSN counter of a UD QP).
type sendState struct {
	a  qpAttrs
	wq wqring.Ring[swqe] // the send queue (MaxSendWR entries at most)
	// head: oldest incomplete WQE; cur/curPkt: next packet to transmit; tail: next free slot.
	head, cur, tail uint64
	curPkt          uint32
	sqPSN           uint32 // PSN of the next posted WQE
	postedBytes     uint64 // payload bytes of all WQEs posted (swqe.off of the next one)
	reads           int    // RDMA read WQEs posted and not yet retired
	una             uint32 // first unacknowledged PSN
	sent            uint32 // one past the highest PSN transmitted
	retries         uint8
	rnrRetries      uint8
	rnrWait         bool
	rnrUntil        int64
	rewoundAt       uint32 // una of the last implied-NAK / sequence-NAK rewind
	rewound         bool
	migrating       bool
	draining        bool
	drainPosted     bool
	// held: a work request posted with SendMore corked the transport's stream of heldPath
	// until the next PostSend (hold, release)
	held     bool
	heldPath ibv.AHAttr
	hbuf     [wire.MaxHeaderLen]byte
	pbuf     []byte
	mbuf     []byte // multicast envelope + header scratch (UD)
	udBufs   [][]byte
}

func (s *sendState) resetPSN(psn uint32) {
	s.sqPSN, s.una, s.sent = psn, psn, psn
}

func (s *sendState) clear() {
	for s.head != s.tail {
		s.retireHead()
	}
	s.cur, s.curPkt = s.head, 0
	s.rnrWait, s.rewound, s.retries, s.rnrRetries = false, false, 0, 0
}

// retireHead releases the head WQE and advances the head.
func (s *sendState) retireHead() {
	w := s.slot(s.head)
	if w.op == ibv.OpRDMARead && w.npkts > 0 {
		s.reads--
	}
	w.release()
	s.head++
}

// readOverlaps reports whether an RDMA read posted before WQE i and still waiting for
// responses covers target bytes that WQE w modifies. Such a write, accumulate or atomic waits
// for the read: the responder executes requests in PSN order (IBA), but over a byte stream its
// read responses leave by reference to the memory (zero copy, tcp conn.ReplyRef), so a later
// write executed before they are sent would show in them. Reads are rare in a write's way (a
// counter tells when there are none), so this costs nothing in the common case.
func (s *sendState) readOverlaps(i uint64, w *swqe) bool {
	if s.reads == 0 || w.length == 0 {
		return false
	}
	switch w.op {
	case ibv.OpRDMARead, ibv.OpSend, ibv.OpSendImm:
		return false
	}
	for j := s.head; j != i; j++ {
		r := s.slot(j)
		if r.op == ibv.OpRDMARead && !r.done && r.npkts > 0 && r.raddr < w.raddr+w.length && w.raddr < r.raddr+r.length {
			return true
		}
	}
	return false
}

func (w *swqe) release() {
	for i := range w.bufs {
		w.bufs[i] = nil
	}
	w.bufs = w.bufs[:0]
}

// drained reports whether no started request is outstanding (SQD: requests posted after the
// drain began are not started and do not count).
func (s *sendState) drained() bool {
	return wire.PSNDiff(s.sent, s.una) <= 0 && (s.head == s.tail || s.head == s.cur && s.curPkt == 0)
}

func (s *sendState) slot(i uint64) *swqe { return s.wq.At(i) }

// psnAt is the PSN of the next packet to transmit.
func (s *sendState) psnAt() uint32 {
	if s.cur == s.tail {
		return s.sqPSN
	}
	return wire.PSNAdd(s.slot(s.cur).firstPSN, s.curPkt)
}

// bytesAt is the payload offset, in the send queue's posted bytes, of packet k of WQE i.
func (s *sendState) bytesAt(i uint64, k uint32) uint64 {
	if i == s.tail {
		return s.postedBytes
	}
	w := s.slot(i)
	if w.npkts == 0 {
		return w.off
	}
	return w.off + min(uint64(k)*uint64(w.pkt), w.length)
}

// bytesInFlight is the payload of the packets from the first unacknowledged PSN to the transmit
// position (cur, curPkt): RDMA write and send bytes not yet acknowledged, read response bytes not
// yet received. The WQE holding una is the head's or one of the next few (those completed but
// not yet retired), so this is O(1) in practice.
func (s *sendState) bytesInFlight() uint64 {
	end := s.bytesAt(s.cur, s.curPkt)
	for i := s.head; i != s.tail; i++ {
		w := s.slot(i)
		if d := wire.PSNDiff(s.una, w.firstPSN); d < int32(w.npkts) {
			if start := s.bytesAt(i, uint32(max(d, 0))); start < end {
				return end - start
			}
			return 0
		}
		if i == s.cur {
			break
		}
	}
	return 0
}

// rewind moves the transmit position back (or forward) to psn (go-back-N).
func (s *sendState) rewind(psn uint32) {
	for i := s.head; i != s.tail; i++ {
		w := s.slot(i)
		d := wire.PSNDiff(psn, w.firstPSN)
		if d >= 0 && (uint32(d) < w.npkts || w.npkts == 0 && d == 0) {
			s.cur, s.curPkt = i, uint32(d)
			if w.isReadAtomic() && w.op != ibv.OpRDMARead {
				s.curPkt = 0
			}
			return
		}
	}
	s.cur, s.curPkt = s.tail, 0
}

// PostSend starts a send work request (ibv.QPDriver).
func (q *QP) PostSend(wr *ibv.SendWR) error {
	if q.typ == ibv.UD {
		return q.postUD(wr)
	}
	if q.isDC() {
		return q.postDC(wr)
	}
	q.sqMu.Lock()
	defer q.sqMu.Unlock()
	err := q.postLocked(wr)
	if wr.Flags&ibv.SendMore == 0 || err != nil {
		q.releaseLocked()
	}
	return err
}

// hold corks the transport's stream of the QP's path for a work request posted with SendMore,
// until release (sqMu held).
func (q *QP) holdLocked() {
	s := &q.sq
	if q.e.corker == nil || s.held {
		return
	}
	s.held, s.heldPath = true, s.a.path
	q.e.corker.Cork(s.heldPath)
}

// ReleaseBurst sends the packets held for a work request posted with SendMore
// (ibv.BurstReleaser).
func (q *QP) ReleaseBurst() {
	q.sqMu.Lock()
	q.releaseLocked()
	q.sqMu.Unlock()
}

// releaseLocked ends hold: the held packets go out (sqMu held).
func (q *QP) releaseLocked() {
	s := &q.sq
	if !s.held {
		return
	}
	s.held = false
	q.e.corker.Uncork(s.heldPath)
}

// postLocked is PostSend's RC part (sqMu held).
func (q *QP) postLocked(wr *ibv.SendWR) error {
	s := &q.sq
	if q.st() == ibv.StateError {
		provider.Push(q.ibq.SendCQ(), ibv.WC{WRID: wr.ID, Status: ibv.WCWRFlushErr, Opcode: provider.WCOpcodeOf(wr.Opcode), QPNum: q.num})
		return nil
	}
	if !s.wq.Reserve(s.head, s.tail) {
		return fmt.Errorf("engine: %w: %d send requests outstanding", ibv.ErrQueueFull, s.tail-s.head)
	}
	w := s.slot(s.tail)
	*w = swqe{bufs: w.bufs[:0], inline: w.inline[:0], id: wr.ID, op: wr.Opcode, flags: wr.Flags,
		signaled: q.sigAll || wr.Flags&ibv.SendSignaled != 0, imm: wr.Imm, raddr: wr.RemoteAddr, rkey: wr.RKey,
		cmpAdd: wr.CompareAdd, swap: wr.Swap, accType: uint8(wr.AccType), scale: wr.Scale}
	write := wr.Opcode == ibv.OpRDMARead || w.isReadAtomic()
	var st ibv.WCStatus
	w.bufs, st = provider.LocalBuffers(q.ctx, q.pd, wr, write, w.bufs)
	w.status = st
	w.length = buffersLen(w.bufs)
	if st == ibv.WCSuccess && wr.Flags&ibv.SendInline != 0 && !write {
		for _, b := range w.bufs {
			w.inline = append(w.inline, b...)
		}
		w.release()
		w.bufs = append(w.bufs, w.inline)
	}
	if w.length > q.e.cfg.MaxMsgSize || w.length > 1<<32-1 {
		w.status = ibv.WCLocLenErr
	}
	// Packets: a message shorter than one segment goes as path-MTU packets, which the receiving
	// transport reads many at a time (over tcp, one system call for up to 256 KiB of them); one
	// of a segment or more as segments, which it places straight into memory. A read asks for
	// its responses in the same size (FlagPathMTU). Below a segment, packets moved puts faster
	// than one segment per message; from a segment up, segments did (bench/README.md, "Design
	// measurements").
	w.pkt = uint32(s.a.mtu)
	if (!w.isReadAtomic() || wr.Opcode == ibv.OpRDMARead) && w.length < uint64(s.a.mtu) && s.a.pathMTU > 0 {
		w.pkt = uint32(s.a.pathMTU)
	}
	mtu := uint64(w.pkt)
	switch {
	case w.isReadAtomic() && wr.Opcode != ibv.OpRDMARead:
		w.npkts = 1
	default:
		w.npkts = uint32(max(1, (w.length+mtu-1)/mtu))
	}
	if w.status != ibv.WCSuccess {
		w.npkts = 0
	}
	w.firstPSN = s.sqPSN
	s.sqPSN = wire.PSNAdd(s.sqPSN, w.npkts)
	w.off = s.postedBytes
	if w.npkts > 0 {
		s.postedBytes += w.length
		if w.op == ibv.OpRDMARead {
			s.reads++
		}
	}
	s.tail++
	if q.st() == ibv.StateRTS {
		if wr.Flags&ibv.SendMore != 0 {
			q.holdLocked()
		}
		q.pumpLocked()
	}
	q.completeLocked()
	return nil
}

// pumpLocked transmits packets from the current position while the window allows (sqMu held).
func (q *QP) pumpLocked() {
	s := &q.sq
	st := q.st()
	if (st != ibv.StateRTS && st != ibv.StateSQD) || s.rnrWait || s.migrating {
		return
	}
	sentAny := false
	// a burst of several packets goes to the transport corked (one write for all)
	if q.e.corker != nil && s.cur != s.tail && (s.tail-s.cur > 1 || s.slot(s.cur).npkts-s.curPkt > 1) {
		path := s.a.path
		q.e.corker.Cork(path)
		defer q.e.corker.Uncork(path)
	}
	for s.cur != s.tail {
		w := s.slot(s.cur)
		if w.status != ibv.WCSuccess {
			break
		}
		psn := wire.PSNAdd(w.firstPSN, s.curPkt)
		if st == ibv.StateSQD && s.curPkt == 0 && wire.PSNDiff(psn, s.sent) >= 0 {
			break // SQD: finish what was started, start nothing new
		}
		if inflight := wire.PSNDiff(psn, s.una); inflight > 0 && q.e.windowFull(inflight, s.bytesInFlight) {
			break
		}
		if w.flags&ibv.SendFence != 0 && s.curPkt == 0 && q.readAtomicPendingBefore(s.cur) {
			break
		}
		if s.curPkt == 0 && s.readOverlaps(s.cur, w) {
			break
		}
		next := q.sendPacket(w, s.curPkt, psn)
		sentAny = true
		if end := wire.PSNAdd(psn, next-s.curPkt); wire.PSNDiff(end, s.sent) > 0 {
			s.sent = end
		}
		if next >= w.npkts {
			s.cur++
			s.curPkt = 0
		} else {
			s.curPkt = next
		}
	}
	if sentAny && q.deadline.Load() == 0 {
		q.armTimer()
	}
}

func (q *QP) readAtomicPendingBefore(i uint64) bool {
	s := &q.sq
	for j := s.head; j != i; j++ {
		if w := s.slot(j); w.isReadAtomic() && !w.done {
			return true
		}
	}
	return false
}

// armTimer starts the ACK timer (sqMu held). After the first retry without progress the
// timeout doubles (once): a software responder behind a busy scheduler is late more often than
// its packets are lost, and a spurious go-back-N of a large read only adds load; a larger backoff
// would delay path migration too much (default: 67 ms + 7 × 134 ms ≈ 1 s to migrate).
func (q *QP) armTimer() {
	to := q.e.timeoutNS(q.sq.a.timeout)
	if to == 0 {
		q.deadline.Store(0)
		return
	}
	to <<= min(q.sq.retries, 1)
	q.deadline.Store(time.Now().UnixNano() + to)
	q.e.kickTimer()
}

// sendPacket transmits packet k of w with PSN psn and returns the index of the next packet
// (a read request covers all its remaining response PSNs).
func (q *QP) sendPacket(w *swqe, k uint32, psn uint32) uint32 {
	s := &q.sq
	mtu := uint64(w.pkt)
	h := wire.Header{DestQPN: s.a.destQPN, PSN: psn, SrcQPN: q.num}
	var payload []byte
	view := false // payload is a view of registered memory (RefSender may keep it)
	next := k + 1
	off := uint64(k) * mtu
	segment := func() {
		n := min(mtu, w.length-off)
		if s.pbuf == nil && len(w.bufs) > 1 { // one buffer always gives a view
			s.pbuf = make([]byte, 0, s.a.mtu)
		}
		payload, view = gather(w.bufs, off, int(n), s.pbuf[:0])
		view = view && w.flags&ibv.SendInline == 0
		if k == 0 {
			h.Flags |= wire.FlagFirst
		}
		if k == w.npkts-1 {
			h.Flags |= wire.FlagLast | wire.FlagAckReq
		} else if psn%ackEvery(int(w.pkt)) == 0 {
			h.Flags |= wire.FlagAckReq
		}
	}
	switch w.op {
	case ibv.OpSend, ibv.OpSendImm:
		h.Opcode = wire.OpSend
		segment()
		if w.op == ibv.OpSendImm && h.Flags&wire.FlagLast != 0 {
			h.Flags |= wire.FlagImm
			h.Imm = w.imm
		}
	case ibv.OpRDMAWrite, ibv.OpRDMAWriteImm:
		h.Opcode = wire.OpWrite
		segment()
		h.RETH = wire.RETH{VAddr: w.raddr, RKey: w.rkey, DMALen: uint32(w.length)}
		if w.op == ibv.OpRDMAWriteImm && h.Flags&wire.FlagLast != 0 {
			h.Flags |= wire.FlagImm
			h.Imm = w.imm
		}
	case ibv.OpAccumulate:
		h.Opcode = wire.OpAccumulate
		segment()
		h.RETH = wire.RETH{VAddr: w.raddr, RKey: w.rkey, DMALen: uint32(w.length)}
		h.Acc = wire.AccETH{Type: w.accType, Scale: w.scale}
	case ibv.OpRDMARead:
		// (re)issue the read for the response packets k.. (IBA: a retried read restarts at the
		// first missing response PSN)
		h.Opcode = wire.OpReadReq
		h.Flags = wire.FlagOnly | wire.FlagAckReq
		if w.pkt < uint32(s.a.mtu) {
			h.Flags |= wire.FlagPathMTU
		}
		h.RETH = wire.RETH{VAddr: w.raddr + off, RKey: w.rkey, DMALen: uint32(w.length - min(off, w.length))}
		next = w.npkts
	default: // atomics
		h.Opcode = wire.OpAtomic
		h.Flags = wire.FlagOnly | wire.FlagAckReq
		h.Atomic = wire.AtomicETH{VAddr: w.raddr, RKey: w.rkey, SwapAdd: w.cmpAdd, Op: atomicOpOf(w.op)}
		if w.op == ibv.OpAtomicCmpSwap || w.op == ibv.OpAtomicCmpSwap32 {
			h.Atomic.Compare, h.Atomic.SwapAdd = w.cmpAdd, w.swap
		}
	}
	hdr, err := wire.AppendHeader(s.hbuf[:0], &h, len(payload))
	if err != nil {
		q.e.log.Error().Err(err).Uint32("qp", q.num).Msg("engine: cannot encode request")
		return next
	}
	if view && q.e.ref != nil {
		err = q.e.ref.SendRef(s.a.path, hdr, payload)
	} else {
		err = q.e.tr.Send(s.a.path, hdr, payload)
	}
	if err != nil {
		// the path is known to be broken: retry at the next timer tick instead of after the
		// ACK timeout (each such retry still counts against RetryCnt)
		q.e.log.Debug().Err(err).Uint32("qp", q.num).Str("path", s.a.path.Addr).Msg("engine: send failed (path fault)")
		soon := time.Now().UnixNano() + int64(q.e.cfg.Tick)
		if dl := q.deadline.Load(); dl == 0 || dl > soon {
			q.deadline.Store(soon)
			q.e.kickTimer()
		}
	}
	return next
}

// ackBytes bounds the payload between two ACK requests of a multi-packet message (1 MiB: an ACK
// per 4 segments of 256 KiB, within the byte window of 4 MiB; 4 KiB packets keep their 32). Each
// ACK wakes the requester's reader and restarts its pump, so ACKs per segment cost put
// bandwidth (2 ranks over loopback, 1-4 MiB: 0.7x the plain socket with an ACK per 256 KiB,
// 0.8-0.87x with one per MiB). On a slow rail the time between ACKs grows; the liveness timer
// waits while the stream moves bytes (StreamActivity).
const ackBytes = 1 << 20

// ackEvery is the PSN interval of ACK requests within a message of mtu-byte packets: every 32
// packets, and at least every ackBytes.
func ackEvery(mtu int) uint32 { return uint32(max(1, min(32, ackBytes/max(mtu, 1)))) }

func atomicOpOf(o ibv.Opcode) wire.AtomicOp {
	switch o {
	case ibv.OpAtomicCmpSwap:
		return wire.AtomicCmpSwap64
	case ibv.OpAtomicFetchAdd:
		return wire.AtomicFetchAdd64
	case ibv.OpAtomicFetchAdd32:
		return wire.AtomicFetchAdd32
	case ibv.OpAtomicSwap64:
		return wire.AtomicSwap64
	case ibv.OpAtomicSwap32:
		return wire.AtomicSwap32
	case ibv.OpAtomicCmpSwap32:
		return wire.AtomicCmpSwap32
	}
	return 0
}

// onResponse handles an ACK/NAK, read response or atomic ACK for this QP's requester.
func (q *QP) onResponse(p *wire.Packet) {
	if q.typ != ibv.RC {
		return
	}
	q.sqMu.Lock()
	defer q.sqMu.Unlock()
	st := q.st()
	if st != ibv.StateRTS && st != ibv.StateSQD {
		return
	}
	s := &q.sq
	if p.SrcQPN != s.a.destQPN {
		return // not from the connected peer QP
	}
	// a response must name a PSN that was sent: [una-1, sent)
	if d := wire.PSNDiff(p.PSN, s.una); d < -1 || wire.PSNDiff(p.PSN, s.sent) >= 0 {
		return
	}
	oldUna := s.una
	switch p.Opcode {
	case wire.OpAck:
		switch p.AETH.Syndrome {
		case wire.SynAck:
			q.ackUpTo(wire.PSNAdd(p.PSN, 1))
		case wire.SynNakPSNSeq:
			q.ackUpTo(p.PSN)
			if s.una == p.PSN && !(s.rewound && s.rewoundAt == p.PSN) {
				s.rewound, s.rewoundAt = true, p.PSN
				s.rewind(p.PSN)
				q.ctr.seqNak.Add(1)
			}
		case wire.SynRNR:
			q.ackUpTo(p.PSN)
			if s.una != p.PSN {
				break
			}
			q.ctr.rnrNak.Add(1)
			s.rnrRetries++
			if s.a.rnrRetry != 7 && s.rnrRetries > s.a.rnrRetry {
				q.failLocked(ibv.WCRNRRetryExcErr, "RNR retries exhausted")
				return
			}
			s.rewind(p.PSN)
			s.rnrWait = true
			s.rnrUntil = time.Now().UnixNano() + rnrDelayNS(uint8(p.AETH.MSN))
			q.deadline.Store(s.rnrUntil)
			q.e.kickTimer()
		default:
			q.ackUpTo(p.PSN)
			if s.una != p.PSN {
				break
			}
			status := ibv.WCRemOpErr
			switch p.AETH.Syndrome {
			case wire.SynNakRemAccess:
				status = ibv.WCRemAccessErr
			case wire.SynNakInvReq:
				status = ibv.WCRemInvReqErr
			}
			q.failLocked(status, fmt.Sprintf("responder NAK %v at PSN %d", p.AETH.Syndrome, p.PSN))
			return
		}
	case wire.OpReadResp:
		q.ackUpTo(p.PSN)
		if s.una != p.PSN || s.head == s.tail {
			break
		}
		w := s.slot(s.head)
		k := uint32(wire.PSNDiff(p.PSN, w.firstPSN))
		if w.op != ibv.OpRDMARead || k >= w.npkts {
			break
		}
		off := uint64(k) * uint64(w.pkt)
		want := min(uint64(w.pkt), w.length-min(off, w.length))
		if uint64(len(p.Payload)) != want || !scatter(w.bufs, off, p.Payload) {
			break // a response that does not fit: ignore, the timer retries
		}
		s.una = wire.PSNAdd(s.una, 1)
		if k == w.npkts-1 {
			w.done = true
			q.completeHeadLocked()
		}
	case wire.OpAtomicAck:
		q.ackUpTo(p.PSN)
		if s.una != p.PSN || s.head == s.tail {
			break
		}
		w := s.slot(s.head)
		if !w.isReadAtomic() || w.op == ibv.OpRDMARead || w.firstPSN != p.PSN {
			break
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], p.AtomicAck)
		scatter(w.bufs, 0, b[:w.op.AtomicSize()])
		w.done = true
		s.una = wire.PSNAdd(s.una, 1)
		q.completeHeadLocked()
	}
	if s.una != oldUna {
		s.retries = 0
		s.rewound = false
		if wire.PSNDiff(s.psnAt(), s.una) < 0 {
			s.rewind(s.una)
		}
	}
	q.completeLocked()
	s.wq.Idle(s.head, s.tail)
	q.pumpLocked()
	if s.una != oldUna && !s.rnrWait {
		if wire.PSNDiff(s.sent, s.una) > 0 {
			q.armTimer()
		} else {
			q.deadline.Store(0)
		}
	}
}

// ackUpTo acknowledges every PSN before target: WQEs wholly below it complete. An ACK that
// passes a read or atomic whose response has not arrived is an implied NAK: the responses were
// lost, so the requester goes back to the first missing one.
func (q *QP) ackUpTo(target uint32) {
	s := &q.sq
	for wire.PSNDiff(target, s.una) > 0 && s.head != s.tail {
		w := s.slot(s.head)
		if w.status != ibv.WCSuccess {
			return
		}
		if w.isReadAtomic() && !w.done {
			if !(s.rewound && s.rewoundAt == s.una) {
				s.rewound, s.rewoundAt = true, s.una
				s.rewind(s.una)
				q.ctr.impliedNak.Add(1)
			}
			return
		}
		end := wire.PSNAdd(w.firstPSN, w.npkts)
		if wire.PSNDiff(target, end) >= 0 {
			s.una = end
			q.completeHeadLocked()
		} else {
			s.una = target
		}
	}
}

// completeHeadLocked completes the head WQE successfully.
func (q *QP) completeHeadLocked() {
	s := &q.sq
	w := s.slot(s.head)
	if w.signaled {
		provider.Push(q.ibq.SendCQ(), ibv.WC{WRID: w.id, Status: ibv.WCSuccess, Opcode: provider.WCOpcodeOf(w.op),
			ByteLen: uint32(w.length), QPNum: q.num})

	}
	s.retireHead()
	if s.cur < s.head {
		s.cur, s.curPkt = s.head, 0
	}
}

// completeLocked handles what reached the head of the send queue without a response: preset
// local errors (the QP then fails, as verbs do) and zero-packet entries; and the SQD drain event.
func (q *QP) completeLocked() {
	s := &q.sq
	if s.head != s.tail && s.cur == s.head {
		if w := s.slot(s.head); w.status != ibv.WCSuccess {
			q.failLocked(w.status, fmt.Sprintf("local error %v in work request %d", w.status, w.id))
			return
		}
	}
	if s.draining && !s.drainPosted && s.drained() {
		s.drainPosted = true
		provider.PostEvent(q.ctx, ibv.AsyncEvent{Type: ibv.EventSQDrained, QPNum: q.num})
	}
}

// failLocked moves the QP to ERROR [Vishnu07 §2.2]: the head WQE completes with status, every
// other outstanding request and posted receive is flushed, and EventQPFatal is posted (sqMu held).
func (q *QP) failLocked(status ibv.WCStatus, detail string) {
	q.state.Store(uint32(ibv.StateError))
	q.e.log.Debug().Uint32("qp", q.num).Str("status", status.String()).Msg("engine: QP to ERROR: " + detail)
	// the state changes before the completions appear, so a consumer that sees the error
	// completion also sees the QP in ERROR
	if q.dc == nil { // a DC peer record fails alone: the DC QP stays in RTS for the other peers
		provider.SetState(q.ibq, ibv.StateError, ibv.AsyncEvent{Type: ibv.EventQPFatal, Detail: detail})
	}
	q.flushAllLocked(status, nil)
}

// flushAllLocked completes the outstanding send requests (the first with status when non-zero,
// the rest with WCWRFlushErr, signaled or not) and flushes the receive queue (sqMu held, rqMu not).
func (q *QP) flushAllLocked(status ibv.WCStatus, _ []ibv.WC) {
	q.releaseLocked()
	s := &q.sq
	cq := q.ibq.SendCQ()
	q.failed = q.failed[:0]
	for s.head != s.tail {
		w := s.slot(s.head)
		st := ibv.WCWRFlushErr
		if status != 0 {
			st, status = status, 0
		}
		if w.npkts > 0 {
			q.failed = append(q.failed, failedWQE{id: w.id, firstPSN: w.firstPSN, npkts: w.npkts, pkt: int(w.pkt)})
		}
		provider.Push(cq, ibv.WC{WRID: w.id, Status: st, Opcode: provider.WCOpcodeOf(w.op), QPNum: q.num})
		s.retireHead()
	}
	s.cur, s.curPkt = s.head, 0
	s.rnrWait = false
	q.deadline.Store(0)
	q.revokePlacement(nil)
	q.rqMu.Lock()
	q.flushRecvLocked()
	q.rsp.closeMsg()
	q.rqMu.Unlock()
}

// tick runs the ACK timeout and RNR wait of the QP at time now (ns); it reports whether a timer
// is still running.
func (q *QP) tick(now int64) bool {
	dl := q.deadline.Load()
	if dl == 0 {
		return false
	}
	if now < dl {
		return true
	}
	q.sqMu.Lock()
	s := &q.sq
	st := q.st()
	if q.dead.Load() || (st != ibv.StateRTS && st != ibv.StateSQD) || s.migrating {
		q.sqMu.Unlock()
		return q.deadline.Load() != 0
	}
	if s.rnrWait {
		if now >= s.rnrUntil {
			s.rnrWait = false
			q.deadline.Store(0)
			q.pumpLocked()
		}
		q.sqMu.Unlock()
		return q.deadline.Load() != 0
	}
	if dl = q.deadline.Load(); dl == 0 || now < dl {
		q.sqMu.Unlock()
		return dl != 0
	}
	if wire.PSNDiff(s.sent, s.una) <= 0 {
		q.deadline.Store(0)
		q.sqMu.Unlock()
		return false
	}
	if q.e.cfg.Reliable {
		// Liveness timer: the peer is still sending to us, so our ACKs are queued, not lost;
		// or the path's stream still moves bytes, so our requests or their responses are still
		// on their way (a large segment on a slow rail takes a while).
		last := q.lastRx.Load()
		if sa, ok := q.e.tr.(StreamActivity); ok {
			last = max(last, sa.LastActivity(s.a.path))
		}
		if to := q.e.timeoutNS(s.a.timeout); to > 0 && now-last < to {
			q.deadline.Store(last + to)
			q.sqMu.Unlock()
			return true
		}
	}
	s.retries++
	if s.retries <= s.a.retryCnt {
		q.ctr.ackTimeout.Add(1)
		q.e.log.Debug().Uint32("qp", q.num).Uint8("retry", s.retries).Uint32("psn", s.una).Msg("engine: ACK timeout, go-back-N")
		s.rewind(s.una)
		q.deadline.Store(0)
		q.pumpLocked()
		if q.deadline.Load() == 0 {
			q.armTimer()
		}
		q.sqMu.Unlock()
		return true
	}
	// Retries on this path are exhausted: automatic path migration when ARMED [Vishnu07 ch. 9],
	// otherwise RETRY_EXC_ERR and ERROR. MigrateAuto takes the QP's modify lock: call it unlocked.
	s.migrating = true
	q.deadline.Store(0)
	path := s.a.path
	q.altArmed.Store(nil)
	q.sqMu.Unlock()
	ok := q.migrateAuto(fmt.Sprintf("retries exhausted on path %s port %d", path.Addr, path.PortNum))
	q.sqMu.Lock()
	defer q.sqMu.Unlock()
	s.migrating = false
	st = q.st()
	if q.dead.Load() || (st != ibv.StateRTS && st != ibv.StateSQD) {
		return false
	}
	if !ok || !s.a.hasAlt {
		q.failLocked(ibv.WCRetryExcErr, fmt.Sprintf("transport retries exhausted on path %s", path.Addr))
		return false
	}
	q.swapToAltLocked()
	s.rewind(s.una)
	q.e.log.Debug().Uint32("qp", q.num).Str("path", s.a.path.Addr).Msg("engine: migrated to alternate path")
	q.pumpLocked()
	if q.deadline.Load() == 0 {
		q.armTimer()
	}
	return true
}
