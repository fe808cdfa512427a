package window

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/goarmci/goarmci/internal/accum"
	"github.com/goarmci/goarmci/internal/memcopy"
	"github.com/goarmci/goarmci/rma"
)

// opKind is what a queued operation does.
type opKind uint8

const (
	kPut opKind = iota
	kGet
	kAcc    // Accumulate
	kGetAcc // GetAccumulate, FetchAndOp
	kCAS    // CompareAndSwap
	kDone   // issued (marks accumulates already handled in one issue pass)
)

// op is one queued operation of an epoch, with its target byte offset already checked.
type op struct {
	kind   opKind
	target int
	off    int
	src    []byte // Put source, accumulate origin, CAS new value
	dst    []byte // Get destination, fetch result
	cmp    []byte // CAS compare value
	aop    Op
	typ    Type
}

type pending struct {
	target int
	h      *rma.Handle
}

// ---- operations ----

// Put is MPI_Put: it queues a copy of origin to target's window at displacement disp (units of
// the target's disp_unit). The data is at the target when the epoch closes (or at Flush); until
// then origin must not change. Errors (nothing queued): ErrRMASync (no access epoch to target),
// ErrRank, ErrRMARange (outside the target's window), ErrFreed; transport and ctx errors when the
// queue was full and had to be issued.
func (w *Window) Put(ctx context.Context, origin []byte, target, disp int) error {
	return w.enqueue(ctx, &op{kind: kPut, target: target, src: origin}, disp, len(origin))
}

// Get is MPI_Get: it queues a copy of len(result) bytes at displacement disp of target's window
// into result, which holds them once the epoch closes (or at Flush). Errors as Put's.
func (w *Window) Get(ctx context.Context, result []byte, target, disp int) error {
	return w.enqueue(ctx, &op{kind: kGet, target: target, dst: result}, disp, len(result))
}

// Accumulate is MPI_Accumulate: target[i] = target[i] op origin[i] for the elements of typ in
// origin (a whole number of them), atomic per element with respect to every other
// accumulate-class operation to the same location (all of them in the window's one atomicity
// domain, see AccOps); from this rank to one target they apply in program order. Ops: SUM, PROD,
// MAX, MIN (not complex), REPLACE. By default SUM is an rma Acc under the target's accumulate
// lock, the others get–combine–put under it; on a SingleIntrinsic window each element is a native
// atomic. Errors as Put's, plus ErrType, ErrOp (NO_OP is for the fetching calls only; on a
// SingleIntrinsic window Complex128 allows SUM only).
func (w *Window) Accumulate(ctx context.Context, origin []byte, typ Type, target, disp int, o Op) error {
	if o == OpNoOp {
		return fmt.Errorf("%w: Accumulate with NO_OP (use GetAccumulate)", ErrOp)
	}
	return w.enqueue(ctx, &op{kind: kAcc, target: target, src: origin, aop: o, typ: typ}, disp, len(origin))
}

// GetAccumulate is MPI_Get_accumulate: result receives the target's elements as they were just
// before origin was combined into them with o, atomically per element as Accumulate: under the
// target's accumulate lock, one Get of the whole range into result, the combination in a local
// buffer, one Put back (see AccOps; a SingleIntrinsic window fetches and combines element by
// element with native atomics instead). With NO_OP, origin is ignored (may be nil) and this is an
// atomic read of len(result) bytes. result holds the values once the epoch closes or at Flush.
// Errors as Accumulate's; ErrType when origin and result differ in length (except for NO_OP).
func (w *Window) GetAccumulate(ctx context.Context, origin, result []byte, typ Type, target, disp int, o Op) error {
	if o != OpNoOp && len(origin) != len(result) {
		return fmt.Errorf("%w: GetAccumulate origin %d bytes, result %d bytes", ErrType, len(origin), len(result))
	}
	return w.enqueue(ctx, &op{kind: kGetAcc, target: target, src: origin, dst: result, aop: o, typ: typ}, disp, len(result))
}

// FetchAndOp is MPI_Fetch_and_op: GetAccumulate of exactly one element of typ (origin and result
// are one element each; origin is ignored for NO_OP). Errors as GetAccumulate's.
func (w *Window) FetchAndOp(ctx context.Context, origin, result []byte, typ Type, target, disp int, o Op) error {
	if len(result) != typ.Size() || (o != OpNoOp && len(origin) != typ.Size()) {
		return fmt.Errorf("%w: FetchAndOp needs one %v element (origin %d bytes, result %d bytes)", ErrType, typ, len(origin), len(result))
	}
	// GetAccumulate's check holds (origin and result are one element each)
	return w.enqueue(ctx, &op{kind: kGetAcc, target: target, src: origin, dst: result, aop: o, typ: typ}, disp, len(result))
}

// CompareAndSwap is MPI_Compare_and_swap: one element of an integer type (Int32, Int64): if the
// target element equals compare it becomes origin; result receives the old value either way
// (once the epoch closes or at Flush). It is the target's native compare-and-swap, issued under
// the target's accumulate lock like every accumulate-class operation (no lock on a
// SingleIntrinsic window; see AccOps). Errors as
// Accumulate's; ErrOp for a non-integer type.
func (w *Window) CompareAndSwap(ctx context.Context, origin, compare, result []byte, typ Type, target, disp int) error {
	if typ.Size() != 0 && !isInteger(typ) {
		return fmt.Errorf("%w: CompareAndSwap on %v", ErrOp, typ)
	}
	if s := typ.Size(); len(origin) != s || len(compare) != s || len(result) != s {
		return fmt.Errorf("%w: CompareAndSwap needs one %v element each (origin %d, compare %d, result %d bytes)", ErrType, typ, len(origin), len(compare), len(result))
	}
	return w.enqueue(ctx, &op{kind: kCAS, target: target, src: origin, cmp: compare, dst: result, aop: OpReplace, typ: typ}, disp, len(result))
}

// enqueue validates an operation completely, commits it to the epoch and queues it; a full queue
// is issued (not waited for).
func (w *Window) enqueue(ctx context.Context, o *op, disp, n int) error {
	if err := w.alive(); err != nil {
		return err
	}
	if !w.ep.covers(o.target) { // Epochs.CheckAccess, inlined
		return w.ep.accessErr(o.target)
	}
	if o.kind >= kAcc {
		if err := checkOp(o.aop, o.typ); err != nil {
			return err
		}
		if w.opt.native && o.typ == Complex128 && (o.kind != kAcc || o.aop != OpSum) {
			return fmt.Errorf("%w: %v %v on a SingleIntrinsic window (two-word elements: Accumulate(SUM) only)", ErrOp, o.aop, o.typ)
		}
		if n&(o.typ.Size()-1) != 0 { // sizes and alignments are powers of two: masks, no division
			return fmt.Errorf("%w: %d bytes is not a whole number of %v", ErrType, n, o.typ)
		}
	}
	t := o.target
	if disp < 0 || disp > w.tgt[t].maxDisp {
		return fmt.Errorf("%w: displacement %d on rank %d", ErrRMARange, disp, t)
	}
	off := disp * w.tgt[t].disp // no overflow: disp ≤ MaxInt/disp_unit
	if off > w.tgt[t].size-n {
		return fmt.Errorf("%w: [%d,+%d) bytes on rank %d whose window has %d", ErrRMARange, off, n, t, w.tgt[t].size)
	}
	if o.kind >= kAcc && off&(o.typ.Align()-1) != 0 {
		return fmt.Errorf("%w: %v element at byte offset %d (needs %d-byte alignment)", ErrRMARange, o.typ, off, o.typ.Align())
	}
	if w.ep.fence { // Epochs.Access, whose check CheckAccess made above
		w.ep.fenceUsed = true
	}
	o.off = off
	if w.tgt[t].direct && w.tgt[t].queued == 0 {
		// Nothing of this epoch is queued for t, and every rma operation to t completes at
		// issue: a small operation runs now (atOnce) — program order with the accumulates to t is
		// kept, since every earlier one has already been applied.
		switch {
		case o.kind >= kAcc && n <= 8 && n == o.typ.Size():
			return w.accAtOnce(ctx, o)
		case o.kind < kAcc && n <= eagerBytes:
			return w.dataAtOnce(ctx, o)
		}
	}
	w.q = append(w.q, *o)
	w.tgt[t].queued++
	if len(w.q) >= w.opt.depth {
		return w.issue(ctx, -1)
	}
	return nil
}

// ---- operations that run at issue ----

// eagerBytes is the largest Put or Get that runs at issue to a direct target (a rank this one
// reaches through a mapped view, or itself) when nothing is queued for it: a copy through the
// view, cheaper than queuing it for the epoch's close. Larger ones stay queued for the
// reordering policy.
const eagerBytes = 4096

// dataAtOnce runs a Put or Get to a direct target now; it is complete when this returns.
func (w *Window) dataAtOnce(ctx context.Context, o *op) error {
	if m := w.dataPart(o.target); m != nil && o.off+len(o.src)+len(o.dst) <= len(m) {
		// put's and get's path through the part mapped at Create: the copy is the operation
		if o.kind == kPut {
			memcopy.Copy(m[o.off:], o.src)
		} else {
			memcopy.Copy(o.dst, m[o.off:])
		}
		return nil
	}
	var err error
	if o.kind == kPut {
		err = w.put(ctx, o.src, o.target, o.off)
	} else {
		err = w.get(ctx, o.dst, o.target, o.off)
	}
	if err != nil {
		return fmt.Errorf("window: issue to rank %d: %w", o.target, err)
	}
	return nil
}

// accAtOnce runs a one-element accumulate-class operation (at most 8 bytes) to a direct target
// now, in the window's atomicity domain, and completes it before returning: on a SingleIntrinsic
// window the target's native atomic; otherwise under the target's accumulate lock (not taken
// inside an exclusive Lock epoch to the target, as in accBatch), where it is one load,
// combination and store through the part mapped at Create (applyOne). So a FetchAndOp to a
// same-node rank is the lock's compare-and-swap, a load and a store, and the unlock's swap, with
// no queue and no allocation.
func (w *Window) accAtOnce(ctx context.Context, o *op) error {
	tg := o.target
	var err error
	switch {
	case w.opt.native && o.kind == kCAS:
		err = w.casElem(ctx, o)
	case w.opt.native:
		err = w.nativeApply(ctx, o)
	case w.ep.Locked(tg) == LockExclusive:
		err = w.applyOne(ctx, o)
	default:
		// the first attempt at the accumulate lock runs here: a compare-and-swap on the mapped word
		if ws := w.words(tg); ws == nil || !atomic.CompareAndSwapUint64(&ws[offAccLock/8], 0, uint64(w.me+1)) {
			if err := w.accLock(ctx, tg); err != nil {
				return err
			}
		}
		err = w.applyOne(ctx, o)
		// The release is a CPU atomic on the mapped word (tg is direct): it cannot block, and
		// must happen even when ctx is done.
		if ws := w.words(tg); ws != nil { // swap's mapped path, inlined
			atomic.StoreUint64(&ws[offAccLock/8], 0)
		} else if e := w.swap(context.Background(), tg, offAccLock, 0); e != nil {
			return errors.Join(err, fmt.Errorf("window: accumulate unlock on rank %d: %w", tg, e))
		}
	}
	if err != nil {
		return fmt.Errorf("window: %v to rank %d: %w", o.aop, tg, err)
	}
	return nil
}

// applyOne applies the one-element accumulate-class operation o (at most 8 bytes) to a direct
// target, with its accumulate lock held or under an exclusive Lock. Through the part mapped at
// Create it is one load, the combination and one store (applyWord); where rma has no mapping,
// CompareAndSwap is the native compare-and-swap, an integer SUM or REPLACE one fetch-and-add or
// swap, NO_OP one Get, the rest one Get, the combination on the stack and one Put.
func (w *Window) applyOne(ctx context.Context, o *op) error {
	n := len(o.src)
	if o.kind != kAcc {
		n = len(o.dst)
	}
	m, err := w.dataAt(ctx, o.target, o.off, n)
	if err != nil {
		return err
	}
	if m != nil {
		applyWord(o, m, w.word[:n])
		return nil
	}
	if o.kind == kCAS {
		return w.casElem(ctx, o)
	}
	if isInteger(o.typ) && (o.aop == OpSum || o.aop == OpReplace) {
		if o.kind == kAcc { // the old value goes nowhere
			return w.fetchWord(ctx, o, w.word[:len(o.src)])
		}
		return w.fetchWord(ctx, o, o.dst)
	}
	cur := w.word[:n] // the window's, not the stack's: rma's buffers escape
	if err := w.get(ctx, cur, o.target, o.off); err != nil {
		return err
	}
	if o.kind == kGetAcc {
		copy(o.dst, cur)
	}
	if o.aop == OpNoOp {
		return nil
	}
	combine(o.aop, o.typ, cur, o.src)
	return w.put(ctx, cur, o.target, o.off)
}

// applyWord applies the one-element operation o to elem, the target element's bytes in memory
// this process maps, with the target's accumulate lock held (or under an exclusive Lock, which
// excludes every other access): one load into cur, the combination there and one store, none
// for NO_OP or a compare that fails. The lock's compare-and-swap and swap order the load and the
// store with every other accumulate-class operation to the element, so no atomic instruction is
// needed on elem itself (the window's atomicity domain, AccOps).
func applyWord(o *op, elem, cur []byte) {
	copyElem(cur, elem)
	switch o.kind {
	case kCAS:
		copyElem(o.dst, cur)
		if bytes.Equal(cur, o.cmp) {
			copyElem(elem, o.src)
		}
		return
	case kGetAcc:
		copyElem(o.dst, cur)
	}
	if o.aop == OpNoOp {
		return
	}
	combine(o.aop, o.typ, cur, o.src)
	copyElem(elem, cur)
}

// copyElem copies one 4- or 8-byte element (src's length; dst at least as long) with one load and
// one store, where copy would call memmove.
func copyElem(dst, src []byte) {
	le := binary.LittleEndian
	if len(src) == 8 {
		le.PutUint64(dst, le.Uint64(src))
		return
	}
	le.PutUint32(dst, le.Uint32(src))
}

// ---- issue and completion ----

// completeAll issues every queued operation, waits for all of them, then for every target that
// carried data runs an rma Fence (every operation to it complete, all its stripes included, and
// its multirail channel flushed: every work request on every subchannel complete, the
// completion on every subchannel used of [Vishnu07 §5.2.1]).
func (w *Window) completeAll(ctx context.Context) error {
	return w.complete(ctx, -1)
}

// complete does completeAll for one target (t ≥ 0) or for all (t < 0). Inlined: when nothing
// is queued or carrying data (every operation ran at issue) it is two loads. (An operation in
// flight, in w.pend, carries data: its target stays touched until it is waited for.)
func (w *Window) complete(ctx context.Context, t int) error {
	if len(w.q) == 0 && w.nTouched == 0 {
		return nil
	}
	return w.completeQueued(ctx, t)
}

// completeQueued is complete with operations queued, in flight or carrying data.
func (w *Window) completeQueued(ctx context.Context, t int) error {
	err := w.issue(ctx, t)
	if w.nTouched == 0 {
		return err // nothing in flight, nothing carried data: the common case of ops run at issue
	}
	keep := w.pend[:0]
	for _, p := range w.pend {
		if t >= 0 && p.target != t {
			keep = append(keep, p)
			continue
		}
		if e := p.h.Wait(ctx); e != nil && err == nil {
			err = fmt.Errorf("window: completing operations to rank %d: %w", p.target, e)
		}
	}
	clear(w.pend[len(keep):])
	w.pend = keep
	for u, used := range w.touched {
		if !used || (t >= 0 && u != t) {
			continue
		}
		// rma's Fence flushes the channel too: a completion on every subchannel of the channel
		// that carried data [Vishnu07 §5.2.1]
		if e := w.rt.Fence(ctx, u); e != nil && err == nil {
			err = fmt.Errorf("window: fence to rank %d: %w", u, e)
		}
		w.touched[u] = false
		w.nTouched--
	}
	return err
}

// touch marks t as carrying data of the epoch (complete fences it).
func (w *Window) touch(t int) {
	if !w.touched[t] {
		w.touched[t] = true
		w.nTouched++
	}
}

// issue starts the queued operations to t (t < 0: all). Puts and gets go first, in the order of
// the reordering policy (issueOrder); then the accumulate-class operations of each target in
// program order, under one accumulate-lock acquisition per target.
// Operations leave the queue even when issuing fails (the error is returned).
func (w *Window) issue(ctx context.Context, t int) error {
	if len(w.q) == 0 || (t >= 0 && w.tgt[t].queued == 0) {
		return nil
	}
	if t < 0 {
		for u := range w.tgt {
			w.tgt[u].queued = 0
		}
	} else {
		w.tgt[t].queued = 0
	}
	sel, keep := w.sel[:0], w.q[:0]
	for i := range w.q {
		if t < 0 || w.q[i].target == t {
			sel = append(sel, w.q[i])
		} else {
			keep = append(keep, w.q[i])
		}
	}
	clear(w.q[len(keep):])
	w.q = keep
	defer func() {
		clear(sel)
		w.sel = sel[:0]
	}()
	if len(sel) == 0 {
		return nil
	}
	// data operations, reordered
	w.dirs, w.sizesQ, w.order = w.dirs[:0], w.sizesQ[:0], w.order[:0]
	var idx []int = w.order // reuse: indexes of data ops in sel, then the issue order after them
	for i := range sel {
		switch o := &sel[i]; o.kind {
		case kPut:
			w.dirs = append(w.dirs, dirPut)
			w.sizesQ = append(w.sizesQ, len(o.src))
			idx = append(idx, i)
		case kGet:
			w.dirs = append(w.dirs, dirGet)
			w.sizesQ = append(w.sizesQ, len(o.dst))
			idx = append(idx, i)
		}
	}
	nData := len(idx)
	idx = issueOrder(w.dirs, w.sizesQ, w.opt.reorder, idx)
	w.order = idx
	var err error
	for _, k := range idx[nData:] {
		o := &sel[idx[k]]
		var h *rma.Handle
		var e error
		if o.kind == kPut {
			h, e = w.rt.NbPut(ctx, o.src, w.data, o.target, o.off)
		} else {
			h, e = w.rt.NbGet(ctx, w.data, o.target, o.off, o.dst)
		}
		if e != nil {
			err = errors.Join(err, fmt.Errorf("window: issue to rank %d: %w", o.target, e))
			continue
		}
		w.touch(o.target)
		if h != nil {
			w.pend = append(w.pend, pending{o.target, h})
		}
	}
	// accumulate-class operations, per target in order of first appearance
	for i := range sel {
		if sel[i].kind < kAcc || sel[i].kind == kDone {
			continue
		}
		tg := sel[i].target
		if e := w.accBatch(ctx, sel, i, tg); e != nil {
			err = errors.Join(err, e)
		}
		for j := i; j < len(sel); j++ { // mark this target's accumulates done
			if sel[j].kind >= kAcc && sel[j].kind != kDone && sel[j].target == tg {
				sel[j].kind = kDone
			}
		}
	}
	return err
}

// accBatch runs the accumulate-class operations to tg in sel[from:], in program order, all of
// them under one acquisition of tg's accumulate lock (the window's single atomicity domain, see
// AccOps): Accumulate(SUM) is an rma Acc issued under the lock, CompareAndSwap the target's
// compare-and-swap, everything else one get–combine–put of the operation's whole range. The
// lock goes once every operation is complete at the target.
//
// Inside an exclusive passive-target epoch to tg (Lock(LockExclusive), with or without
// ModeNoCheck) the accumulate lock is not taken: no other rank can access tg's window then (its
// lock word excludes every other Lock and LockAll, and MPI makes it erroneous to expose a locked
// window in a fence or PSCW epoch), as Open MPI's osc/rdma also skips it for exclusively locked
// peers.
func (w *Window) accBatch(ctx context.Context, sel []op, from, tg int) (err error) {
	if w.opt.native {
		return w.nativeBatch(ctx, sel, from, tg)
	}
	locked := w.ep.Locked(tg) != LockExclusive
	if locked {
		if err := w.accLock(ctx, tg); err != nil {
			return err
		}
	}
	inflight := false // rma Accs issued under the lock but not yet complete at the target
	defer func() {
		uctx := context.WithoutCancel(ctx)
		// completed at the target before the lock goes (and, without the lock, before a later
		// batch's get–combine–put to the same words: program order)
		if inflight {
			if e := w.rt.Fence(uctx, tg); e != nil && err == nil {
				err = e
			}
		}
		if !locked {
			return
		}
		if e := w.swap(uctx, tg, offAccLock, 0); e != nil && err == nil {
			err = fmt.Errorf("window: accumulate unlock on rank %d: %w", tg, e)
		}
	}()
	for j := from; j < len(sel); j++ {
		o := &sel[j]
		if o.kind < kAcc || o.kind == kDone || o.target != tg {
			continue
		}
		if o.kind == kAcc && o.aop == OpSum {
			h, e := w.rt.NbAcc(ctx, o.typ, 1, o.src, w.data, tg, o.off)
			if e != nil {
				return fmt.Errorf("window: accumulate to rank %d: %w", tg, e)
			}
			w.touch(tg)
			if h != nil { // nil: complete at issue (self, or a same-node direct view)
				w.pend = append(w.pend, pending{tg, h})
				inflight = true
			}
			continue
		}
		if inflight { // keep program order with the Accs before this one
			if e := w.rt.Fence(ctx, tg); e != nil {
				return e
			}
			inflight = false
		}
		var e error
		if o.kind == kCAS {
			e = w.casElem(ctx, o)
		} else {
			e = w.getCombinePut(ctx, o)
		}
		if e != nil {
			return fmt.Errorf("window: %v to rank %d: %w", o.aop, tg, e)
		}
	}
	return nil
}

// accLock takes tg's accumulate lock word: compare-and-swap 0 → me+1, retried with backoff.
func (w *Window) accLock(ctx context.Context, tg int) error {
	var b backoff
	for {
		old, err := w.cas(ctx, tg, offAccLock, 0, int64(w.me+1))
		if err != nil {
			return fmt.Errorf("window: accumulate lock on rank %d: %w", tg, err)
		}
		if old == 0 {
			return nil
		}
		if err := b.wait(ctx); err != nil {
			return fmt.Errorf("window: accumulate lock on rank %d: %w", tg, err)
		}
	}
}

// getCombinePut applies an accumulate-class operation other than Accumulate(SUM) and
// CompareAndSwap under the target's accumulate lock, as one read-modify-write of its whole range:
// one Get of the range (for GetAccumulate/FetchAndOp straight into the result), the combination
// in a local buffer, one Put back. REPLACE skips the combination and NO_OP the Put; a real or
// integer SUM to a same-node rank is one rma Acc in place instead of the combination and the Put.
func (w *Window) getCombinePut(ctx context.Context, o *op) error {
	if o.kind == kAcc {
		if o.aop == OpReplace {
			return w.rt.Put(ctx, o.src, w.data, o.target, o.off)
		}
		buf := w.scratchN(len(o.src))
		if err := w.rt.Get(ctx, w.data, o.target, o.off, buf); err != nil {
			return err
		}
		combine(o.aop, o.typ, buf, o.src)
		return w.rt.Put(ctx, buf, w.data, o.target, o.off)
	}
	if isInteger(o.typ) && len(o.dst) == o.typ.Size() && o.aop != OpProd && o.aop != OpMax && o.aop != OpMin &&
		w.rt.TransportTo(o.target) == "tcp" {
		return w.fetchWord(ctx, o, o.dst)
	}
	if err := w.rt.Get(ctx, w.data, o.target, o.off, o.dst); err != nil {
		return err
	}
	switch o.aop {
	case OpNoOp:
		return nil
	case OpReplace:
		return w.rt.Put(ctx, o.src, w.data, o.target, o.off)
	case OpSum:
		if !isComplex(o.typ) && w.rt.TransportTo(o.target) == "shm" {
			// in place: an rma Acc to a same-node rank adds through the mapping at memory speed
			// (one pass over the target instead of combining into a buffer and copying it back).
			// Not complex: the Acc multiplies by its scale 1+0i, which turns an infinite
			// component's partner into NaN.
			return w.rt.Acc(ctx, o.typ, 1, o.src, w.data, o.target, o.off)
		}
	}
	buf := w.scratchN(len(o.dst))
	combineInto(o.aop, o.typ, buf, o.dst, o.src)
	return w.rt.Put(ctx, buf, w.data, o.target, o.off)
}

// fetchWord is a one-element integer GetAccumulate (FetchAndOp) with SUM, REPLACE or NO_OP to a
// target over the network, still under the accumulate lock: the target's fetch-and-add or swap
// does the read and the write in one round trip instead of a Get and a Put. The old value goes to
// dst. Operations run at issue to a same-node rank use it too (applyOne): there rma's atomics are
// CPU atomics on the mapped word, one call where a Get and a Put are two.
func (w *Window) fetchWord(ctx context.Context, o *op, dst []byte) error {
	le := binary.LittleEndian
	w32 := o.typ == Int32
	var v uint64
	switch {
	case o.aop == OpNoOp:
	case w32:
		v = uint64(le.Uint32(o.src))
	default:
		v = le.Uint64(o.src)
	}
	var aop accum.Op
	switch {
	case o.aop == OpReplace && w32:
		aop = accum.OpSwap32
	case o.aop == OpReplace:
		aop = accum.OpSwap64
	case w32:
		aop = accum.OpFetchAdd32
	default:
		aop = accum.OpFetchAdd64
	}
	old, err := w.rmw(ctx, w.data, o.target, o.off, aop, v, 0)
	if err != nil {
		return err
	}
	if w32 {
		le.PutUint32(dst, uint32(old))
	} else {
		le.PutUint64(dst, old)
	}
	return nil
}

// scratchN is the window's scratch buffer with n bytes.
func (w *Window) scratchN(n int) []byte {
	if cap(w.scratch) < n {
		w.scratch = make([]byte, n)
	}
	return w.scratch[:n]
}

// casElem is CompareAndSwap on the target's native 32/64-bit compare-and-swap.
func (w *Window) casElem(ctx context.Context, o *op) error {
	le := binary.LittleEndian
	if o.typ == Int32 {
		old, err := w.rmw(ctx, w.data, o.target, o.off, accum.OpCmpSwap32, uint64(le.Uint32(o.src)), uint64(le.Uint32(o.cmp)))
		if err != nil {
			return err
		}
		le.PutUint32(o.dst, uint32(old))
		return nil
	}
	old, err := w.rmw(ctx, w.data, o.target, o.off, accum.OpCmpSwap64, le.Uint64(o.src), le.Uint64(o.cmp))
	if err != nil {
		return err
	}
	le.PutUint64(o.dst, old)
	return nil
}

// nativeBatch runs the accumulate-class operations to tg in sel[from:] of a SingleIntrinsic
// window, in program order, element by element on the target's atomics (each waited for).
func (w *Window) nativeBatch(ctx context.Context, sel []op, from, tg int) error {
	for j := from; j < len(sel); j++ {
		o := &sel[j]
		if o.kind < kAcc || o.kind == kDone || o.target != tg {
			continue
		}
		var err error
		if o.kind == kCAS {
			err = w.casElem(ctx, o)
		} else {
			err = w.nativeApply(ctx, o)
		}
		if err != nil {
			return fmt.Errorf("window: %v to rank %d: %w", o.aop, tg, err)
		}
	}
	return nil
}

// nativeApply applies an Accumulate or GetAccumulate word by word: 4-byte words for Int32 and
// Float32, 8-byte ones otherwise (a Complex64 element is one word; a Complex128 one, SUM only,
// two Float64 components).
func (w *Window) nativeApply(ctx context.Context, o *op) error {
	n, wt := len(o.dst), o.typ
	if o.kind == kAcc {
		n = len(o.src)
	}
	word := 8
	switch o.typ {
	case Int32, Float32:
		word = 4
	case Complex128:
		wt = Float64
	}
	var in []byte
	for i := 0; i < n; i += word {
		if o.aop != OpNoOp {
			in = o.src[i : i+word]
		}
		old, err := w.nativeWord(ctx, o.aop, wt, o.target, o.off+i, word, in)
		if err != nil {
			return err
		}
		if o.kind == kGetAcc {
			if word == 4 {
				binary.LittleEndian.PutUint32(o.dst[i:], uint32(old))
			} else {
				binary.LittleEndian.PutUint64(o.dst[i:], old)
			}
		}
	}
	return nil
}

// nativeWord applies op to the word of word bytes at off of tg's window with the target's
// atomics and returns its old value: fetch-and-add for integer SUM and NO_OP, swap for REPLACE,
// else a compare-and-swap loop whose first guess is 0 (no separate read when the word is 0; the
// swap returns the value to retry from otherwise).
func (w *Window) nativeWord(ctx context.Context, o Op, t Type, tg, off, word int, in []byte) (uint64, error) {
	le := binary.LittleEndian
	var v int64 // the operand as the rma atomics take it
	switch {
	case o == OpNoOp:
	case word == 4:
		v = int64(int32(le.Uint32(in)))
	default:
		v = int64(le.Uint64(in))
	}
	mask := ^uint64(0)
	if word == 4 {
		mask = 1<<32 - 1
	}
	if o == OpNoOp || o == OpReplace || (o == OpSum && isInteger(t)) {
		aop := accum.OpFetchAdd64
		switch {
		case o == OpReplace && word == 4:
			aop = accum.OpSwap32
		case o == OpReplace:
			aop = accum.OpSwap64
		case word == 4:
			aop = accum.OpFetchAdd32
		}
		old, err := w.rmw(ctx, w.data, tg, off, aop, uint64(v), 0)
		return old & mask, err
	}
	var cur, next [8]byte
	var guess uint64
	for {
		le.PutUint64(cur[:], guess)
		copy(next[:], cur[:])
		combine(o, t, next[:word], in)
		nv := le.Uint64(next[:])
		aop := accum.OpCmpSwap64
		if word == 4 {
			aop = accum.OpCmpSwap32
		}
		got, err := w.rmw(ctx, w.data, tg, off, aop, nv&mask, guess)
		if err != nil {
			return 0, err
		}
		if got == guess {
			return guess, nil
		}
		guess = got
	}
}
