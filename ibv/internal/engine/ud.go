package engine

import (
	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/goarmci/goarmci/ibv/wire"
)

// postUD sends a UD datagram (IBA §9.8): at most the port MTU, completed locally as soon as it
// is handed to the transport (UD gives no delivery guarantee). A Q_Key with the high bit set
// means "use the QP's Q_Key", as in verbs.
func (q *QP) postUD(wr *ibv.SendWR) error {
	q.sqMu.Lock()
	defer q.sqMu.Unlock()
	s := &q.sq
	cq := q.ibq.SendCQ()
	wc := ibv.WC{WRID: wr.ID, Opcode: ibv.WCSend, QPNum: q.num}
	if q.st() == ibv.StateError {
		wc.Status = ibv.WCWRFlushErr
		provider.Push(cq, wc)
		return nil
	}
	if q.st() != ibv.StateRTS {
		// SQD: UD sends are started only in RTS
		wc.Status = ibv.WCWRFlushErr
		provider.Push(cq, wc)
		return nil
	}
	path := wr.AH.Attr
	if path.PortNum == 0 {
		path.PortNum = s.a.port
	}
	var st ibv.WCStatus
	bufs := s.udBufs[:0]
	bufs, st = provider.LocalBuffers(q.ctx, q.pd, wr, false, bufs)
	defer func() {
		for i := range bufs {
			bufs[i] = nil
		}
		s.udBufs = bufs[:0]
	}()
	n := buffersLen(bufs)
	if st == ibv.WCSuccess {
		if mtu := q.portMTU(path.PortNum); mtu > 0 && n > uint64(mtu) {
			st = ibv.WCLocLenErr
		}
	}
	if st != ibv.WCSuccess {
		wc.Status = st
		provider.Push(cq, wc)
		return nil
	}
	mcast := ibv.IsMulticastLID(path.DLID)
	mt, _ := q.e.tr.(McastTransport)
	if mcast && mt == nil {
		wc.Status = ibv.WCLocQPOpErr // no multicast on this transport
		provider.Push(cq, wc)
		return nil
	}
	qkey := wr.QKey
	if qkey&0x80000000 != 0 {
		qkey = s.a.qkey
	}
	h := wire.Header{Opcode: wire.OpUDSend, Flags: wire.FlagOnly, DestQPN: wr.RemoteQPN & wire.MaxQPN, PSN: s.sqPSN,
		SrcQPN: q.num, DETH: wire.DETH{QKey: qkey, SrcQPN: q.num}}
	if wr.Opcode == ibv.OpSendImm {
		h.Flags |= wire.FlagImm
		h.Imm = wr.Imm
	}
	s.sqPSN = wire.PSNAdd(s.sqPSN, 1)
	if s.pbuf == nil || cap(s.pbuf) < int(n) {
		s.pbuf = make([]byte, 0, max(int(n), 4096))
	}
	payload, _ := gather(bufs, 0, int(n), s.pbuf[:0])
	var hdr []byte
	var err error
	if mcast {
		// the envelope in front of the header ([IBA]'s GRH with the MGID, engine/mcast.go)
		hdr, err = wire.AppendHeader(appendEnvelope(s.mbuf[:0], path.DGID, path.DLID), &h, len(payload))
		if err == nil {
			s.mbuf = hdr[:0]
			err = mt.SendMcast(path, hdr, payload)
		}
		if err != nil {
			q.e.log.Debug().Err(err).Uint32("qp", q.num).Stringer("group", path.DGID).Msg("engine: multicast send failed")
		}
	} else if hdr, err = wire.AppendHeader(s.hbuf[:0], &h, len(payload)); err == nil {
		if err := q.e.tr.Send(path, hdr, payload); err != nil {
			q.e.log.Debug().Err(err).Uint32("qp", q.num).Str("dest", path.Addr).Msg("engine: UD send failed")
		}
	}
	if wr.Flags&ibv.SendSignaled != 0 || q.sigAll {
		wc.Status = ibv.WCSuccess
		wc.ByteLen = uint32(n)
		provider.Push(cq, wc)
	}
	return nil
}

// recvUD delivers a datagram: dropped silently unless the QP is in RTR/RTS/SQD, the Q_Key
// matches and a receive is posted. Software providers place no GRH in front of the data; the
// source is reported in WC.SrcQP and WC.SrcAddr.
func (q *QP) recvUD(p *wire.Packet, link Link) {
	if q.typ != ibv.UD {
		return
	}
	q.rqMu.Lock()
	defer q.rqMu.Unlock()
	switch q.st() {
	case ibv.StateRTR, ibv.StateRTS, ibv.StateSQD:
	default:
		return
	}
	if p.DETH.QKey != q.rq.a.qkey {
		return
	}
	s, ok := q.popRecv()
	if !ok {
		return
	}
	wc := ibv.WC{WRID: s.id, Opcode: ibv.WCRecv, QPNum: q.num, SrcQP: p.DETH.SrcQPN, SrcAddr: link.RemoteAddr()}
	var st ibv.WCStatus
	q.rq.scratch, st = provider.LocalSlices(q.ctx, q.pd, s.sgl, true, q.rq.scratch[:0])
	switch {
	case st != ibv.WCSuccess:
		wc.Status = st
	case !scatter(q.rq.scratch, 0, p.Payload):
		wc.Status = ibv.WCLocLenErr
	default:
		wc.ByteLen = uint32(len(p.Payload))
		if p.Flags&wire.FlagImm != 0 {
			wc.Imm, wc.HasImm = p.Imm, true
		}
	}
	for i := range q.rq.scratch {
		q.rq.scratch[i] = nil
	}
	provider.Push(q.ibq.RecvCQ(), wc)
}
