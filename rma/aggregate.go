package rma

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrHandle: a nil aggregate handle, Unset of a handle that is not set, or Unset of a handle
// with transfers issued under it since the last Wait.
var ErrHandle = errors.New("rma: bad handle")

// aggCopyMax is the largest Put an aggregate handle copies into its own buffer at issue (ARMCI's
// aggregate data buffer); a larger one is kept by reference and its source must stay untouched
// until Wait.
const aggCopyMax = 1 << 10

// Aggregate is an explicit non-blocking handle (armci_hdl_t after ARMCI_INIT_HANDLE) that can be
// turned into an aggregate handle (ARMCI_SET_AGGREGATE_HANDLE), ARMCI's implicit aggregation
// [ARMCI]: while it is set, the Puts and Gets issued under it to a network peer are not sent
// one by one but queued per target (segment, rank and direction) and sent at Wait (or Test) as
// one vector transfer per target (ARMCI_NbPutV / ARMCI_NbGetV); small Puts are copied into one
// buffer per target and those that continue the previous one (the next remote bytes) become one
// piece, so n small Puts to consecutive offsets cost one RDMA write. To this rank or a peer of
// its node (shared memory) a transfer is a copy that completes at issue, as ARMCI does for SMP
// peers, so it is not queued. While the handle is not set, each transfer is issued at once.
// Either way one Wait completes every transfer issued under the handle since the last Wait.
//
// Transfers are validated when they are issued (rank, bounds, a live segment), so a bad one
// returns its error at once and is not queued. As for any non-blocking transfer, overlapping
// transfers under one handle (or a Get of bytes a queued Put writes) have no defined order
// until Wait returns. Its methods may be called from several goroutines of one rank.
type Aggregate struct {
	r        *Runtime
	mu       sync.Mutex
	set      bool
	batches  []*aggBatch          // queued transfers per target, in first-use order
	index    map[aggKey]*aggBatch // the batch of each target
	inflight []*Handle            // issued, not yet waited
	pending  int                  // transfers issued under h since the last Wait
	issueErr error                // batches Test failed to issue, reported by the next Wait
}

// aggKey is the target of one batch.
type aggKey struct {
	seg  *Segment
	proc int
	kind kind
}

// aggBatch is the queued transfers to one target: pieces whose local bytes are either held by
// reference (Local non-nil) or copied into buf at [start, start+n).
type aggBatch struct {
	key    aggKey
	pieces []aggPiece
	buf    []byte
}

type aggPiece struct {
	local    []byte // nil: the bytes are buf[start:start+n]
	start, n int
	off      int
}

// NewAggregate returns a handle that is not set (ARMCI_INIT_HANDLE).
func (r *Runtime) NewAggregate() *Aggregate {
	return &Aggregate{r: r, index: make(map[aggKey]*aggBatch)}
}

// Set makes h an aggregate handle (ARMCI_SET_AGGREGATE_HANDLE); setting a set handle is a no-op.
// Errors: ErrHandle (nil h).
func (h *Aggregate) Set() error {
	if h == nil {
		return fmt.Errorf("%w: ARMCI_SET_AGGREGATE_HANDLE on a nil handle", ErrHandle)
	}
	h.mu.Lock()
	h.set = true
	h.mu.Unlock()
	return nil
}

// Unset ends aggregation on h (ARMCI_UNSET_AGGREGATE_HANDLE). Errors: ErrHandle (nil h, h not
// set, or transfers issued under it since the last Wait: Wait first); h is then unchanged.
func (h *Aggregate) Unset() error {
	if h == nil {
		return fmt.Errorf("%w: ARMCI_UNSET_AGGREGATE_HANDLE on a nil handle", ErrHandle)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case !h.set:
		return fmt.Errorf("%w: ARMCI_UNSET_AGGREGATE_HANDLE on a handle that is not set", ErrHandle)
	case h.pending > 0:
		return fmt.Errorf("%w: ARMCI_UNSET_AGGREGATE_HANDLE with %d transfers issued since the last Wait (Wait first)", ErrHandle, h.pending)
	}
	h.set = false
	return nil
}

// Aggregating reports whether h is set (an aggregate handle).
func (h *Aggregate) Aggregating() bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.set
}

// NbPut is ARMCI_NbPut under h: src goes to byte offset off of rank proc's part of seg. Queued
// on a set handle, a src of up to 1 KiB is copied (reusable at return), a larger one is held
// until Wait; issued at once, src is in use until Wait, as with Runtime.NbPut.
// Errors: ErrHandle (nil h) and those of Runtime.NbPut; nothing is queued or sent on error.
func (h *Aggregate) NbPut(ctx context.Context, src []byte, seg *Segment, proc, off int) error {
	return h.add(ctx, kPut, src, seg, proc, off, false)
}

// NbGet is ARMCI_NbGet under h: dst receives the bytes at byte offset off of rank proc's part
// of seg once Wait returns. Errors: ErrHandle (nil h) and those of Runtime.NbGet.
func (h *Aggregate) NbGet(ctx context.Context, seg *Segment, proc, off int, dst []byte) error {
	return h.add(ctx, kGet, dst, seg, proc, off, false)
}

// NbPutValue stores v, little-endian, at byte offset off of rank proc's part of seg under the
// handle h (ARMCI_NbPutValueInt/Long/Float/Double): a non-blocking PutValue, complete at h's
// Wait. Errors: ErrHandle (nil h) and those of PutValue.
func NbPutValue[T Value](ctx context.Context, h *Aggregate, v T, seg *Segment, proc, off int) error {
	b := valueBufs.Get().(*[8]byte) // add copies the value unless it completes at issue
	defer valueBufs.Put(b)
	return h.add(ctx, kPut, b[:encodeValue(v, b)], seg, proc, off, true)
}

// add validates one transfer and queues it (set handle, network peer) or issues it. transient
// marks local bytes that do not outlive the call (a value): they are copied unless the transfer
// completes at issue.
func (h *Aggregate) add(ctx context.Context, k kind, local []byte, seg *Segment, proc, off int, transient bool) error {
	if h == nil {
		return fmt.Errorf("%w: %v on a nil handle", ErrHandle, xfer{kind: k})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	pe, err := h.r.peer(ctx, proc)
	if err != nil {
		return err
	}
	atIssue := pe.route.kind == routeSelf || pe.route.kind == routeNode // a copy, done at issue
	if !h.set || atIssue {
		if transient && !atIssue {
			local = append([]byte(nil), local...)
		}
		hd, err := h.r.contiguous(ctx, xfer{kind: k}, local, seg, proc, off, false)
		if err != nil {
			return err
		}
		if hd != nil {
			h.inflight = append(h.inflight, hd)
		}
		h.pending++
		return nil
	}
	if err := seg.bounds(proc, off, len(local)); err != nil {
		return err
	}
	h.pending++
	key := aggKey{seg: seg, proc: proc, kind: k}
	b := h.index[key]
	if b == nil {
		b = &aggBatch{key: key}
		h.index[key] = b
		h.batches = append(h.batches, b)
	}
	p := aggPiece{local: local, n: len(local), off: off}
	if k == kPut && (transient || len(local) <= aggCopyMax) {
		p.local, p.start = nil, len(b.buf)
		b.buf = append(b.buf, local...)
		if last := len(b.pieces) - 1; last >= 0 {
			if q := &b.pieces[last]; q.local == nil && q.off+q.n == off {
				q.n += p.n // continues the previous copied piece: one piece
				return nil
			}
		}
	}
	b.pieces = append(b.pieces, p)
	return nil
}

// flush issues every queued batch as one non-blocking vector transfer (h.mu held). Every batch
// is issued (or dropped with its error); the errors are joined.
func (h *Aggregate) flush(ctx context.Context) error {
	var errs []error
	for _, b := range h.batches {
		vecs := make([]Vec, len(b.pieces))
		for i, p := range b.pieces {
			l := p.local
			if l == nil {
				l = b.buf[p.start : p.start+p.n : p.start+p.n]
			}
			vecs[i] = Vec{Local: l, Off: p.off}
		}
		hd, err := h.r.vector(ctx, xfer{kind: b.key.kind}, vecs, b.key.seg, b.key.proc, false)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if hd != nil {
			h.inflight = append(h.inflight, hd)
		}
	}
	h.batches = h.batches[:0]
	clear(h.index)
	return errors.Join(errs...)
}

// Wait sends what h has queued and completes every transfer issued under h since the last Wait
// (ARMCI_Wait on the handle): Puts are then at their targets and their sources reusable, Gets'
// destinations hold the data. When ctx ends first it returns ctx's error with transfers still
// in flight; a later Wait completes them. Errors: ErrHandle (nil h); those of Handle.Wait and of
// the vector transfers, joined.
func (h *Aggregate) Wait(ctx context.Context) error {
	if h == nil {
		return fmt.Errorf("%w: ARMCI_Wait on a nil handle", ErrHandle)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	errs := []error{h.issueErr, h.flush(ctx)}
	h.issueErr = nil
	for i, hd := range h.inflight {
		if err := hd.Wait(ctx); err != nil {
			if ctx.Err() != nil && !hd.Test() {
				h.inflight = append(h.inflight[:0], h.inflight[i:]...)
				return errors.Join(append(errs, err)...)
			}
			errs = append(errs, err)
		}
	}
	clear(h.inflight)
	h.inflight = h.inflight[:0]
	h.pending = 0
	return errors.Join(errs...)
}

// Test sends what h has queued, makes progress once and reports whether every transfer issued
// under h has completed (ARMCI_Test); a nil handle has nothing in flight. It does not report
// errors: Wait does.
func (h *Aggregate) Test() bool {
	if h == nil {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.batches) > 0 {
		// A batch that fails to issue has nothing in flight; the next Wait reports its error.
		h.issueErr = errors.Join(h.issueErr, h.flush(context.Background()))
	}
	for _, hd := range h.inflight {
		if !hd.Test() {
			return false
		}
	}
	return true
}
