package rma

import (
	"context"
	"fmt"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/internal/accum"
	"github.com/goarmci/goarmci/internal/memcopy"
	"github.com/goarmci/goarmci/multirail"
)

// kind is the direction of a transfer.
type kind uint8

const (
	kPut kind = iota
	kGet
	kAcc
)

// xfer describes what a transfer does with each piece.
type xfer struct {
	kind  kind
	typ   AccType
	scale complex128
}

func (x xfer) String() string {
	return [...]string{"Put", "Get", "Acc"}[x.kind]
}

// piece is one contiguous part of a transfer: local bytes and the remote byte offset (relative
// to the operation's base offset).
type pieceFn func(emit func(local []byte, roff int) error) error

// checkAcc validates an accumulate's type and the alignment of its remote offsets.
func checkAcc(x xfer, offs ...int) error {
	if x.kind != kAcc {
		return nil
	}
	if x.typ.Size() == 0 {
		return fmt.Errorf("%w: accumulate of type %v", ErrType, x.typ)
	}
	for _, o := range offs {
		if o%x.typ.Align() != 0 {
			return fmt.Errorf("%w: %v accumulate at byte offset %d (needs %d-byte alignment)", ErrType, x.typ, o, x.typ.Align())
		}
	}
	return nil
}

// run issues a validated transfer to rank proc: pieces yields (local slice, remote offset) pairs
// already checked to lie inside seg's part of proc starting at off. Self transfers are done in
// place; others become one multirail request.
func (r *Runtime) run(ctx context.Context, x xfer, seg *Segment, pe *peer, off, extent int, pieces pieceFn, block bool) (*Handle, error) {
	raddr, rkey, err := seg.target(pe, off, extent)
	if err != nil {
		return nil, err
	}
	if pe.rank == r.rank {
		return nil, pieces(func(local []byte, roff int) error {
			return x.self(seg.local[off+roff:off+roff+len(local)], local)
		})
	}
	if pe.ch.Sync() {
		if v := seg.view(pe); v != nil && (x.kind != kAcc || v.Acc != nil) {
			// same node, mapped: each piece is a copy or an add, complete at issue (direct.go)
			return nil, pieces(func(local []byte, roff int) error {
				return x.direct(v, v.Mem[off+roff:off+roff+len(local)], local)
			})
		}
	}
	if block && pe.ch.Sync() {
		return nil, pieces(func(local []byte, roff int) error {
			return x.do(pe.ch, local, raddr+uint64(roff), rkey)
		})
	}
	n, req := r.begin(pe, block)
	ierr := pieces(func(local []byte, roff int) error {
		return x.post(ctx, pe.ch, req, local, raddr+uint64(roff), rkey)
	})
	return r.finish(ctx, n, req, ierr, block)
}

// contiguous issues a contiguous transfer of len(local) bytes at byte offset off of proc's part.
func (r *Runtime) contiguous(ctx context.Context, x xfer, local []byte, seg *Segment, proc, off int, block bool) (*Handle, error) {
	pe, err := r.conn(ctx, proc)
	if err != nil {
		return nil, err
	}
	if err := checkAcc(x, off, len(local)); err != nil {
		return nil, err
	}
	if x.kind == kAcc && len(local)%x.typ.Size() != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a whole number of %v", ErrType, len(local), x.typ)
	}
	raddr, rkey, err := seg.target(pe, off, len(local))
	if err != nil {
		return nil, err
	}
	if pe.rank == r.rank {
		return nil, x.self(seg.local[off:off+len(local)], local)
	}
	if pe.ch.Sync() {
		if v := seg.view(pe); v != nil && (x.kind != kAcc || v.Acc != nil) {
			// Same node, mapped: a copy into or out of the peer's part, or an add under the
			// region's accumulate lock, complete at issue (direct.go); a non-blocking one
			// returns no handle, as a self operation.
			return nil, x.direct(v, v.Mem[off:off+len(local)], local)
		}
	}
	if block && pe.ch.Sync() {
		// Shared memory: executed inside the post, no request or completion queue.
		return nil, x.do(pe.ch, local, raddr, rkey)
	}
	// The hot path: one work request, no closures.
	n, req := r.begin(pe, block)
	ierr := x.post(ctx, pe.ch, req, local, raddr, rkey)
	return r.finish(ctx, n, req, ierr, block)
}

// direct applies a transfer piece to dst, bytes of a same-node peer's part seen through the view
// v: a copy, or an accumulate holding the region's lock word (v.Acc), the one the provider's
// accumulate work requests into that region take, from this process or any other.
func (x xfer) direct(v *ibv.RemoteView, dst, local []byte) error {
	if x.kind != kAcc {
		return x.self(dst, local)
	}
	if err := accum.ApplyLocked(v.Acc, x.typ, dst, local, x.scale); err != nil {
		return fmt.Errorf("%w: %w", ErrType, err)
	}
	return nil
}

// self applies a transfer piece to this rank's own memory.
func (x xfer) self(dst, local []byte) error {
	switch x.kind {
	case kPut:
		memcopy.Copy(dst, local)
	case kGet:
		memcopy.Copy(local, dst)
	case kAcc:
		if err := accum.Apply(x.typ, dst, local, x.scale); err != nil {
			return fmt.Errorf("%w: %w", ErrType, err)
		}
	}
	return nil
}

// do executes one transfer piece synchronously on a Sync channel.
func (x xfer) do(ch *multirail.Channel, local []byte, raddr uint64, rkey uint32) error {
	wr := ibv.SendWR{LocalBuf: local, RemoteAddr: raddr, RKey: rkey}
	switch x.kind {
	case kPut:
		wr.Opcode = ibv.OpRDMAWrite
	case kGet:
		wr.Opcode = ibv.OpRDMARead
	default:
		wr.Opcode, wr.AccType, wr.Scale = ibv.OpAccumulate, x.typ, x.scale
	}
	if len(local) == 0 {
		return nil
	}
	if err := ch.Do(wr); err != nil {
		return fmt.Errorf("%w: %w", ErrTransport, err)
	}
	return nil
}

// post adds one transfer piece to req on channel ch.
func (x xfer) post(ctx context.Context, ch *multirail.Channel, req *multirail.Request, local []byte, raddr uint64, rkey uint32) error {
	var err error
	switch x.kind {
	case kPut:
		err = ch.Write(ctx, req, local, raddr, rkey)
	case kGet:
		err = ch.Read(ctx, req, local, raddr, rkey)
	default:
		err = ch.Accumulate(ctx, req, x.typ, x.scale, local, raddr, rkey)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrTransport, err)
	}
	return nil
}

// stridedXfer issues a strided transfer; lstride is the local side's strides, rstride the
// remote side's (ARMCI's src/dst strides, ordered by direction by the caller).
func (r *Runtime) stridedXfer(ctx context.Context, x xfer, local []byte, lstride []int, seg *Segment, proc, off int, rstride []int, count []int, block bool) (*Handle, error) {
	pe, err := r.conn(ctx, proc)
	if err != nil {
		return nil, err
	}
	st, err := checkStrided(count, lstride, rstride)
	if err != nil {
		return nil, err
	}
	if e := st.extent(st.srcStride); e > len(local) {
		return nil, fmt.Errorf("%w: strided %v needs %d local bytes, buffer has %d", ErrOutOfRange, x, e, len(local))
	}
	if x.kind == kAcc && !st.empty() {
		if err := checkAcc(x, append([]int{off, st.count[0]}, st.dstStride...)...); err != nil {
			return nil, err
		}
		if st.count[0]%x.typ.Size() != 0 {
			return nil, fmt.Errorf("%w: count[0] = %d bytes is not a whole number of %v", ErrType, st.count[0], x.typ)
		}
	}
	c0 := st.count[0]
	return r.run(ctx, x, seg, pe, off, st.extent(st.dstStride), func(emit func([]byte, int) error) error {
		return st.each(func(lo, ro int) error { return emit(local[lo:lo+c0], ro) })
	}, block)
}

// Vec is one element of a vector transfer (a row of ARMCI's armci_giov_t): a local buffer and
// the byte offset of its remote counterpart in the target's part of the segment.
type Vec struct {
	Local []byte
	Off   int
}

func (r *Runtime) vector(ctx context.Context, x xfer, vecs []Vec, seg *Segment, proc int, block bool) (*Handle, error) {
	pe, err := r.conn(ctx, proc)
	if err != nil {
		return nil, err
	}
	if len(vecs) == 0 {
		return nil, nil
	}
	lo, hi := vecs[0].Off, vecs[0].Off
	for i, v := range vecs {
		if v.Off < 0 {
			return nil, fmt.Errorf("%w: vector element %d at offset %d", ErrOutOfRange, i, v.Off)
		}
		if err := checkAcc(x, v.Off, len(v.Local)); err != nil {
			return nil, err
		}
		lo = min(lo, v.Off)
		hi = max(hi, v.Off+len(v.Local))
	}
	return r.run(ctx, x, seg, pe, lo, hi-lo, func(emit func([]byte, int) error) error {
		for _, v := range vecs {
			if len(v.Local) > 0 {
				if err := emit(v.Local, v.Off-lo); err != nil {
					return err
				}
			}
		}
		return nil
	}, block)
}
