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

// transfer runs the transfer x of shape sh (or fails with shErr, the error of building it) to
// rank proc's part of seg: the rank, the shape and the bounds are checked before any byte
// moves, then the peer's route runs it (route.go).
func (r *Runtime) transfer(ctx context.Context, x xfer, seg *Segment, proc int, sh shape, shErr error, block bool) (*Handle, error) {
	pe, err := r.peer(ctx, proc)
	if err != nil {
		return nil, err
	}
	if shErr != nil {
		return nil, shErr
	}
	if err := seg.bounds(pe.rank, sh.off, sh.extent); err != nil {
		return nil, err
	}
	if r.stats && seg != r.sys {
		pe.count(x, sh.bytes())
	}
	return pe.route.xfer(ctx, x, &sh, seg, block)
}

// contiguous issues a contiguous transfer of len(local) bytes at byte offset off of proc's part
// (the hot path: checked as transfer does, run without building a shape).
func (r *Runtime) contiguous(ctx context.Context, x xfer, local []byte, seg *Segment, proc, off int, block bool) (*Handle, error) {
	if x.kind != kAcc {
		if mem := r.mappedPart(seg, proc); mem != nil && off >= 0 && off <= len(mem) && len(local) <= len(mem)-off {
			return nil, x.self(mem[off:off+len(local)], local)
		}
	}
	pe, err := r.peer(ctx, proc)
	if err != nil {
		return nil, err
	}
	if err := x.checkPiece(off, len(local)); err != nil {
		return nil, err
	}
	if err := seg.bounds(proc, off, len(local)); err != nil {
		return nil, err
	}
	if r.stats && seg != r.sys {
		pe.count(x, len(local))
	}
	return pe.route.contig(ctx, x, local, seg, off, block)
}

// direct applies a transfer piece to dst, bytes of a same-node peer's part seen through the view
// v: a copy, or an accumulate holding the region's lock word (v.Acc), the one the provider's
// accumulate work requests into that region take, from this process or any other.
func (x xfer) direct(v *ibv.RemoteView, dst, local []byte) error {
	if x.kind != kAcc {
		return x.self(dst, local)
	}
	if err := accum.ApplyLocked(v.Acc, accum.Type(x.typ), dst, local, x.scale); err != nil {
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
		if err := accum.Apply(accum.Type(x.typ), dst, local, x.scale); err != nil {
			return fmt.Errorf("%w: %w", ErrType, err)
		}
	}
	return nil
}

// do executes one transfer piece as a work request on a node peer's queue pair, complete when it
// returns.
func (x xfer) do(qp *ibv.QP, local []byte, raddr uint64, rkey uint32) error {
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
	return postSync(qp, wr)
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
	sh, err := stridedShape(x, local, lstride, off, rstride, count)
	return r.transfer(ctx, x, seg, proc, sh, err, block)
}

// Vec is one element of a vector transfer (a row of ARMCI's armci_giov_t): a local buffer and
// the byte offset of its remote counterpart in the target's part of the segment.
type Vec struct {
	Local []byte
	Off   int
}

func (r *Runtime) vector(ctx context.Context, x xfer, vecs []Vec, seg *Segment, proc int, block bool) (*Handle, error) {
	sh, err := vectorShape(x, vecs)
	return r.transfer(ctx, x, seg, proc, sh, err, block)
}
