package engine

import (
	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/goarmci/goarmci/ibv/wire"
	"github.com/goarmci/goarmci/internal/accum"
)

// atomicCacheLen is how many atomic results a responder remembers for replay to duplicate
// requests (IBA: at least the responder's outstanding read/atomic depth). It equals the default
// send window, so every atomic a requester can have unacknowledged is remembered, which the
// connection recovery of hybridft relies on (ResponderState).
const atomicCacheLen = 128

type atomicResult struct {
	psn   uint32
	valid bool
	value uint64
}

// responder is the RC responder state of a QP (rqMu held).
type responder struct {
	ePSN    uint32 // expected PSN
	msn     uint32 // message sequence number (messages completed)
	nakSent bool   // a PSN sequence NAK was sent for ePSN

	// the multi-packet message being received
	op      wire.Opcode
	dst     []byte // write/accumulate: target memory of the whole message
	rkey    uint32
	vaddr   uint64
	off     uint64
	accType accum.Type
	scale   complex128
	recv    *rwqe
	recvID  uint64
	rbufs   [][]byte
	rlen    uint64
	rcvd    uint64

	// atomics is allocated at the first atomic executed (atomicCacheLen entries): a DC peer
	// record that never sees one stays small (dc.go).
	atomics []atomicResult

	ackPending bool
	ackLink    Link
	inBatch    *Batch
	hbuf       [wire.MaxHeaderLen]byte
}

func (r *responder) reset(psn uint32) {
	r.closeMsg()
	r.ePSN, r.msn, r.nakSent = psn, 0, false
	clear(r.atomics)
	r.ackPending = false
	r.ackLink = nil
}

func (r *responder) closeMsg() {
	r.op = 0
	r.dst = nil
	r.recv = nil
	for i := range r.rbufs {
		r.rbufs[i] = nil
	}
	r.rbufs = r.rbufs[:0]
	r.off, r.rcvd, r.rlen = 0, 0, 0
}

// reply sends a response packet on link (rqMu held).
func (q *QP) reply(link Link, h *wire.Header, payload []byte) {
	h.DestQPN = q.rq.a.destQPN
	h.SrcQPN = q.num
	if h.Flags&wire.FlagOnly == 0 && h.Opcode != wire.OpReadResp {
		h.Flags |= wire.FlagOnly
	}
	hdr, err := wire.AppendHeader(q.rsp.hbuf[:0], h, len(payload))
	if err != nil {
		q.e.log.Error().Err(err).Msg("engine: cannot encode response")
		return
	}
	if err := link.Reply(hdr, payload); err != nil {
		q.e.log.Debug().Err(err).Uint32("qp", q.num).Msg("engine: reply failed")
	}
}

// replyRef is reply for a payload that is a view of registered memory: a RefReplier link may
// send it without copying (see RefSender).
func (q *QP) replyRef(link Link, h *wire.Header, payload []byte) {
	rr, ok := link.(RefReplier)
	if !ok {
		q.reply(link, h, payload)
		return
	}
	h.DestQPN = q.rq.a.destQPN
	h.SrcQPN = q.num
	hdr, err := wire.AppendHeader(q.rsp.hbuf[:0], h, len(payload))
	if err != nil {
		q.e.log.Error().Err(err).Msg("engine: cannot encode response")
		return
	}
	if err := rr.ReplyRef(hdr, payload); err != nil {
		q.e.log.Debug().Err(err).Uint32("qp", q.num).Msg("engine: reply failed")
	}
}

func (q *QP) sendAck(link Link, psn uint32, syn wire.Syndrome, msn uint32) {
	h := wire.Header{Opcode: wire.OpAck, Flags: wire.FlagOnly, PSN: psn & wire.PSNMask,
		AETH: wire.AETH{Syndrome: syn, MSN: msn & wire.PSNMask}}
	q.reply(link, &h, nil)
}

// nak answers the request at psn with a NAK and abandons the message in progress.
func (q *QP) nak(link Link, psn uint32, syn wire.Syndrome) {
	r := &q.rsp
	r.ackPending = false
	r.closeMsg()
	q.sendAck(link, psn, syn, r.msn)
}

// deferAck schedules an ACK of ePSN−1 at the end of the batch (ACK coalescing).
func (q *QP) deferAck(b *Batch, link Link) {
	r := &q.rsp
	r.ackPending = true
	r.ackLink = link
	if b == nil {
		q.flushAckLocked()
		return
	}
	if r.inBatch != b {
		r.inBatch = b
		b.qps = append(b.qps, q)
	}
}

func (q *QP) flushAck(b *Batch) {
	q.rqMu.Lock()
	if q.rsp.inBatch == b {
		q.rsp.inBatch = nil
	}
	q.flushAckLocked()
	q.rqMu.Unlock()
}

func (q *QP) flushAckLocked() {
	r := &q.rsp
	if !r.ackPending || r.ackLink == nil {
		return
	}
	r.ackPending = false
	q.sendAck(r.ackLink, wire.PSNAdd(r.ePSN, wire.PSNMask), wire.SynAck, r.msn)
}

// respond is the RC responder (IBA §9.7.5): PSN check, duplicate handling, access checks,
// execution, ACK/NAK generation.
func (q *QP) respond(b *Batch, p *wire.Packet, link Link) {
	if q.typ != ibv.RC {
		return
	}
	q.rqMu.Lock()
	defer q.rqMu.Unlock()
	switch q.st() {
	case ibv.StateRTR, ibv.StateRTS, ibv.StateSQD:
	default:
		return // RESET/INIT/ERROR: silently dropped
	}
	if p.SrcQPN != q.rq.a.destQPN {
		return // not from the connected peer QP
	}
	r := &q.rsp
	d := wire.PSNDiff(p.PSN, r.ePSN)
	switch {
	case d > 0:
		// a packet is missing: one sequence NAK per expected PSN, then silence until it arrives
		q.ctr.outOfSeq.Add(1)
		if !r.nakSent {
			r.nakSent = true
			r.ackPending = false
			q.sendAck(link, r.ePSN, wire.SynNakPSNSeq, r.msn)
		}
		return
	case d < 0:
		q.ctr.dup.Add(1)
		q.duplicate(b, p, link)
		return
	}
	r.nakSent = false
	first := p.Flags&wire.FlagFirst != 0
	last := p.Flags&wire.FlagLast != 0
	if first != (r.op == 0) || (!first && r.op != p.Opcode) {
		// a new message while one is open, or a continuation without its first packet
		q.nak(link, p.PSN, wire.SynNakInvReq)
		return
	}
	switch p.Opcode {
	case wire.OpSend:
		if !q.recvSend(p, link, first, last) {
			return
		}
	case wire.OpWrite:
		if !q.recvWrite(p, link, first, last) {
			return
		}
	case wire.OpAccumulate:
		if !q.recvAccumulate(p, link, first) {
			return
		}
	case wire.OpReadReq:
		n, ok := q.readResponses(p, link, p.PSN)
		if !ok {
			return
		}
		r.ePSN = wire.PSNAdd(r.ePSN, n)
		r.msn++
		r.ackPending = false
		return
	case wire.OpAtomic:
		v, ok := q.execAtomic(p, link)
		if !ok {
			return
		}
		if r.atomics == nil {
			r.atomics = make([]atomicResult, atomicCacheLen)
		}
		r.atomics[p.PSN%atomicCacheLen] = atomicResult{psn: p.PSN, valid: true, value: v}
		r.ePSN = wire.PSNAdd(r.ePSN, 1)
		r.msn++
		r.ackPending = false
		q.reply(link, &wire.Header{Opcode: wire.OpAtomicAck, PSN: p.PSN, AETH: wire.AETH{MSN: r.msn & wire.PSNMask},
			AtomicAck: v}, nil)
		return
	default:
		q.nak(link, p.PSN, wire.SynNakInvReq)
		return
	}
	r.ePSN = wire.PSNAdd(r.ePSN, 1)
	if last {
		r.msn++
		r.closeMsg()
	}
	if p.Flags&wire.FlagAckReq != 0 {
		q.deferAck(b, link)
	}
}

// duplicate answers a request the responder already executed (PSN < ePSN): writes, sends and
// accumulates are re-ACKed and never applied twice; reads are executed again (they are
// idempotent); atomics replay their recorded result.
func (q *QP) duplicate(b *Batch, p *wire.Packet, link Link) {
	r := &q.rsp
	switch p.Opcode {
	case wire.OpReadReq:
		_, _ = q.readResponses(p, link, p.PSN)
	case wire.OpAtomic:
		if r.atomics == nil {
			return // no atomic executed yet: nothing to replay
		}
		a := r.atomics[p.PSN%atomicCacheLen]
		if a.valid && a.psn == p.PSN {
			q.reply(link, &wire.Header{Opcode: wire.OpAtomicAck, PSN: p.PSN, AETH: wire.AETH{MSN: r.msn & wire.PSNMask},
				AtomicAck: a.value}, nil)
		}
	default:
		q.deferAck(b, link)
	}
}

// remote resolves target memory for a request: the MR check of ibv.Context.RemoteSlice plus the
// QP's own remote access flags.
func (q *QP) remote(rkey uint32, vaddr, n uint64, need ibv.Access) ([]byte, bool) {
	if q.rq.a.access&need != need {
		return nil, false
	}
	if n == 0 {
		return nil, true
	}
	b, st := provider.RemoteSlice(q.ctx, q.pd, rkey, vaddr, n, need)
	return b, st == ibv.WCSuccess
}

func (q *QP) recvWrite(p *wire.Packet, link Link, first, last bool) bool {
	r := &q.rsp
	if first {
		dst, ok := q.remote(p.RETH.RKey, p.RETH.VAddr, uint64(p.RETH.DMALen), ibv.AccessRemoteWrite)
		if !ok {
			q.nak(link, p.PSN, wire.SynNakRemAccess)
			return false
		}
		r.op, r.dst, r.off, r.rkey, r.vaddr = wire.OpWrite, dst, 0, p.RETH.RKey, p.RETH.VAddr
	}
	if r.off+uint64(len(p.Payload)) > uint64(len(r.dst)) || (last && r.off+uint64(len(p.Payload)) != uint64(len(r.dst))) {
		q.nak(link, p.PSN, wire.SynNakInvReq)
		return false
	}
	if last && p.Flags&wire.FlagImm != 0 {
		// write with immediate consumes a receive: check for one before touching memory
		if q.recvEmpty() {
			q.rnr(link, p.PSN, first)
			return false
		}
	}
	if !samePlace(r.dst[r.off:], p.Payload) { // else placed there directly (place.go)
		raceMemLock()
		copy(r.dst[r.off:], p.Payload)
		raceMemUnlock()
	}
	r.off += uint64(len(p.Payload))
	if last && p.Flags&wire.FlagImm != 0 {
		s, _ := q.popRecv()
		provider.Push(q.ibq.RecvCQ(), ibv.WC{WRID: s.id, Status: ibv.WCSuccess, Opcode: ibv.WCRecvRDMAImm,
			ByteLen: uint32(r.off), QPNum: q.num, SrcQP: q.rq.a.destQPN, Imm: p.Imm, HasImm: true})

	}
	return true
}

// rnr answers a request that needs a receive when none is posted (RNR NAK carrying the
// responder's MinRNRTimer code); the requester retries the request from psn.
func (q *QP) rnr(link Link, psn uint32, first bool) {
	r := &q.rsp
	r.ackPending = false
	if first {
		r.closeMsg()
	}
	q.sendAck(link, psn, wire.SynRNR, uint32(q.rq.a.minRNRTimer))
}

func (q *QP) recvSend(p *wire.Packet, link Link, first, last bool) bool {
	r := &q.rsp
	if first {
		s, ok := q.popRecv()
		if !ok {
			q.rnr(link, p.PSN, true)
			return false
		}
		var st ibv.WCStatus
		r.rbufs, st = provider.LocalSlices(q.ctx, q.pd, s.sgl, true, r.rbufs[:0])
		r.op, r.recv, r.recvID, r.rcvd = wire.OpSend, s, s.id, 0
		if st != ibv.WCSuccess {
			provider.Push(q.ibq.RecvCQ(), ibv.WC{WRID: s.id, Status: st, Opcode: ibv.WCRecv, QPNum: q.num})
			q.nak(link, p.PSN, wire.SynNakRemOp)
			return false
		}
		r.rlen = buffersLen(r.rbufs)
	}
	if r.rcvd+uint64(len(p.Payload)) > r.rlen || !scatter(r.rbufs, r.rcvd, p.Payload) {
		provider.Push(q.ibq.RecvCQ(), ibv.WC{WRID: r.recvID, Status: ibv.WCLocLenErr, Opcode: ibv.WCRecv, QPNum: q.num})
		q.nak(link, p.PSN, wire.SynNakInvReq)
		return false
	}
	r.rcvd += uint64(len(p.Payload))
	if last {
		wc := ibv.WC{WRID: r.recvID, Status: ibv.WCSuccess, Opcode: ibv.WCRecv, ByteLen: uint32(r.rcvd),
			QPNum: q.num, SrcQP: q.rq.a.destQPN}
		if p.Flags&wire.FlagImm != 0 {
			wc.Imm, wc.HasImm = p.Imm, true
		}
		provider.Push(q.ibq.RecvCQ(), wc)
	}
	return true
}

func (q *QP) recvAccumulate(p *wire.Packet, link Link, first bool) bool {
	r := &q.rsp
	if first {
		t := accum.Type(p.Acc.Type)
		es := uint64(t.Size())
		if es == 0 || uint64(p.RETH.DMALen)%es != 0 || p.RETH.VAddr%uint64(t.Align()) != 0 {
			q.nak(link, p.PSN, wire.SynNakInvReq)
			return false
		}
		dst, ok := q.remote(p.RETH.RKey, p.RETH.VAddr, uint64(p.RETH.DMALen), ibv.AccessRemoteAtomic)
		if !ok {
			q.nak(link, p.PSN, wire.SynNakRemAccess)
			return false
		}
		r.op, r.dst, r.off, r.accType, r.scale = wire.OpAccumulate, dst, 0, t, p.Acc.Scale
	}
	n := uint64(len(p.Payload))
	if r.off+n > uint64(len(r.dst)) {
		q.nak(link, p.PSN, wire.SynNakInvReq)
		return false
	}
	raceMemLock()
	err := accum.Apply(r.accType, r.dst[r.off:r.off+n], p.Payload, r.scale)
	raceMemUnlock()
	if err != nil {
		q.nak(link, p.PSN, wire.SynNakInvReq)
		return false
	}
	r.off += n
	return true
}

// readResponses executes a read request (new or duplicate) whose first response has PSN psn and
// sends its responses, segmented at the path MTU. It returns the number of response PSNs.
func (q *QP) readResponses(p *wire.Packet, link Link, psn uint32) (uint32, bool) {
	r := &q.rsp
	length := uint64(p.RETH.DMALen)
	src, ok := q.remote(p.RETH.RKey, p.RETH.VAddr, length, ibv.AccessRemoteRead)
	if !ok {
		q.nak(link, psn, wire.SynNakRemAccess)
		return 0, false
	}
	mtu := uint64(q.rq.a.mtu)
	if p.Flags&wire.FlagPathMTU != 0 && q.rq.a.pathMTU > 0 {
		mtu = uint64(q.rq.a.pathMTU) // the requester counts path-MTU responses (a short read)
	}
	n := uint32(max(1, (length+mtu-1)/mtu))
	if lc, ok := link.(LinkCorker); ok && n > 1 {
		lc.Cork()
		defer lc.Uncork()
	}
	msn := r.msn
	if wire.PSNDiff(psn, r.ePSN) >= 0 {
		msn++ // a new read completes a message
	}
	for k := uint32(0); k < n; k++ {
		off := uint64(k) * mtu
		end := min(off+mtu, length)
		h := wire.Header{Opcode: wire.OpReadResp, PSN: wire.PSNAdd(psn, k), AETH: wire.AETH{MSN: msn & wire.PSNMask}}
		if k == 0 {
			h.Flags |= wire.FlagFirst
		}
		if k == n-1 {
			h.Flags |= wire.FlagLast
		}
		raceMemLock() // the transport may copy the payload before Reply returns
		q.replyRef(link, &h, src[off:end:end])
		raceMemUnlock()
	}
	return n, true
}

func (q *QP) execAtomic(p *wire.Packet, link Link) (uint64, bool) {
	a := &p.Atomic
	b, ok := q.remote(a.RKey, a.VAddr, uint64(a.Op.Size()), ibv.AccessRemoteAtomic)
	if !ok {
		q.nak(link, p.PSN, wire.SynNakRemAccess)
		return 0, false
	}
	var op accum.Op // zero (unknown) for an op the table lacks: RMW refuses it
	if int(a.Op) < len(wireAtomics) {
		op = wireAtomics[a.Op]
	}
	raceMemLock()
	v, err := accum.RMW(op, b, a.SwapAdd, a.Compare)
	raceMemUnlock()
	if err != nil {
		q.nak(link, p.PSN, wire.SynNakInvReq)
		return 0, false
	}
	return v, true
}

// wireAtomics maps the wire's atomic ops to the accum kernels.
var wireAtomics = [...]accum.Op{wire.AtomicFetchAdd64: accum.OpFetchAdd64, wire.AtomicCmpSwap64: accum.OpCmpSwap64,
	wire.AtomicSwap64: accum.OpSwap64, wire.AtomicFetchAdd32: accum.OpFetchAdd32, wire.AtomicSwap32: accum.OpSwap32,
	wire.AtomicCmpSwap32: accum.OpCmpSwap32}
