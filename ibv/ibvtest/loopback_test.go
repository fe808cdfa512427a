package ibvtest_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/ibvtest"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/goarmci/goarmci/internal/accum"
)

// loop is a reference provider for the suite's own test: every request is executed synchronously
// in PostSend under one lock, between devices of this process. It exists to show that the suite
// passes on a provider that follows the verbs semantics, so a failing case on a real provider
// points at the provider, not at the suite.
type loopNet struct {
	mu   sync.Mutex
	devs map[string]*loopDev
	next int
}

var loop = &loopNet{devs: map[string]*loopDev{}}

const loopMTU = 2048

type loopDev struct {
	ctx  *ibv.Context
	addr string
	wg   sync.WaitGroup
}

type loopQP struct {
	dev   *loopDev
	qp    *ibv.QP
	recvs []ibv.RecvWR
	rnr   []pendingSend // sends waiting for a receive at this QP (RNR retry 7)
	sqd   []ibv.SendWR  // posted in SQD, started on the return to RTS
	// waitingAt is the peer whose rnr queue holds this QP's sends.
	waitingAt *loopQP
	// The attributes the data path needs, kept here so no QP lock is taken under loop.mu.
	access ibv.Access
	qkey   uint32
	av     ibv.AHAttr
	dest   uint32
}

type pendingSend struct {
	from *loopQP
	wr   ibv.SendWR
	data []byte
}

func openLoop(t testing.TB) *ibv.Context {
	loop.mu.Lock()
	loop.next++
	d := &loopDev{addr: fmt.Sprintf("loop:%d", loop.next)}
	loop.devs[d.addr] = d
	loop.mu.Unlock()
	d.ctx = provider.NewContext(d)
	t.Cleanup(func() { _ = d.ctx.Close() })
	return d.ctx
}

func (d *loopDev) Attr() ibv.DeviceAttr {
	return ibv.DeviceAttr{Name: d.addr, Provider: "loop", PhysPortCnt: 1, MaxMsgSize: 1 << 30, AtomicCap: true}
}

func (d *loopDev) Port(n uint8) (ibv.PortAttr, error) {
	if n != 1 {
		return ibv.PortAttr{}, fmt.Errorf("port %d: %w", n, ibv.ErrInvalidArgument)
	}
	return ibv.PortAttr{Num: 1, State: ibv.PortActive, LID: 1, MTU: loopMTU, Addr: d.addr}, nil
}

func (d *loopDev) RegMR(*ibv.MR) error   { return nil }
func (d *loopDev) DeregMR(*ibv.MR) error { return nil }
func (d *loopDev) CreateAH(*ibv.AH) error {
	return nil
}

func (d *loopDev) CreateQP(qp *ibv.QP) (ibv.QPDriver, error) {
	return &loopQP{dev: d, qp: qp}, nil
}

func (d *loopDev) Close() error {
	loop.mu.Lock()
	delete(loop.devs, d.addr)
	loop.mu.Unlock()
	d.wg.Wait()
	return nil
}

func (q *loopQP) Modify(cur, attr *ibv.QPAttr, mask ibv.AttrMask) error {
	loop.mu.Lock()
	defer loop.mu.Unlock()
	if mask&ibv.AttrAccessFlags != 0 {
		q.access = attr.AccessFlags
	}
	if mask&ibv.AttrQKey != 0 {
		q.qkey = attr.QKey
	}
	if mask&ibv.AttrAV != 0 {
		q.av = attr.AV
	}
	if mask&ibv.AttrDestQPN != 0 {
		q.dest = attr.DestQPN
	}
	if mask&ibv.AttrPathMigState != 0 {
		if attr.PathMigState == ibv.Migrated && cur.PathMigState == ibv.Armed {
			q.av = cur.AltAV
		}
		if attr.PathMigState == ibv.Rearm {
			q.dev.wg.Add(1)
			go func() { defer q.dev.wg.Done(); provider.SetArmed(q.qp, true, "loop") }()
		}
	}
	if mask&ibv.AttrState != 0 {
		switch attr.State {
		case ibv.StateError:
			q.flushLocked()
		case ibv.StateReset:
			q.recvs, q.rnr, q.sqd = nil, nil, nil
		case ibv.StateSQD:
			if cur.State == ibv.StateRTS {
				// Nothing is ever outstanding here: drained at once. (The consumer's Modify has
				// not returned yet, so it cannot act on the event before the state is SQD.)
				provider.PostEvent(q.qp.Context(), ibv.AsyncEvent{Type: ibv.EventSQDrained, QPNum: q.qp.Num()})
			}
		case ibv.StateRTS:
			if cur.State == ibv.StateSQD && len(q.sqd) > 0 {
				queued := q.sqd
				q.sqd = nil
				q.dev.wg.Add(1)
				go func() {
					defer q.dev.wg.Done()
					for q.qp.State() == ibv.StateSQD {
						runtime.Gosched()
					}
					for i := range queued {
						_ = q.PostSend(&queued[i])
					}
				}()
			}
		}
	}
	return nil
}

func (q *loopQP) flushLocked() {
	for _, r := range q.recvs {
		provider.Push(q.qp.RecvCQ(), ibv.WC{WRID: r.ID, Status: ibv.WCWRFlushErr, Opcode: ibv.WCRecv, QPNum: q.qp.Num()})
	}
	q.recvs = nil
	for _, p := range q.rnr {
		p.from.fail(&p.wr, ibv.WCWRFlushErr)
	}
	q.rnr = nil
	if w := q.waitingAt; w != nil {
		q.waitingAt = nil
		keep := w.rnr[:0]
		for _, p := range w.rnr {
			if p.from == q {
				q.fail(&p.wr, ibv.WCWRFlushErr)
			} else {
				keep = append(keep, p)
			}
		}
		w.rnr = keep
	}
}

// fail completes wr with an error status and moves the QP to ERROR (posting QP_FATAL) first.
func (q *loopQP) fail(wr *ibv.SendWR, st ibv.WCStatus) {
	if q.qp.State() != ibv.StateError && st != ibv.WCWRFlushErr {
		provider.SetState(q.qp, ibv.StateError, ibv.AsyncEvent{Type: ibv.EventQPFatal, Detail: st.String()})
		q.flushLocked()
	}
	provider.Push(q.qp.SendCQ(), ibv.WC{WRID: wr.ID, Status: st, Opcode: provider.WCOpcodeOf(wr.Opcode), QPNum: q.qp.Num()})
}

func (q *loopQP) complete(wr *ibv.SendWR) {
	if wr.Flags&ibv.SendSignaled != 0 || q.qp.SigAll() {
		provider.Push(q.qp.SendCQ(), ibv.WC{WRID: wr.ID, Status: ibv.WCSuccess, Opcode: provider.WCOpcodeOf(wr.Opcode), QPNum: q.qp.Num()})
	}
}

func gather(bufs [][]byte) []byte {
	if len(bufs) == 1 {
		return append([]byte(nil), bufs[0]...)
	}
	var b []byte
	for _, x := range bufs {
		b = append(b, x...)
	}
	return b
}

func scatter(bufs [][]byte, src []byte) {
	for _, b := range bufs {
		n := copy(b, src)
		src = src[n:]
	}
}

func needOf(op ibv.Opcode) ibv.Access {
	switch {
	case op == ibv.OpRDMARead:
		return ibv.AccessRemoteRead
	case op.IsAtomic():
		return ibv.AccessRemoteAtomic
	}
	return ibv.AccessRemoteWrite
}

func (q *loopQP) PostSend(wr *ibv.SendWR) error {
	if q.qp.Type() == ibv.UD && wr.LocalLen() > loopMTU {
		return fmt.Errorf("%w: datagram of %d bytes > MTU %d", ibv.ErrInvalidArgument, wr.LocalLen(), loopMTU)
	}
	loop.mu.Lock()
	defer loop.mu.Unlock()
	if q.qp.State() == ibv.StateError {
		q.fail(wr, ibv.WCWRFlushErr)
		return nil
	}
	if q.qp.State() == ibv.StateSQD {
		w := *wr
		w.SGL = append([]ibv.SGE(nil), wr.SGL...)
		q.sqd = append(q.sqd, w)
		return nil
	}
	c := q.qp.Context()
	write := wr.Opcode == ibv.OpRDMARead || wr.Opcode.AtomicSize() != 0
	bufs, st := provider.LocalBuffers(c, q.qp.PD(), wr, write, nil)
	if st != ibv.WCSuccess {
		q.fail(wr, st)
		return nil
	}
	if q.qp.Type() == ibv.UD {
		q.sendUD(wr, gather(bufs))
		return nil
	}
	d := loop.devs[q.av.Addr]
	var peer *loopQP
	if d != nil {
		if p := provider.LookupQP(d.ctx, q.dest); p != nil {
			peer = provider.QPDriver(p).(*loopQP)
		}
	}
	if peer == nil || peer.qp.State() < ibv.StateRTR || peer.qp.State() == ibv.StateError {
		q.fail(wr, ibv.WCRetryExcErr)
		return nil
	}
	switch wr.Opcode {
	case ibv.OpSend, ibv.OpSendImm:
		data := gather(bufs)
		if len(peer.recvs) == 0 || len(peer.rnr) > 0 {
			peer.rnr = append(peer.rnr, pendingSend{from: q, wr: *wr, data: data})
			q.waitingAt = peer
			return nil
		}
		peer.deliver(q, wr, data)
		return nil
	}
	need := needOf(wr.Opcode)
	if peer.access&need != need {
		q.fail(wr, ibv.WCRemAccessErr)
		return nil
	}
	n := wr.LocalLen()
	if sz := wr.Opcode.AtomicSize(); sz != 0 {
		n = uint64(sz)
	}
	rem, st := provider.RemoteSlice(d.ctx, peer.qp.PD(), wr.RKey, wr.RemoteAddr, n, need)
	if st != ibv.WCSuccess {
		q.fail(wr, st)
		return nil
	}
	var err error
	res := make([]byte, 8)
	switch wr.Opcode {
	case ibv.OpRDMAWrite, ibv.OpRDMAWriteImm:
		if wr.Opcode == ibv.OpRDMAWriteImm {
			if len(peer.recvs) == 0 {
				q.fail(wr, ibv.WCRNRRetryExcErr)
				return nil
			}
			r := peer.recvs[0]
			peer.recvs = peer.recvs[1:]
			copy(rem, gather(bufs))
			provider.Push(peer.qp.RecvCQ(), ibv.WC{WRID: r.ID, Opcode: ibv.WCRecvRDMAImm, QPNum: peer.qp.Num(), Imm: wr.Imm, HasImm: true, ByteLen: uint32(n)})
			break
		}
		copy(rem, gather(bufs))
	case ibv.OpRDMARead:
		scatter(bufs, rem)
	case ibv.OpAtomicFetchAdd:
		var v uint64
		v, err = accum.FetchAdd64(rem, wr.CompareAdd)
		putLE(res, v)
	case ibv.OpAtomicCmpSwap:
		var v uint64
		v, err = accum.CmpSwap64(rem, wr.CompareAdd, wr.Swap)
		putLE(res, v)
	case ibv.OpAtomicSwap64:
		var v uint64
		v, err = accum.Swap64(rem, wr.CompareAdd)
		putLE(res, v)
	case ibv.OpAtomicFetchAdd32:
		var v uint32
		v, err = accum.FetchAdd32(rem, uint32(wr.CompareAdd))
		putLE(res, uint64(v))
	case ibv.OpAtomicSwap32:
		var v uint32
		v, err = accum.Swap32(rem, uint32(wr.CompareAdd))
		putLE(res, uint64(v))
	case ibv.OpAtomicCmpSwap32:
		var v uint32
		v, err = accum.CmpSwap32(rem, uint32(wr.CompareAdd), uint32(wr.Swap))
		putLE(res, uint64(v))
	case ibv.OpAccumulate:
		err = accum.Apply(accum.Type(wr.AccType), rem, gather(bufs), wr.Scale)
	}
	if err != nil {
		q.fail(wr, ibv.WCRemInvReqErr)
		return nil
	}
	if sz := wr.Opcode.AtomicSize(); sz != 0 {
		scatter(bufs, res[:sz])
	}
	q.complete(wr)
	return nil
}

func putLE(b []byte, v uint64) {
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
}

// deliver places a send into q's first receive (loop.mu held).
func (q *loopQP) deliver(from *loopQP, wr *ibv.SendWR, data []byte) {
	r := q.recvs[0]
	q.recvs = q.recvs[1:]
	wc := ibv.WC{WRID: r.ID, Opcode: ibv.WCRecv, QPNum: q.qp.Num(), ByteLen: uint32(len(data)), Imm: wr.Imm, HasImm: wr.Opcode == ibv.OpSendImm}
	bufs, st := provider.LocalSlices(q.qp.Context(), q.qp.PD(), r.SGL, true, nil)
	if st != ibv.WCSuccess {
		wc.Status = st
		provider.Push(q.qp.RecvCQ(), wc)
		from.fail(wr, ibv.WCRemOpErr)
		return
	}
	if uint64(len(data)) > ibv.SGLLen(r.SGL) {
		wc.Status = ibv.WCLocLenErr
		provider.Push(q.qp.RecvCQ(), wc)
		from.fail(wr, ibv.WCRemInvReqErr)
		return
	}
	scatter(bufs, data)
	provider.Push(q.qp.RecvCQ(), wc)
	from.complete(wr)
}

func (q *loopQP) sendUD(wr *ibv.SendWR, data []byte) {
	defer q.complete(wr) // UD: the sender never learns the fate of a datagram
	d := loop.devs[wr.AH.Attr.Addr]
	if d == nil {
		return
	}
	p := provider.LookupQP(d.ctx, wr.RemoteQPN)
	if p == nil || p.Type() != ibv.UD || p.State() < ibv.StateRTR || p.State() == ibv.StateError {
		return
	}
	peer := provider.QPDriver(p).(*loopQP)
	if peer.qkey != wr.QKey || len(peer.recvs) == 0 {
		return
	}
	r := peer.recvs[0]
	peer.recvs = peer.recvs[1:]
	wc := ibv.WC{WRID: r.ID, Opcode: ibv.WCRecv, QPNum: p.Num(), ByteLen: uint32(len(data)), SrcQP: q.qp.Num(),
		SrcAddr: q.dev.addr, Imm: wr.Imm, HasImm: wr.Opcode == ibv.OpSendImm}
	bufs, st := provider.LocalSlices(p.Context(), p.PD(), r.SGL, true, nil)
	switch {
	case st != ibv.WCSuccess:
		wc.Status = st
	case uint64(len(data)) > ibv.SGLLen(r.SGL):
		wc.Status = ibv.WCLocLenErr
	default:
		scatter(bufs, data)
	}
	provider.Push(p.RecvCQ(), wc)
}

func (q *loopQP) PostRecv(wr *ibv.RecvWR) error {
	loop.mu.Lock()
	defer loop.mu.Unlock()
	if q.qp.State() == ibv.StateError {
		provider.Push(q.qp.RecvCQ(), ibv.WC{WRID: wr.ID, Status: ibv.WCWRFlushErr, Opcode: ibv.WCRecv, QPNum: q.qp.Num()})
		return nil
	}
	w := *wr
	w.SGL = append([]ibv.SGE(nil), wr.SGL...)
	q.recvs = append(q.recvs, w)
	for len(q.rnr) > 0 && len(q.recvs) > 0 {
		p := q.rnr[0]
		q.rnr = q.rnr[1:]
		q.deliver(p.from, &p.wr, p.data)
	}
	return nil
}

func (q *loopQP) Destroy() error {
	loop.mu.Lock()
	defer loop.mu.Unlock()
	q.recvs, q.rnr = nil, nil
	return nil
}

var loopProvider = ibvtest.Funcs{
	OpenFunc:     openLoop,
	Capabilities: ibvtest.Caps{RC: true, UD: true, SendRecv: true, Atomics: true, Accumulate: true, APM: true},
}

func TestConformanceLoopback(t *testing.T) {
	ibvtest.Run(t, loopProvider)
}
