package ibv

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// QP is a queue pair (struct ibv_qp).
type QP struct {
	ctx    *Context
	pd     *PD
	num    uint32
	typ    QPType
	sendCQ *CQ
	recvCQ *CQ
	srq    *SRQ
	sigAll bool
	cap    QPCap

	mu    sync.Mutex // serializes Modify and attribute reads
	attr  QPAttr
	state atomic.Uint32 // QPState, readable on the data path
	drv   QPDriver
	dead  atomic.Bool
}

// Default queue sizes when QPInitAttr.Cap leaves them zero.
const (
	DefaultMaxSendWR = 1024
	DefaultMaxRecvWR = 1024
	DefaultMaxSGE    = 16
	DefaultMaxInline = 256
	MaxSGEPerWR      = 64
	maxQueueEntries  = 1 << 20
)

// CreateQP creates a queue pair in RESET (ibv_create_qp).
func (pd *PD) CreateQP(init QPInitAttr) (*QP, error) {
	c := pd.ctx
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if init.Type != RC && init.Type != UD && init.Type != DC {
		return nil, fmt.Errorf("%w: QP type %v", ErrInvalidArgument, init.Type)
	}
	if init.SendCQ == nil || init.RecvCQ == nil {
		return nil, fmt.Errorf("%w: QP needs a send and a receive CQ", ErrInvalidArgument)
	}
	cp := init.Cap
	if cp.MaxSendWR == 0 {
		cp.MaxSendWR = DefaultMaxSendWR
	}
	if cp.MaxRecvWR == 0 {
		cp.MaxRecvWR = DefaultMaxRecvWR
	}
	if cp.MaxSendSGE == 0 {
		cp.MaxSendSGE = DefaultMaxSGE
	}
	if cp.MaxRecvSGE == 0 {
		cp.MaxRecvSGE = DefaultMaxSGE
	}
	if cp.MaxInlineData == 0 {
		cp.MaxInlineData = DefaultMaxInline
	}
	if cp.MaxSendWR < 0 || cp.MaxSendWR > maxQueueEntries || cp.MaxRecvWR < 0 || cp.MaxRecvWR > maxQueueEntries ||
		cp.MaxSendSGE < 0 || cp.MaxSendSGE > MaxSGEPerWR || cp.MaxRecvSGE < 0 || cp.MaxRecvSGE > MaxSGEPerWR {
		return nil, fmt.Errorf("%w: QP capacities %+v", ErrInvalidArgument, cp)
	}
	c.mu.Lock()
	num := c.nextQPN
	c.nextQPN++
	c.mu.Unlock()
	qp := &QP{ctx: c, pd: pd, num: num, typ: init.Type, sendCQ: init.SendCQ, recvCQ: init.RecvCQ,
		srq: init.SRQ, sigAll: init.SigAll, cap: cp}
	qp.attr.Cap = cp
	qp.attr.PathMTU = 4096
	qp.attr.Timeout = 14 // 4.096 µs × 2^14 ≈ 67 ms
	qp.attr.RetryCnt = 7
	qp.attr.RNRRetry = 7
	qp.attr.MaxRdAtomic = 16
	qp.attr.MaxDestRdAtm = 16
	d, err := c.drv.CreateQP(qp)
	if err != nil {
		return nil, fmt.Errorf("ibv: CreateQP: %w", err)
	}
	qp.drv = d
	c.qps.Store(num, qp)
	init.SendCQ.refs.Add(1)
	init.RecvCQ.refs.Add(1)
	pd.refs.Add(1)
	return qp, nil
}

// Num is the QP number.
func (qp *QP) Num() uint32 { return qp.num }

// Type is the transport service.
func (qp *QP) Type() QPType { return qp.typ }

// PD is the QP's protection domain.
func (qp *QP) PD() *PD { return qp.pd }

// Context is the device the QP belongs to.
func (qp *QP) Context() *Context { return qp.ctx }

// SendCQ and RecvCQ are the QP's completion queues; SRQ is its shared receive queue or nil.
func (qp *QP) SendCQ() *CQ { return qp.sendCQ }
func (qp *QP) RecvCQ() *CQ { return qp.recvCQ }
func (qp *QP) SRQ() *SRQ   { return qp.srq }

// SigAll reports whether every send request is signaled.
func (qp *QP) SigAll() bool { return qp.sigAll }

// Cap is the QP's queue capacities.
func (qp *QP) Cap() QPCap { return qp.cap }

// State is the current communication state.
func (qp *QP) State() QPState { return QPState(qp.state.Load()) }

// Query returns a copy of the QP's attributes (ibv_query_qp).
func (qp *QP) Query() QPAttr {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	a := qp.attr
	a.State = qp.State()
	a.CurState = a.State
	return a
}

// Modify changes the QP's state and attributes (ibv_modify_qp). The transition is checked
// against the QP state machine (ValidTransition) and, for AttrPathMigState, against the APM
// request rules (ValidMigRequest); a refused Modify changes nothing and returns an error wrapping
// ErrInvalidTransition (or the provider's error).
func (qp *QP) Modify(attr *QPAttr, mask AttrMask) error {
	if qp.dead.Load() {
		return ErrClosed
	}
	qp.mu.Lock()
	defer qp.mu.Unlock()
	cur := qp.attr
	cur.State = qp.State()
	to := cur.State
	if mask&AttrState != 0 {
		to = attr.State
	}
	if err := ValidTransition(qp.typ, cur.State, to, mask); err != nil {
		return err
	}
	if mask&AttrPathMigState != 0 {
		if qp.typ != RC {
			return fmt.Errorf("%w: path migration is for RC QPs", ErrInvalidTransition)
		}
		hasAlt := mask&AttrAltPath != 0 || cur.AltAV.Addr != ""
		if err := ValidMigRequest(cur.PathMigState, attr.PathMigState, hasAlt); err != nil {
			return err
		}
	}
	if mask&AttrPort != 0 && attr.PortNum == 0 {
		return fmt.Errorf("%w: port numbers are 1-based", ErrInvalidArgument)
	}
	if mask&AttrAV != 0 && attr.AV.Addr == "" && qp.typ == RC {
		return fmt.Errorf("%w: primary path without destination address", ErrInvalidArgument)
	}
	if mask&AttrRetryCnt != 0 && attr.RetryCnt > 7 {
		return fmt.Errorf("%w: retry count %d > 7", ErrInvalidArgument, attr.RetryCnt)
	}
	if err := qp.drv.Modify(&cur, attr, mask); err != nil {
		return err
	}
	a := &qp.attr
	if mask&AttrAccessFlags != 0 {
		a.AccessFlags = attr.AccessFlags
	}
	if mask&AttrPort != 0 {
		a.PortNum = attr.PortNum
	}
	if mask&AttrQKey != 0 {
		a.QKey = attr.QKey
	}
	if mask&AttrAV != 0 {
		a.AV = attr.AV
	}
	if mask&AttrPathMTU != 0 {
		a.PathMTU = attr.PathMTU
	}
	if mask&AttrTimeout != 0 {
		a.Timeout = attr.Timeout
	}
	if mask&AttrRetryCnt != 0 {
		a.RetryCnt = attr.RetryCnt
	}
	if mask&AttrRNRRetry != 0 {
		a.RNRRetry = attr.RNRRetry
	}
	if mask&AttrRQPSN != 0 {
		a.RQPSN = attr.RQPSN
	}
	if mask&AttrSQPSN != 0 {
		a.SQPSN = attr.SQPSN
	}
	if mask&AttrMaxQPRdAtom != 0 {
		a.MaxRdAtomic = attr.MaxRdAtomic
	}
	if mask&AttrMaxDestRdAtm != 0 {
		a.MaxDestRdAtm = attr.MaxDestRdAtm
	}
	if mask&AttrMinRNRTimer != 0 {
		a.MinRNRTimer = attr.MinRNRTimer
	}
	if mask&AttrAltPath != 0 {
		a.AltAV = attr.AltAV
		a.AltPortNum = attr.AltPortNum
		a.AltTimeout = attr.AltTimeout
	}
	if mask&AttrPathMigState != 0 {
		if attr.PathMigState == Migrated && cur.PathMigState == Armed {
			a.AV, a.AltAV = a.AltAV, a.AV // manual migration: the alternate becomes primary
			a.PortNum, a.AltPortNum = a.AltPortNum, a.PortNum
		}
		a.PathMigState = attr.PathMigState
	}
	if mask&AttrDestQPN != 0 {
		a.DestQPN = attr.DestQPN
	}
	if to == StateReset {
		a.PathMigState = Migrated
	}
	qp.state.Store(uint32(to))
	return nil
}

// setState is the provider's own state change (e.g. RTS→ERROR after retries are exhausted,
// SQD drained); it posts ev when ev.Type is non-zero.
func (qp *QP) setState(s QPState, ev AsyncEvent) {
	qp.state.Store(uint32(s))
	if ev.Type != 0 {
		ev.QPNum = qp.num
		qp.ctx.postEvent(ev)
	}
}

// migrateAuto is the provider's automatic path migration (ARMED→MIGRATED on a fault of the
// primary path, [Vishnu07 ch. 9]): the alternate path becomes primary and EventPathMig is posted.
// It returns the new primary path, or false when the QP was not ARMED (then the provider must
// move the QP to ERROR).
func (qp *QP) migrateAuto(detail string) (AHAttr, bool) {
	qp.mu.Lock()
	a := &qp.attr
	if a.PathMigState != Armed {
		qp.mu.Unlock()
		return AHAttr{}, false
	}
	a.AV, a.AltAV = a.AltAV, a.AV
	a.PortNum, a.AltPortNum = a.AltPortNum, a.PortNum
	a.PathMigState = Migrated
	av := a.AV
	qp.mu.Unlock()
	qp.ctx.postEvent(AsyncEvent{Type: EventPathMig, QPNum: qp.num, Detail: detail})
	return av, true
}

// setArmed is the provider's REARM→ARMED (the alternate path is loaded). With ok false the load
// failed: the QP stays in REARM and EventPathMigErr is posted.
func (qp *QP) setArmed(ok bool, detail string) {
	qp.mu.Lock()
	if qp.attr.PathMigState != Rearm {
		qp.mu.Unlock()
		return
	}
	if ok {
		qp.attr.PathMigState = Armed
	}
	qp.mu.Unlock()
	if !ok {
		qp.ctx.postEvent(AsyncEvent{Type: EventPathMigErr, QPNum: qp.num, Detail: detail})
	}
}

// PostSend posts a send work request (ibv_post_send). It checks what the verbs library checks
// before the hardware sees the request: QP state (RTS or SQD; ERROR flushes), opcode for the QP
// type, SGE count, atomic operand sizes and alignment, accumulate type and length. Errors wrap
// ErrInvalidState or ErrInvalidArgument; nothing is started then.
func (qp *QP) PostSend(wr *SendWR) error {
	if err := qp.checkPost(wr); err != nil {
		qp.ReleaseBurst() // a refused request still ends a burst held for an earlier SendMore
		return err
	}
	return qp.drv.PostSend(wr)
}

// ReleaseBurst sends now the packets held for a work request posted with SendMore, for a poster
// that will not post the request that was to follow it (nothing when none are held or the
// provider does not batch).
func (qp *QP) ReleaseBurst() {
	if b, ok := qp.drv.(BurstReleaser); ok {
		b.ReleaseBurst()
	}
}

// checkPost is PostSend's check of the QP's state and of wr.
func (qp *QP) checkPost(wr *SendWR) error {
	if qp.dead.Load() {
		return fmt.Errorf("ibv: PostSend: %w", ErrClosed)
	}
	st := qp.State()
	if st != StateRTS && st != StateSQD && st != StateError {
		return fmt.Errorf("%w: PostSend in %v", ErrInvalidState, st)
	}
	if len(wr.SGL) > qp.cap.MaxSendSGE {
		return fmt.Errorf("%w: %d SGEs > max %d", ErrInvalidArgument, len(wr.SGL), qp.cap.MaxSendSGE)
	}
	if wr.LocalBuf != nil && len(wr.SGL) != 0 {
		return fmt.Errorf("%w: both LocalBuf and SGL given", ErrInvalidArgument)
	}
	return checkSendWR(qp.typ, wr)
}

// BurstReleaser is implemented by QP drivers that hold the packets of a work request posted
// with SendMore: ReleaseBurst sends them now (PostSend calls it when it refuses the request
// that follows).
type BurstReleaser interface {
	ReleaseBurst()
}

// SyncPoster is implemented by QP drivers that execute a send work request inside the post
// (the shm provider): PostSendSync runs wr at once and returns its completion status, and no
// completion is queued for it. A failure moves the QP to ERROR as an asynchronous one would.
type SyncPoster interface {
	PostSendSync(wr *SendWR) (WCStatus, error)
}

// CanPostSync reports whether the provider executes work requests synchronously (PostSendSync).
func (qp *QP) CanPostSync() bool {
	_, ok := qp.drv.(SyncPoster)
	return ok
}

// PostSendSync posts wr and returns its completion status at once, on providers that execute
// requests inside the post (CanPostSync); the caller's buffers are free when it returns and no
// work completion is queued. It makes the checks PostSend makes; ErrUnsupported elsewhere.
// This is the synchronous fast path of intra-node one-sided operations (no CQ round trip).
func (qp *QP) PostSendSync(wr *SendWR) (WCStatus, error) {
	sp, ok := qp.drv.(SyncPoster)
	if !ok {
		return WCGeneralErr, fmt.Errorf("ibv: PostSendSync: %w", ErrUnsupported)
	}
	if qp.dead.Load() {
		return WCGeneralErr, ErrClosed
	}
	if st := qp.State(); st != StateRTS && st != StateError {
		return WCGeneralErr, fmt.Errorf("%w: PostSendSync in %v", ErrInvalidState, st)
	}
	if len(wr.SGL) > qp.cap.MaxSendSGE {
		return WCGeneralErr, fmt.Errorf("%w: %d SGEs > max %d", ErrInvalidArgument, len(wr.SGL), qp.cap.MaxSendSGE)
	}
	if wr.LocalBuf != nil && len(wr.SGL) != 0 {
		return WCGeneralErr, fmt.Errorf("%w: both LocalBuf and SGL given", ErrInvalidArgument)
	}
	if err := checkSendWR(qp.typ, wr); err != nil {
		return WCGeneralErr, err
	}
	return sp.PostSendSync(wr)
}

// checkSendWR validates a send work request's shape for a QP type (no memory access).
func checkSendWR(t QPType, wr *SendWR) error {
	switch wr.Opcode {
	case OpSend, OpSendImm:
		if t == DC {
			return fmt.Errorf("%w: %v on a DC QP (RDMA and atomics only)", ErrInvalidArgument, wr.Opcode)
		}
		if t == UD && wr.AH == nil {
			return fmt.Errorf("%w: UD send without address handle", ErrInvalidArgument)
		}
		if t == UD {
			return checkMcastSend(wr)
		}
		return nil
	case OpRDMAWriteImm:
		if t == DC {
			return fmt.Errorf("%w: %v on a DC QP (it has no receive queue)", ErrInvalidArgument, wr.Opcode)
		}
	case OpRDMAWrite, OpRDMARead:
	case OpAtomicCmpSwap, OpAtomicFetchAdd, OpAtomicFetchAdd32, OpAtomicSwap64, OpAtomicSwap32, OpAtomicCmpSwap32:
		sz := wr.Opcode.AtomicSize()
		if wr.LocalLen() != uint64(sz) {
			return fmt.Errorf("%w: %v needs a %d-byte local buffer", ErrInvalidArgument, wr.Opcode, sz)
		}
		if wr.RemoteAddr%uint64(sz) != 0 {
			return fmt.Errorf("%w: %v remote address %#x not %d-byte aligned", ErrInvalidArgument, wr.Opcode, wr.RemoteAddr, sz)
		}
	case OpAccumulate:
		es := wr.AccType.Size()
		if es == 0 {
			return fmt.Errorf("%w: accumulate of unknown type %v", ErrInvalidArgument, wr.AccType)
		}
		if wr.LocalLen()%uint64(es) != 0 {
			return fmt.Errorf("%w: accumulate length %d not a multiple of %d", ErrInvalidArgument, wr.LocalLen(), es)
		}
		if wr.RemoteAddr%uint64(wr.AccType.Align()) != 0 {
			return fmt.Errorf("%w: accumulate target %#x not aligned for %v", ErrInvalidArgument, wr.RemoteAddr, wr.AccType)
		}
	default:
		return fmt.Errorf("%w: unknown opcode %v", ErrInvalidArgument, wr.Opcode)
	}
	switch t {
	case RC:
		return nil
	case DC:
		if wr.AH == nil {
			return fmt.Errorf("%w: %v on a DC QP without address handle", ErrInvalidArgument, wr.Opcode)
		}
		if IsMulticastLID(wr.AH.Attr.DLID) || wr.RemoteQPN >= MulticastQPN {
			return fmt.Errorf("%w: %v on a DC QP to a multicast group", ErrInvalidArgument, wr.Opcode)
		}
		return nil
	}
	return fmt.Errorf("%w: %v on a %v QP", ErrInvalidArgument, wr.Opcode, t)
}

// SGLLen is the total length in bytes of a scatter/gather list.
func SGLLen(sgl []SGE) uint64 {
	var n uint64
	for _, s := range sgl {
		n += uint64(s.Length)
	}
	return n
}

// PostRecv posts a receive work request (ibv_post_recv); not allowed in RESET, or with an SRQ.
func (qp *QP) PostRecv(wr *RecvWR) error {
	if qp.dead.Load() {
		return fmt.Errorf("ibv: PostRecv: %w", ErrClosed)
	}
	if qp.srq != nil {
		return fmt.Errorf("%w: QP uses an SRQ", ErrInvalidArgument)
	}
	if qp.typ == DC {
		return fmt.Errorf("%w: a DC QP has no receive queue", ErrInvalidArgument)
	}
	if st := qp.State(); st == StateReset {
		return fmt.Errorf("%w: PostRecv in %v", ErrInvalidState, st)
	}
	if len(wr.SGL) > qp.cap.MaxRecvSGE {
		return fmt.Errorf("%w: %d SGEs > max %d", ErrInvalidArgument, len(wr.SGL), qp.cap.MaxRecvSGE)
	}
	return qp.drv.PostRecv(wr)
}

// Destroy destroys the QP (ibv_destroy_qp).
func (qp *QP) Destroy() error {
	if !qp.dead.CompareAndSwap(false, true) {
		return nil
	}
	qp.ctx.qps.Delete(qp.num)
	qp.sendCQ.refs.Add(-1)
	qp.recvCQ.refs.Add(-1)
	qp.pd.refs.Add(-1)
	return qp.drv.Destroy()
}
