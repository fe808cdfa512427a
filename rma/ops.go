package rma

import (
	"context"
	"fmt"
)

// Put copies src to byte offset off of rank proc's part of seg (ARMCI_Put). It returns when src
// may be reused, also when ctx ends first: the call then waits for the transfer to be done with
// src and returns ctx's error (errors.Is(err, context.Canceled); the data may or may not have
// arrived). The other blocking calls keep their buffers' contract the same way. Errors:
// ErrBadRank, ErrOutOfRange, ErrFreed, ErrFinalized, ErrPeerFailed, ErrTransport, ctx's.
func (r *Runtime) Put(ctx context.Context, src []byte, seg *Segment, proc, off int) error {
	_, err := r.contiguous(ctx, xfer{kind: kPut}, src, seg, proc, off, true)
	return err
}

// Get copies len(dst) bytes from byte offset off of rank proc's part of seg into dst (ARMCI_Get).
func (r *Runtime) Get(ctx context.Context, seg *Segment, proc, off int, dst []byte) error {
	_, err := r.contiguous(ctx, xfer{kind: kGet}, dst, seg, proc, off, true)
	return err
}

// Acc adds scale·src element-wise into rank proc's part of seg at byte offset off (ARMCI_Acc),
// atomically per element with respect to other accumulates. src holds elements of typ; off must
// be aligned for typ. Errors additionally: ErrType.
func (r *Runtime) Acc(ctx context.Context, typ AccType, scale complex128, src []byte, seg *Segment, proc, off int) error {
	_, err := r.contiguous(ctx, xfer{kind: kAcc, typ: typ, scale: scale}, src, seg, proc, off, true)
	return err
}

// NbPut is the non-blocking Put (ARMCI_NbPut): src must not change until the handle's Wait.
func (r *Runtime) NbPut(ctx context.Context, src []byte, seg *Segment, proc, off int) (*Handle, error) {
	return r.contiguous(ctx, xfer{kind: kPut}, src, seg, proc, off, false)
}

// NbGet is the non-blocking Get (ARMCI_NbGet): dst holds the data after the handle's Wait.
func (r *Runtime) NbGet(ctx context.Context, seg *Segment, proc, off int, dst []byte) (*Handle, error) {
	return r.contiguous(ctx, xfer{kind: kGet}, dst, seg, proc, off, false)
}

// NbAcc is the non-blocking Acc (ARMCI_NbAcc).
func (r *Runtime) NbAcc(ctx context.Context, typ AccType, scale complex128, src []byte, seg *Segment, proc, off int) (*Handle, error) {
	return r.contiguous(ctx, xfer{kind: kAcc, typ: typ, scale: scale}, src, seg, proc, off, false)
}

// PutS is the strided Put (ARMCI_PutS): count[0] contiguous bytes, repeated count[i] times at
// byte strides srcStride[i-1] in src and dstStride[i-1] in the target, for len(count)-1 ≤ 8
// stride levels, starting at byte offset off of rank proc's part. Errors additionally: ErrStride.
func (r *Runtime) PutS(ctx context.Context, src []byte, srcStride []int, seg *Segment, proc, off int, dstStride []int, count []int) error {
	_, err := r.stridedXfer(ctx, xfer{kind: kPut}, src, srcStride, seg, proc, off, dstStride, count, true)
	return err
}

// GetS is the strided Get (ARMCI_GetS): the source is rank proc's part of seg at byte offset off
// with strides srcStride; the destination is dst with strides dstStride.
func (r *Runtime) GetS(ctx context.Context, seg *Segment, proc, off int, srcStride []int, dst []byte, dstStride []int, count []int) error {
	_, err := r.stridedXfer(ctx, xfer{kind: kGet}, dst, dstStride, seg, proc, off, srcStride, count, true)
	return err
}

// AccS is the strided Acc (ARMCI_AccS); count[0] must be a whole number of elements of typ.
func (r *Runtime) AccS(ctx context.Context, typ AccType, scale complex128, src []byte, srcStride []int, seg *Segment, proc, off int, dstStride []int, count []int) error {
	_, err := r.stridedXfer(ctx, xfer{kind: kAcc, typ: typ, scale: scale}, src, srcStride, seg, proc, off, dstStride, count, true)
	return err
}

// NbPutS is the non-blocking PutS (ARMCI_NbPutS).
func (r *Runtime) NbPutS(ctx context.Context, src []byte, srcStride []int, seg *Segment, proc, off int, dstStride []int, count []int) (*Handle, error) {
	return r.stridedXfer(ctx, xfer{kind: kPut}, src, srcStride, seg, proc, off, dstStride, count, false)
}

// NbGetS is the non-blocking GetS (ARMCI_NbGetS).
func (r *Runtime) NbGetS(ctx context.Context, seg *Segment, proc, off int, srcStride []int, dst []byte, dstStride []int, count []int) (*Handle, error) {
	return r.stridedXfer(ctx, xfer{kind: kGet}, dst, dstStride, seg, proc, off, srcStride, count, false)
}

// NbAccS is the non-blocking AccS (ARMCI_NbAccS).
func (r *Runtime) NbAccS(ctx context.Context, typ AccType, scale complex128, src []byte, srcStride []int, seg *Segment, proc, off int, dstStride []int, count []int) (*Handle, error) {
	return r.stridedXfer(ctx, xfer{kind: kAcc, typ: typ, scale: scale}, src, srcStride, seg, proc, off, dstStride, count, false)
}

// PutV is the vector Put (ARMCI_PutV): each Vec's Local bytes go to byte offset Vec.Off of rank
// proc's part of seg.
func (r *Runtime) PutV(ctx context.Context, vecs []Vec, seg *Segment, proc int) error {
	_, err := r.vector(ctx, xfer{kind: kPut}, vecs, seg, proc, true)
	return err
}

// GetV is the vector Get (ARMCI_GetV): each Vec's Local receives the bytes at Vec.Off.
func (r *Runtime) GetV(ctx context.Context, vecs []Vec, seg *Segment, proc int) error {
	_, err := r.vector(ctx, xfer{kind: kGet}, vecs, seg, proc, true)
	return err
}

// AccV is the vector Acc (ARMCI_AccV).
func (r *Runtime) AccV(ctx context.Context, typ AccType, scale complex128, vecs []Vec, seg *Segment, proc int) error {
	_, err := r.vector(ctx, xfer{kind: kAcc, typ: typ, scale: scale}, vecs, seg, proc, true)
	return err
}

// NbPutV, NbGetV and NbAccV are the non-blocking vector transfers (ARMCI_NbPutV, ...).
func (r *Runtime) NbPutV(ctx context.Context, vecs []Vec, seg *Segment, proc int) (*Handle, error) {
	return r.vector(ctx, xfer{kind: kPut}, vecs, seg, proc, false)
}

// NbGetV is the non-blocking GetV (ARMCI_NbGetV).
func (r *Runtime) NbGetV(ctx context.Context, vecs []Vec, seg *Segment, proc int) (*Handle, error) {
	return r.vector(ctx, xfer{kind: kGet}, vecs, seg, proc, false)
}

// NbAccV is the non-blocking AccV (ARMCI_NbAccV).
func (r *Runtime) NbAccV(ctx context.Context, typ AccType, scale complex128, vecs []Vec, seg *Segment, proc int) (*Handle, error) {
	return r.vector(ctx, xfer{kind: kAcc, typ: typ, scale: scale}, vecs, seg, proc, false)
}

// Dir is the direction of a transfer issued through Transfer: DirPut and DirAcc move local
// bytes to the target, DirGet moves the target's bytes into local.
type Dir uint8

const (
	DirPut Dir = iota + 1 // ARMCI_PutS
	DirGet                // ARMCI_GetS
	DirAcc                // ARMCI_AccS
)

// Transfer issues the strided transfer dir with ARMCI's descriptor in one call, for layers that
// choose the direction at run time (Global Arrays' patch operations): local with byte strides
// lstride is the origin side, byte offset off of rank proc's part with strides rstride the
// target side, count[0] contiguous bytes repeated count[i] times (len(count) = 1: contiguous).
// typ and scale are the accumulate's (DirAcc only). block selects the blocking form (then the
// handle is nil) or the non-blocking one (the handle of ARMCI_NbPutS and kin, nil when the
// transfer completed at issue). Errors: those of PutS, GetS and AccS, and ErrBadOp for an
// unknown dir.
func (r *Runtime) Transfer(ctx context.Context, dir Dir, typ AccType, scale complex128, local []byte, lstride []int, seg *Segment, proc, off int, rstride []int, count []int, block bool) (*Handle, error) {
	var x xfer
	switch dir {
	case DirPut:
		x = xfer{kind: kPut}
	case DirGet:
		x = xfer{kind: kGet}
	case DirAcc:
		x = xfer{kind: kAcc, typ: typ, scale: scale}
	default:
		return nil, fmt.Errorf("%w: transfer direction %d", ErrBadOp, dir)
	}
	if len(count) == 1 && count[0] == len(local) {
		return r.contiguous(ctx, x, local, seg, proc, off, block)
	}
	return r.stridedXfer(ctx, x, local, lstride, seg, proc, off, rstride, count, block)
}
