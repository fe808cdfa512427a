//go:build linux

package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/goarmci/goarmci/internal/accum"
	"github.com/goarmci/goarmci/internal/memcopy"
	"github.com/goarmci/goarmci/internal/xunix"
)

// qpDrv is the shm side of an RC queue pair. Every send work request is executed inside
// PostSend, by the posting goroutine, directly on the target's memory (mapped shared buffer,
// or cross-memory attach for other memory), and completes on the send CQ before PostSend
// returns; requests of one QP are therefore applied in program order.
type qpDrv struct {
	dev  *device
	ib   *ibv.QP
	num  uint32
	slot *qpSlot

	destroying atomic.Bool
	mu         sync.Mutex   // the send queue: program order, caches and scratch below
	sync       bool         // PostSendSync in progress: report the status, push nothing
	syncSt     ibv.WCStatus // its status
	destroyed  bool
	// state is the QP's state as this driver last set it (q.mu held). ibv.QP stores its own
	// copy only after Modify returns, so a post or the progress goroutine reading that one in
	// between would still see the old state (a request queued in SQD after the drain that
	// should start it, or a drain that finds the QP not yet in RTS and leaves the queue).
	state ibv.QPState

	// own descriptor fields (published in slot)
	access ibv.Access

	// connection, set at RTR
	peer    *peer
	destQPN uint32
	wait    time.Duration // how long a request waits for the responder QP (ACK timeout × retries)

	// responder QP check, cached: valid while tslot.seq == tseq
	tslot   *qpSlot
	tseq    uint64
	taccess ibv.Access

	rcache [4]remoteMR // recently used remote regions
	rnext  int

	bufs   [][]byte // scratch: local buffers of the current request
	gather []byte   // scratch: gathered accumulate source
	sqd    []ibv.SendWR
	recvs  []ibv.RecvWR
}

// remoteMR is a cached, checked remote region: valid while slot.seq == seq.
type remoteMR struct {
	slot   *mrSlot
	seq    uint64
	rkey   uint32
	access ibv.Access
	vaddr  uint64
	length uint64
	mem    []byte // the region through this process's mapping; nil: cross-memory attach
	pid    int
	peer   *peer   // owner of bm
	bm     *bufMap // the mapping mem lies in (a reference), or nil
}

// drop gives back the entry's mapping reference and empties it.
func (r *remoteMR) drop() {
	if r.bm != nil {
		r.peer.release(r.bm)
	}
	*r = remoteMR{}
}

// CreateQP implements ibv.Driver: RC only (UD is not provided by shm).
func (d *device) CreateQP(qp *ibv.QP) (ibv.QPDriver, error) {
	if qp.Type() != ibv.RC {
		return nil, fmt.Errorf("shm: %v queue pairs: %w", qp.Type(), ibv.ErrUnsupported)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ibv.ErrClosed
	}
	n := len(d.seg.qps)
	h := qpHome(qp.Num(), n)
	for i := 0; i < probeWindow; i++ {
		s := &d.seg.qps[(h+i)%n]
		if s.free() {
			q := &qpDrv{dev: d, ib: qp, num: qp.Num(), slot: s}
			s.publish(qpDesc{valid: true, qpn: q.num})
			return q, nil
		}
	}
	return nil, fmt.Errorf("shm: QP table full (%d slots; raise Config.MaxQP): %w", n, ibv.ErrBusy)
}

// publishLocked writes the QP's descriptor (q.mu held); accept tells requesters that incoming
// requests are executed (RTR, RTS, SQD).
func (q *qpDrv) publishLocked(accept bool) {
	desc := qpDesc{valid: true, accept: accept, qpn: q.num, access: q.access, peerQPN: q.destQPN}
	if q.peer != nil {
		desc.peerID = q.peer.id
	}
	q.dev.mu.Lock()
	if !q.dev.closed {
		q.slot.publish(desc)
	}
	q.dev.mu.Unlock()
}

// ackWait is how long a requester waits for an absent responder QP before RETRY_EXC_ERR: the
// local ACK timeout (4.096 µs × 2^timeout) times (retry count + 1); 0 means forever.
func ackWait(timeout, retry uint8) time.Duration {
	if timeout == 0 {
		return 0
	}
	return time.Duration(4096<<min(timeout, 31)) * time.Duration(int(retry)+1)
}

// Modify implements ibv.QPDriver.
func (q *qpDrv) Modify(cur *ibv.QPAttr, attr *ibv.QPAttr, mask ibv.AttrMask) error {
	to := cur.State
	if mask&ibv.AttrState != 0 {
		to = attr.State
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.destroyed {
		return ibv.ErrClosed
	}
	if mask&ibv.AttrAV != 0 && to != ibv.StateReset && to != ibv.StateError {
		p, err := q.dev.peerFor(attr.AV.Addr)
		if err != nil {
			return fmt.Errorf("shm: QP %d path to %s: %w", q.num, attr.AV.Addr, err)
		}
		q.peer = p
		q.resetCachesLocked()
	}
	if mask&ibv.AttrPathMigState != 0 && attr.PathMigState == ibv.Migrated && cur.PathMigState == ibv.Armed {
		// manual migration: the alternate path becomes the primary one
		p, err := q.dev.peerFor(cur.AltAV.Addr)
		if err != nil {
			return fmt.Errorf("shm: QP %d migration to %s: %w", q.num, cur.AltAV.Addr, err)
		}
		q.peer = p
		q.resetCachesLocked()
	}
	if mask&ibv.AttrDestQPN != 0 {
		q.destQPN = attr.DestQPN
		q.resetCachesLocked()
	}
	if mask&ibv.AttrAccessFlags != 0 {
		q.access = attr.AccessFlags
	}
	timeout, retry := cur.Timeout, cur.RetryCnt
	if mask&ibv.AttrTimeout != 0 {
		timeout = attr.Timeout
	}
	if mask&ibv.AttrRetryCnt != 0 {
		retry = attr.RetryCnt
	}
	q.wait = ackWait(timeout, retry)

	q.state = to
	switch to {
	case ibv.StateReset:
		q.peer, q.destQPN, q.access = nil, 0, 0
		q.resetCachesLocked()
		q.sqd, q.recvs = q.sqd[:0], q.recvs[:0]
		q.publishLocked(false)
	case ibv.StateInit:
		q.publishLocked(false)
	case ibv.StateRTR, ibv.StateRTS:
		q.publishLocked(true)
		if cur.State == ibv.StateSQD && len(q.sqd) > 0 {
			q.dev.prog.post(q.drainSQD)
		}
	case ibv.StateSQD:
		q.publishLocked(true)
		if cur.State != ibv.StateSQD {
			// nothing is ever outstanding: the send queue is drained at once
			q.dev.prog.post(func() {
				if q.ib.Query().State == ibv.StateSQD {
					provider.PostEvent(q.ib.Context(), ibv.AsyncEvent{Type: ibv.EventSQDrained, QPNum: q.num})
				}
			})
		}
	case ibv.StateError:
		q.flushLocked()
		q.publishLocked(false)
	}
	if mask&ibv.AttrPathMigState != 0 && attr.PathMigState == ibv.Rearm {
		alt := cur.AltAV.Addr
		if mask&ibv.AttrAltPath != 0 {
			alt = attr.AltAV.Addr
		}
		// Loading the alternate path = checking that its endpoint is reachable; done after
		// Modify returns (SetArmed takes the QP's lock).
		q.dev.prog.post(func() {
			_, err := q.dev.peerFor(alt)
			detail := "shm: alternate path " + alt + " loaded"
			if err != nil {
				detail = err.Error()
			}
			provider.SetArmed(q.ib, err == nil, detail)
		})
	}
	return nil
}

func (q *qpDrv) resetCachesLocked() {
	q.tslot, q.tseq, q.taccess = nil, 0, 0
	for i := range q.rcache {
		q.rcache[i].drop()
	}
}

// flushLocked completes every queued request with WR_FLUSH_ERR (QP in ERROR).
func (q *qpDrv) flushLocked() {
	for i := range q.sqd {
		provider.Push(q.ib.SendCQ(), ibv.WC{WRID: q.sqd[i].ID, Status: ibv.WCWRFlushErr,
			Opcode: provider.WCOpcodeOf(q.sqd[i].Opcode), QPNum: q.num})

	}
	for i := range q.recvs {
		provider.Push(q.ib.RecvCQ(), ibv.WC{WRID: q.recvs[i].ID, Status: ibv.WCWRFlushErr, Opcode: ibv.WCRecv, QPNum: q.num})
	}
	clear(q.sqd)
	clear(q.recvs)
	q.sqd, q.recvs = q.sqd[:0], q.recvs[:0]
}

// failLocked completes wr with an error status and moves the QP to ERROR (QP_FATAL), as an
// error completion does on an RC QP.
func (q *qpDrv) failLocked(wr *ibv.SendWR, st ibv.WCStatus, vendor uint32, detail string) {
	if q.sync {
		q.syncSt = st
	} else {
		provider.Push(q.ib.SendCQ(), ibv.WC{WRID: wr.ID, Status: st, Opcode: provider.WCOpcodeOf(wr.Opcode), QPNum: q.num, VendorErr: vendor})
	}
	q.state = ibv.StateError
	provider.SetState(q.ib, ibv.StateError, ibv.AsyncEvent{Type: ibv.EventQPFatal,
		Detail: fmt.Sprintf("%v: %v %s", st, wr.Opcode, detail)})

	q.flushLocked()
	q.publishLocked(false)
}

// Vendor error codes in WC.VendorErr of failed completions.
const (
	VendorLocal       = 1 // local key, bounds or access
	VendorResponder   = 2 // responder QP absent, not connected to this QP, or its endpoint closed
	VendorQPAccess    = 3 // the responder QP's access flags forbid the operation
	VendorRKey        = 4 // no live region with this rkey
	VendorMRAccess    = 5 // the region's access flags forbid the operation
	VendorBounds      = 6 // the range is outside the region
	VendorCMA         = 7 // cross-memory attach failed
	VendorCMAAtomic   = 8 // atomics and accumulate need the target region in an AllocBuffer buffer
	VendorKernelError = 9 // the atomic/accumulate kernel refused the operands
)

func unsupportedOp(op ibv.Opcode) bool {
	return op == ibv.OpSend || op == ibv.OpSendImm || op == ibv.OpRDMAWriteImm
}

// PostSend implements ibv.QPDriver: the request is executed and completed before it returns.
// Two-sided operations (Send, Send with immediate, RDMA write with immediate) are not provided
// by shm and return an error wrapping ibv.ErrUnsupported.
func (q *qpDrv) PostSend(wr *ibv.SendWR) error {
	if unsupportedOp(wr.Opcode) {
		return fmt.Errorf("shm: %v: %w", wr.Opcode, ibv.ErrUnsupported)
	}
	q.mu.Lock()
	if q.destroyed {
		q.mu.Unlock()
		return ibv.ErrClosed
	}
	var err error
	switch q.state {
	case ibv.StateError:
		provider.Push(q.ib.SendCQ(), ibv.WC{WRID: wr.ID, Status: ibv.WCWRFlushErr, Opcode: provider.WCOpcodeOf(wr.Opcode), QPNum: q.num})
	case ibv.StateSQD:
		if len(q.sqd) >= q.ib.Cap().MaxSendWR {
			err = fmt.Errorf("shm: %d requests queued in SQD: %w", len(q.sqd), ibv.ErrQueueFull)
			break
		}
		c := *wr
		c.SGL = append([]ibv.SGE(nil), wr.SGL...)
		q.sqd = append(q.sqd, c)
	default:
		if len(q.sqd) > 0 {
			q.drainLocked()
		}
		q.execLocked(wr)
	}
	q.mu.Unlock()
	return err
}

// drainSQD starts the requests posted while the QP was in SQD (progress goroutine).
func (q *qpDrv) drainSQD() {
	q.mu.Lock()
	if !q.destroyed && q.state == ibv.StateRTS {
		q.drainLocked()
	}
	q.mu.Unlock()
}

func (q *qpDrv) drainLocked() {
	for i := 0; i < len(q.sqd); i++ {
		if q.state == ibv.StateError {
			break // failLocked flushed the rest
		}
		q.execLocked(&q.sqd[i])
	}
	clear(q.sqd)
	q.sqd = q.sqd[:0]
}

// execLocked executes one request on the target memory and completes it.
func (q *qpDrv) execLocked(wr *ibv.SendWR) {
	op := wr.Opcode
	localWrite := op != ibv.OpRDMAWrite && op != ibv.OpAccumulate
	bufs, st := provider.LocalBuffers(q.ib.Context(), q.ib.PD(), wr, localWrite, q.bufs[:0])
	q.bufs = bufs
	if st != ibv.WCSuccess {
		q.failLocked(wr, st, VendorLocal, "local buffer")
		return
	}
	var n uint64
	for _, b := range bufs {
		n += uint64(len(b))
	}
	need := ibv.AccessRemoteAtomic
	switch op {
	case ibv.OpRDMAWrite:
		need = ibv.AccessRemoteWrite
	case ibv.OpRDMARead:
		need = ibv.AccessRemoteRead
	}
	if n > 0 || op.AtomicSize() > 0 {
		r, st, vendor := q.remoteLocked(wr.RKey, wr.RemoteAddr, n, need)
		if st != ibv.WCSuccess {
			q.failLocked(wr, st, vendor, fmt.Sprintf("rkey %#x [%#x,+%d)", wr.RKey, wr.RemoteAddr, n))
			return
		}
		if r.mem != nil {
			off := wr.RemoteAddr - r.vaddr
			if st, vendor := q.applyLocked(wr, bufs, r.mem[off:off+n:off+n], &r.slot.acc); st != ibv.WCSuccess {
				q.failLocked(wr, st, vendor, "at the responder")
				return
			}
		} else if st, vendor := q.applyCMALocked(wr, bufs, r.pid); st != ibv.WCSuccess {
			q.failLocked(wr, st, vendor, "by cross-memory attach")
			return
		}
	}
	if !q.sync && (q.ib.SigAll() || wr.Flags&ibv.SendSignaled != 0) {
		provider.Push(q.ib.SendCQ(), ibv.WC{WRID: wr.ID, Status: ibv.WCSuccess, Opcode: provider.WCOpcodeOf(op),
			ByteLen: uint32(n), QPNum: q.num})

	}
}

// PostSendSync implements ibv.SyncPoster: wr is executed now and its status returned; nothing is
// queued on the CQ for it. A QP in SQD (requests queued) refuses with ibv.ErrInvalidState so the
// caller takes the asynchronous path and program order holds.
func (q *qpDrv) PostSendSync(wr *ibv.SendWR) (ibv.WCStatus, error) {
	if unsupportedOp(wr.Opcode) {
		return ibv.WCGeneralErr, fmt.Errorf("shm: %v: %w", wr.Opcode, ibv.ErrUnsupported)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.destroyed {
		return ibv.WCGeneralErr, ibv.ErrClosed
	}
	switch q.state {
	case ibv.StateError:
		return ibv.WCWRFlushErr, nil
	case ibv.StateRTS:
	default:
		return ibv.WCGeneralErr, fmt.Errorf("shm: PostSendSync in %v: %w", q.state, ibv.ErrInvalidState)
	}
	if len(q.sqd) > 0 {
		q.drainLocked()
	}
	q.sync, q.syncSt = true, ibv.WCSuccess
	q.execLocked(wr)
	q.sync = false
	return q.syncSt, nil
}

// applyLocked performs the operation on t, the target bytes through this process's mapping.
// acc is the target region's accumulate lock (in the target's published MR slot).
func (q *qpDrv) applyLocked(wr *ibv.SendWR, bufs [][]byte, t []byte, acc *accum.Lock) (ibv.WCStatus, uint32) {
	switch wr.Opcode {
	case ibv.OpRDMAWrite:
		o := 0
		for _, b := range bufs {
			o += memcopy.Copy(t[o:], b)
		}
		return ibv.WCSuccess, 0
	case ibv.OpRDMARead:
		o := 0
		for _, b := range bufs {
			o += memcopy.Copy(b, t[o:])
		}
		return ibv.WCSuccess, 0
	case ibv.OpAccumulate:
		var src []byte
		if len(bufs) == 1 {
			src = bufs[0]
		} else {
			q.gather = q.gather[:0]
			for _, b := range bufs {
				q.gather = append(q.gather, b...)
			}
			src = q.gather
		}
		if err := accum.ApplyLocked(acc, accum.Type(wr.AccType), t, src, wr.Scale); err != nil {
			return ibv.WCRemOpErr, VendorKernelError
		}
		return ibv.WCSuccess, 0
	}
	res, err := ibv.ApplyAtomic(wr.Opcode, t, wr.CompareAdd, wr.Swap)
	if errors.Is(err, ibv.ErrInvalidArgument) {
		return ibv.WCRemInvReqErr, 0
	}
	if err != nil {
		return ibv.WCRemOpErr, VendorKernelError
	}
	var tmp [8]byte
	binary.LittleEndian.PutUint64(tmp[:], res)
	o := 0
	for _, b := range bufs {
		o += copy(b, tmp[o:len(t)])
	}
	return ibv.WCSuccess, 0
}

// applyCMALocked performs an RDMA write or read on memory of another process that is not in a
// shared buffer, with process_vm_writev/readv (one copy, one system call per local buffer).
func (q *qpDrv) applyCMALocked(wr *ibv.SendWR, bufs [][]byte, pid int) (ibv.WCStatus, uint32) {
	addr := wr.RemoteAddr
	for _, b := range bufs {
		var err error
		switch wr.Opcode {
		case ibv.OpRDMAWrite:
			err = xunix.WriteRemote(pid, addr, b)
		case ibv.OpRDMARead:
			err = xunix.ReadRemote(pid, addr, b)
		default:
			return ibv.WCRemInvReqErr, VendorCMAAtomic
		}
		if err != nil {
			q.dev.log.Debug().Err(err).Msg("cross-memory attach")
			return ibv.WCRemOpErr, VendorCMA
		}
		addr += uint64(len(b))
	}
	return ibv.WCSuccess, 0
}

// remoteLocked checks a remote access the way a responder would (responder QP, then rkey,
// access flags and bounds) and returns the checked region. The common case costs two loads of
// shared memory: the cached responder QP's and region's seq.
func (q *qpDrv) remoteLocked(rkey uint32, addr, n uint64, need ibv.Access) (*remoteMR, ibv.WCStatus, uint32) {
	if q.tslot == nil || q.tslot.seq.Load() != q.tseq {
		if st := q.checkResponderLocked(); st != ibv.WCSuccess {
			return nil, st, VendorResponder
		}
	}
	if q.taccess&need != need {
		return nil, ibv.WCRemAccessErr, VendorQPAccess
	}
	var r *remoteMR
	for i := range q.rcache {
		c := &q.rcache[i]
		if c.slot != nil && c.rkey == rkey && c.slot.seq.Load() == c.seq {
			r = c
			break
		}
	}
	if r == nil {
		var st ibv.WCStatus
		if r, st = q.lookupMRLocked(rkey); st != ibv.WCSuccess {
			return nil, st, VendorRKey
		}
	}
	if r.access&need != need {
		return nil, ibv.WCRemAccessErr, VendorMRAccess
	}
	if addr < r.vaddr || n > r.length || addr-r.vaddr > r.length-n {
		return nil, ibv.WCRemAccessErr, VendorBounds
	}
	return r, ibv.WCSuccess, 0
}

// checkResponderLocked finds the responder QP and checks that it executes requests from this
// QP. A responder that is absent or not yet in RTR is waited for, as a requester retries,
// for the ACK timeout × (retry count + 1); then RETRY_EXC_ERR.
func (q *qpDrv) checkResponderLocked() ibv.WCStatus {
	p := q.peer
	if p == nil {
		return ibv.WCRetryExcErr
	}
	var deadline time.Time
	for i := 0; ; i++ {
		if !p.alive() {
			return ibv.WCRetryExcErr
		}
		s, d, seq, ok := p.seg.findQP(q.destQPN)
		if ok && d.accept && d.peerID == q.dev.id && d.peerQPN == q.num {
			q.tslot, q.tseq, q.taccess = s, seq, d.access
			return ibv.WCSuccess
		}
		if q.destroying.Load() || provider.Closed(q.ib.Context()) {
			return ibv.WCRetryExcErr
		}
		if q.wait > 0 {
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(q.wait)
			} else if now.After(deadline) {
				return ibv.WCRetryExcErr
			}
		}
		if i < 100 {
			runtime.Gosched()
		} else {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// lookupMRLocked finds rkey in the responder's MR table and resolves its memory.
func (q *qpDrv) lookupMRLocked(rkey uint32) (*remoteMR, ibv.WCStatus) {
	p := q.peer
	for i := range q.rcache { // stale entries give their mappings back (see peer.buffer)
		if c := &q.rcache[i]; c.slot != nil && c.slot.seq.Load() != c.seq {
			c.drop()
		}
	}
	s, d, seq, ok := p.seg.findMR(rkey)
	if !ok {
		return nil, ibv.WCRemAccessErr
	}
	r := remoteMR{slot: s, seq: seq, rkey: rkey, access: d.access, vaddr: d.vaddr, length: d.length, pid: p.pid}
	if d.bufID != 0 {
		m, err := p.buffer(&d)
		if err == nil && d.bufOff <= uint64(len(m.mem)) && d.length <= uint64(len(m.mem))-d.bufOff {
			r.mem = m.mem[d.bufOff : d.bufOff+d.length : d.bufOff+d.length]
			r.peer, r.bm = p, m
		} else if err == nil {
			p.release(m)
		} else {
			q.dev.log.Debug().Err(err).Msg("mapping peer buffer; falling back to cross-memory attach")
		}
	}
	if r.mem == nil && p.pid == q.dev.pid {
		// same process: reach the region through its owner's MR table
		if v, ok := devices.Load(p.id); ok {
			if mr := provider.LookupRKey(v.(*device).ctx, rkey); mr != nil && mr.Addr == d.vaddr && mr.Length == d.length {
				r.mem = mr.Buf()
			}
		}
		if r.mem == nil {
			return nil, ibv.WCRemAccessErr
		}
	}
	c := &q.rcache[q.rnext]
	for i := range q.rcache { // prefer an empty entry
		if q.rcache[i].slot == nil {
			c = &q.rcache[i]
			break
		}
	}
	q.rnext = (q.rnext + 1) % len(q.rcache)
	c.drop()
	*c = r
	return c, ibv.WCSuccess
}

// PostRecv implements ibv.QPDriver. shm provides no two-sided operations, so receives are only
// held (and flushed with WR_FLUSH_ERR when the QP enters ERROR).
func (q *qpDrv) PostRecv(wr *ibv.RecvWR) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.destroyed {
		return ibv.ErrClosed
	}
	if q.state == ibv.StateError {
		provider.Push(q.ib.RecvCQ(), ibv.WC{WRID: wr.ID, Status: ibv.WCWRFlushErr, Opcode: ibv.WCRecv, QPNum: q.num})
		return nil
	}
	if len(q.recvs) >= q.ib.Cap().MaxRecvWR {
		return fmt.Errorf("shm: %d receives posted: %w", len(q.recvs), ibv.ErrQueueFull)
	}
	q.recvs = append(q.recvs, ibv.RecvWR{ID: wr.ID, SGL: append([]ibv.SGE(nil), wr.SGL...)})
	return nil
}

// Destroy implements ibv.QPDriver: the descriptor is withdrawn (requesters connected to this QP
// fail with RETRY_EXC_ERR), queued requests are dropped.
func (q *qpDrv) Destroy() error {
	q.destroying.Store(true)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.destroyed {
		return nil
	}
	q.destroyed = true
	q.sqd, q.recvs, q.peer = nil, nil, nil
	q.resetCachesLocked()
	q.dev.mu.Lock()
	if !q.dev.closed {
		q.slot.publish(qpDesc{})
	}
	q.dev.mu.Unlock()
	return nil
}

var _ ibv.Driver = (*device)(nil)
var _ ibv.QPDriver = (*qpDrv)(nil)
var _ ibv.SyncPoster = (*qpDrv)(nil)
var _ ibv.DirectMapper = (*qpDrv)(nil)
