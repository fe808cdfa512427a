package engine

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/wire"
)

// Direct placement: a stream transport reads a large packet's header before its payload has
// arrived. Place tells it where that payload belongs — the target memory of an in-order RDMA
// write, the local buffer of an in-order read response — so it can read the payload from the
// socket straight into registered memory instead of into a buffer the engine then copies from
// (the receive-side zero copy of an RDMA NIC, which places payloads by DMA as they arrive).
//
// A placement is a reservation of the queue pair's next expected packet of one direction: the
// responder's next request (an RDMA write) or the requester's next response (a read response);
// a QP keeps one reservation of each, since the peer's requests and the responses to its own may
// arrive on different streams at once. The transport writes the destination only between
// Placement.Begin and End (one non-blocking read at a time), and only while the reservation
// stands. Whatever could make the bytes stale revokes it, waiting for a read in progress to end:
// a packet of the same direction arriving on another link (after a path migration the same PSN
// may come again on a new stream while the old one still trickles in — without revocation its
// late payload could overwrite newer data), any Modify, a move to ERROR, Destroy. A packet of
// the other direction does not revoke: with one reservation per QP, the ACKs of a rank's own
// puts revoked the placement of its peer's puts arriving on the other stream, and every revoked
// 1 MiB segment was lost (put_bibw collapsed). A revoked placement's packet is dropped;
// retransmission covers it as for any loss.
// The packet itself then goes through DeliverSplit, which runs every check of Deliver; a payload
// that is already in place is not copied again.

// placer is the placement reservation of a QP.
type placer struct {
	busy atomic.Bool // a reservation stands (lock-free check on every delivery)
	mu   sync.Mutex  // held around each read into a destination, and to revoke
	gen  uint64
	link Link // the link holding the reservation
}

// Placement is a granted placement: Dst is exactly as long as the packet's payload.
type Placement struct {
	Dst []byte
	p   *placer
	gen uint64
}

// Placement directions (QP.place).
const (
	placeRequest  = 0
	placeResponse = 1
)

// Begin must precede every write into Dst (a copy or a non-blocking read); it returns false when
// the placement was revoked (the transport then discards the rest of the payload and drops the
// packet). After true, End must follow the write. In race builds the pair also joins the
// engine's serialized accesses to registered memory (race_on.go).
func (pl *Placement) Begin() bool {
	p := pl.p
	p.mu.Lock()
	if p.gen != pl.gen || p.link == nil {
		p.mu.Unlock()
		return false
	}
	raceMemLock()
	return true
}

// End ends a write begun with Begin.
func (pl *Placement) End() {
	raceMemUnlock()
	pl.p.mu.Unlock()
}

// Valid reports whether the placement still stands.
func (pl *Placement) Valid() bool {
	if pl.p == nil {
		return false
	}
	p := pl.p
	p.mu.Lock()
	ok := p.gen == pl.gen && p.link != nil
	p.mu.Unlock()
	return ok
}

// revokePlacement revokes the QP's reservations unless link holds them (nil: revoke both); it
// waits for a read in progress (a non-blocking read: short). The placement lock is innermost, so
// callers may hold sqMu or rqMu.
func (q *QP) revokePlacement(link Link) {
	for i := range q.place {
		q.place[i].revoke(link)
	}
}

// revokeOnArrival revokes the reservation of a packet's direction held by another link than the
// one it arrived on.
func (q *QP) revokeOnArrival(link Link, request bool) {
	k := placeResponse
	if request {
		k = placeRequest
	}
	q.place[k].revoke(link)
}

func (p *placer) revoke(link Link) {
	if !p.busy.Load() {
		return
	}
	p.mu.Lock()
	if p.link != nil && (link == nil || p.link != link) {
		p.gen++
		p.link = nil
		p.busy.Store(false)
	}
	p.mu.Unlock()
}

func (q *QP) reserve(p *placer, link Link) (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if q.dead.Load() {
		return 0, false
	}
	p.gen++
	p.link = link
	p.busy.Store(true)
	return p.gen, true
}

// release ends the reservation of gen (the packet is being delivered).
func (p *placer) release(gen uint64) {
	p.mu.Lock()
	if p.gen == gen && p.link != nil {
		p.link = nil
		p.busy.Store(false)
	}
	p.mu.Unlock()
}

// HeaderLen returns the length of the headers at the start of a packet, or 0 when b is too short
// to tell or names no known opcode.
func HeaderLen(b []byte) int {
	if len(b) < wire.BTHLen || b[0] != wire.Version {
		return 0
	}
	h := wire.Header{Opcode: wire.Opcode(b[1]), Flags: wire.Flags(b[2])}
	return h.HeaderLen()
}

// PayloadLen returns the payload length field of a packet's headers (b: at least a BTH).
func PayloadLen(b []byte) int { return int(binary.LittleEndian.Uint32(b[16:])) }

// decodeSplit decodes headers hdr (exactly HeaderLen bytes) of a packet whose payload is held
// apart, in payload; tmp is scratch.
func decodeSplit(hdr, payload []byte, p *wire.Packet, tmp *[wire.MaxHeaderLen]byte) error {
	if len(hdr) < wire.BTHLen || len(hdr) > len(tmp) {
		return fmt.Errorf("%w: %d header bytes", wire.ErrMalformed, len(hdr))
	}
	n := copy(tmp[:], hdr)
	plen := binary.LittleEndian.Uint32(tmp[16:])
	if uint64(plen) != uint64(len(payload)) {
		return fmt.Errorf("%w: payload length field %d, packet carries %d", wire.ErrMalformed, plen, len(payload))
	}
	binary.LittleEndian.PutUint32(tmp[16:], 0)
	if err := wire.Decode(tmp[:n], p); err != nil {
		return err
	}
	switch p.Opcode {
	case wire.OpReadReq, wire.OpAtomic, wire.OpAck, wire.OpAtomicAck:
		if len(payload) != 0 {
			return fmt.Errorf("%w: %v with a %d-byte payload", wire.ErrMalformed, p.Opcode, len(payload))
		}
	}
	if p.HasRETH() && p.Opcode != wire.OpReadReq && uint64(len(payload)) > uint64(p.RETH.DMALen) {
		return fmt.Errorf("%w: payload %d > DMA length %d", wire.ErrMalformed, len(payload), p.RETH.DMALen)
	}
	p.Payload = payload
	return nil
}

// Place offers direct placement for the packet whose headers are hdr (HeaderLen bytes) and whose
// payload (PayloadLen bytes) has not been read yet, arriving on link; b is the reader's batch. It succeeds for an RDMA
// write packet or read response that is the next one its queue pair expects and whose payload
// lands in one contiguous range of memory; it changes no protocol state. On success the
// transport reads the payload into Dst (each read between Begin and End) and then passes the
// packet to DeliverSplit with Dst as payload, or drops it when Begin said it was revoked.
func (e *Engine) Place(b *Batch, hdr []byte, link Link) (Placement, bool) {
	raceAcquire() // the transport writes the payload into memory before DeliverSplit
	var p wire.Packet
	tmp := b.scratch()
	if len(hdr) < wire.BTHLen || len(hdr) > len(tmp) {
		return Placement{}, false
	}
	plen := PayloadLen(hdr)
	n := copy(tmp[:], hdr)
	binary.LittleEndian.PutUint32(tmp[16:], 0)
	if plen == 0 || wire.Decode(tmp[:n], &p) != nil || (p.Opcode != wire.OpWrite && p.Opcode != wire.OpReadResp) {
		return Placement{}, false
	}
	if p.HasRETH() && uint64(plen) > uint64(p.RETH.DMALen) {
		return Placement{}, false
	}
	q := e.lookup(p.DestQPN)
	if q == nil || q.typ != ibv.RC {
		return Placement{}, false
	}
	var dst []byte
	pr := &q.place[placeRequest]
	switch p.Opcode {
	case wire.OpWrite:
		dst = q.placeWrite(&p, plen)
	case wire.OpReadResp:
		dst = q.placeReadResp(&p, plen)
		pr = &q.place[placeResponse]
	}
	if dst == nil {
		return Placement{}, false
	}
	gen, ok := q.reserve(pr, link)
	if !ok {
		return Placement{}, false
	}
	return Placement{Dst: dst, p: pr, gen: gen}, true
}

// placeWrite is where an in-order RDMA write packet's payload of plen bytes goes (nil: use the
// normal path).
func (q *QP) placeWrite(p *wire.Packet, plen int) []byte {
	q.rqMu.Lock()
	defer q.rqMu.Unlock()
	switch q.st() {
	case ibv.StateRTR, ibv.StateRTS, ibv.StateSQD:
	default:
		return nil
	}
	r := &q.rsp
	if p.SrcQPN != q.rq.a.destQPN || p.PSN != r.ePSN || p.Flags&wire.FlagImm != 0 {
		return nil
	}
	if p.Flags&wire.FlagFirst != 0 {
		if r.op != 0 || uint64(plen) > uint64(p.RETH.DMALen) {
			return nil
		}
		dst, ok := q.remote(p.RETH.RKey, p.RETH.VAddr, uint64(p.RETH.DMALen), ibv.AccessRemoteWrite)
		if !ok || len(dst) < plen {
			return nil
		}
		return dst[:plen:plen]
	}
	if r.op != wire.OpWrite || r.off+uint64(plen) > uint64(len(r.dst)) {
		return nil
	}
	return r.dst[r.off : r.off+uint64(plen) : r.off+uint64(plen)]
}

// placeReadResp is where an in-order read response's payload of plen bytes goes (nil: use the
// normal path).
func (q *QP) placeReadResp(p *wire.Packet, plen int) []byte {
	q.sqMu.Lock()
	defer q.sqMu.Unlock()
	st := q.st()
	if st != ibv.StateRTS && st != ibv.StateSQD {
		return nil
	}
	s := &q.sq
	if p.SrcQPN != s.a.destQPN || p.PSN != s.una || s.head == s.tail {
		return nil
	}
	w := s.slot(s.head)
	if w.op != ibv.OpRDMARead || w.status != ibv.WCSuccess {
		return nil
	}
	k := uint32(wire.PSNDiff(p.PSN, w.firstPSN))
	if k >= w.npkts {
		return nil
	}
	off := uint64(k) * uint64(w.pkt)
	if want := min(uint64(w.pkt), w.length-min(off, w.length)); uint64(plen) != want {
		return nil
	}
	for _, b := range w.bufs {
		if off >= uint64(len(b)) {
			off -= uint64(len(b))
			continue
		}
		if off+uint64(plen) > uint64(len(b)) {
			return nil // spans two buffers
		}
		return b[off : off+uint64(plen) : off+uint64(plen)]
	}
	return nil
}

// DeliverSplit is Deliver for a packet whose headers (hdr) and payload are held apart, e.g. after
// a placement (pl, or nil): the payload is then already in place and is not copied again.
func (e *Engine) DeliverSplit(b *Batch, hdr, payload []byte, link Link, pl *Placement) {
	raceAcquire()
	if pl != nil && pl.p != nil {
		pl.p.release(pl.gen)
	}
	var p wire.Packet
	if err := decodeSplit(hdr, payload, &p, b.scratch()); err != nil {
		e.log.Debug().Err(err).Msg("engine: dropped malformed packet")
		return
	}
	e.deliver(b, &p, link)
}

// scratch is header scratch space of the batch's goroutine (a nil batch: fresh).
func (b *Batch) scratch() *[wire.MaxHeaderLen]byte {
	if b == nil {
		return new([wire.MaxHeaderLen]byte)
	}
	return &b.tmp
}

// samePlace reports whether dst and src start at the same byte (a placed payload).
func samePlace(dst, src []byte) bool {
	return len(dst) > 0 && len(src) > 0 && &dst[0] == &src[0]
}
