package globalarray

import (
	"context"
	"fmt"

	"github.com/goarmci/goarmci/rma"
)

// GopSum replaces vals on every rank by their element-wise sum over all ranks (GA_Dgop,
// GA_Igop, GA_Lgop, GA_Fgop and GA_Zgop with op "+"). Collective.
//
// Errors: those of rma.AllReduce (context, transport).
func GopSum[T Elem](ctx context.Context, rt *rma.Runtime, vals []T) error {
	return gop(ctx, rt, rma.ReduceSum, vals)
}

// GopMax replaces vals on every rank by their element-wise maximum over all ranks (GA_Dgop,
// GA_Igop with op "max"). Collective.
//
// Errors: ErrType for complex elements; those of rma.AllReduce.
func GopMax[T Elem](ctx context.Context, rt *rma.Runtime, vals []T) error {
	return gop(ctx, rt, rma.ReduceMax, vals)
}

// GopMin replaces vals on every rank by their element-wise minimum over all ranks (GA_Dgop,
// GA_Igop with op "min"). Collective.
//
// Errors: ErrType for complex elements; those of rma.AllReduce.
func GopMin[T Elem](ctx context.Context, rt *rma.Runtime, vals []T) error {
	return gop(ctx, rt, rma.ReduceMin, vals)
}

// GopProd replaces vals on every rank by their element-wise product over all ranks (GA_Dgop,
// GA_Igop, GA_Zgop with op "*"). Collective.
//
// Errors: those of rma.AllReduce.
func GopProd[T Elem](ctx context.Context, rt *rma.Runtime, vals []T) error {
	return gop(ctx, rt, rma.ReduceProd, vals)
}

// GopAbsMax replaces vals on every rank by the largest magnitude of each element over all ranks,
// as a magnitude (GA_Dgop, GA_Igop with op "absmax"). Collective.
//
// Errors: ErrType for complex elements; those of rma.AllReduce.
func GopAbsMax[T Elem](ctx context.Context, rt *rma.Runtime, vals []T) error {
	return gop(ctx, rt, rma.ReduceAbsMax, vals)
}

// GopAbsMin replaces vals on every rank by the smallest magnitude of each element over all
// ranks, as a magnitude (GA_Dgop, GA_Igop with op "absmin"). Collective.
//
// Errors: ErrType for complex elements; those of rma.AllReduce.
func GopAbsMin[T Elem](ctx context.Context, rt *rma.Runtime, vals []T) error {
	return gop(ctx, rt, rma.ReduceAbsMin, vals)
}

func gop[T Elem](ctx context.Context, rt *rma.Runtime, op rma.ReduceOp, vals []T) error {
	typ := accTypeOf[T]()
	if op != rma.ReduceSum && op != rma.ReduceProd && isComplex(typ) {
		return fmt.Errorf("ga: GA_Gop %v of %v: %w", op, typ, ErrType)
	}
	if err := rt.AllReduce(ctx, typ, op, asBytes(vals)); err != nil {
		return fmt.Errorf("ga: GA_Gop %v: %w", op, err)
	}
	return nil
}

// Brdcst copies buf of rank root into buf of every other rank (GA_Brdcst). Collective; buf has
// the same length on every rank.
//
// Errors: those of rma.Broadcast (bad root, context, transport).
func Brdcst[T Elem](ctx context.Context, rt *rma.Runtime, root int, buf []T) error {
	if err := rt.Broadcast(ctx, root, asBytes(buf)); err != nil {
		return fmt.Errorf("ga: GA_Brdcst from %d: %w", root, err)
	}
	return nil
}

// AllGather gathers the ranks' parts of buf into every rank's buf: rank p's part is
// buf[offs[p]:offs[p+1]], offsets in elements (Size+1 of them, ascending from 0 to len(buf)).
// GA has no such call — its programs call MPI_Allgatherv beside it — so this is
// rma.AllGather on elements. Collective; every rank passes the same offs.
//
// Errors: those of rma.AllGather (rma.ErrOutOfRange: offs do not describe buf).
func AllGather[T Elem](ctx context.Context, rt *rma.Runtime, buf []T, offs []int) error {
	sz := accTypeOf[T]().Size()
	b := make([]int, len(offs))
	for i, o := range offs {
		b[i] = o * sz
	}
	if err := rt.AllGather(ctx, asBytes(buf), b); err != nil {
		return fmt.Errorf("ga: allgather: %w", err)
	}
	return nil
}

// gopOn is gop among the members of pg (call names the GA call in errors).
func gopOn[T Elem](ctx context.Context, pg *Pgroup, call string, op rma.ReduceOp, vals []T) error {
	typ := accTypeOf[T]()
	if op != rma.ReduceSum && op != rma.ReduceProd && isComplex(typ) {
		return fmt.Errorf("ga: %s %v of %v: %w", call, op, typ, ErrType)
	}
	if err := pg.allReduce(ctx, typ, op, asBytes(vals)); err != nil {
		return fmt.Errorf("ga: %s %v: %w", call, op, err)
	}
	return nil
}
