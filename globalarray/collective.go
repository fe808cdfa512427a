package globalarray

import (
	"context"
	"fmt"
	"slices"

	"github.com/goarmci/goarmci/rma"
)

// Sync completes every rank's outstanding operations at their targets and synchronizes all
// ranks (GA_Sync = ARMCI_AllFence + barrier). Collective.
//
// Errors: those of rma.Barrier (context, transport).
func Sync(ctx context.Context, rt *rma.Runtime) error {
	if err := rt.Barrier(ctx); err != nil {
		return fmt.Errorf("ga: GA_Sync: %w", err)
	}
	return nil
}

// Sync is GA_Sync on the array's runtime, or GA_Pgroup_sync on its group for an array of a
// process group (collective over the members).
func (a *Array[T]) Sync(ctx context.Context) error {
	if a.pg.g != nil {
		return a.pg.Sync(ctx)
	}
	return Sync(ctx, a.rt)
}

// local runs fn on this rank's block between two syncs (GA's element-wise collectives).
func (a *Array[T]) elementwise(ctx context.Context, call string, fn func(data []T)) error {
	if err := a.alive(call); err != nil {
		return err
	}
	if err := a.pg.barrier(ctx); err != nil {
		return fmt.Errorf("ga: %s %q: %w", call, a.name, err)
	}
	a.interior(func(row []T, _ int) { fn(row) })
	if err := a.pg.barrier(ctx); err != nil {
		return fmt.Errorf("ga: %s %q: %w", call, a.name, err)
	}
	return nil
}

// Fill sets every element to v (GA_Fill). Collective.
//
// Errors: ErrDestroyed; rma errors of the syncs.
func (a *Array[T]) Fill(ctx context.Context, v T) error {
	return a.elementwise(ctx, "GA_Fill", func(data []T) {
		for i := range data {
			data[i] = v
		}
	})
}

// Zero sets every element to 0 (GA_Zero). Collective.
//
// Errors: ErrDestroyed; rma errors of the syncs.
func (a *Array[T]) Zero(ctx context.Context) error {
	return a.elementwise(ctx, "GA_Zero", func(data []T) { clear(data) })
}

// Scale multiplies every element by s (GA_Scale). Collective.
//
// Errors: ErrDestroyed; rma errors of the syncs.
func (a *Array[T]) Scale(ctx context.Context, s T) error {
	return a.elementwise(ctx, "GA_Scale", func(data []T) {
		for i := range data {
			data[i] *= s
		}
	})
}

// sameShape checks that b can be combined element-wise with a.
func (a *Array[T]) sameShape(call string, b *Array[T]) error {
	if b == nil {
		return fmt.Errorf("ga: %s %q: nil array: %w", call, a.name, ErrShape)
	}
	if err := a.alive(call); err != nil {
		return err
	}
	if err := b.alive(call); err != nil {
		return err
	}
	if !slices.Equal(a.d.Dims(), b.d.Dims()) {
		return fmt.Errorf("ga: %s: %q has dims %v, %q has %v: %w", call, a.name, a.d.Dims(), b.name, b.d.Dims(), ErrShape)
	}
	if !a.pg.same(b.pg) {
		return fmt.Errorf("ga: %s: %q and %q live on different runtimes or process groups: %w", call, a.name, b.name, ErrShape)
	}
	return nil
}

// alignedTo returns the elements of a that correspond to like's local storage, laid out as it
// (like's block packed row-major; all of a block-cyclic or tiled rank's blocks in storage
// order): a's own local storage when both have the same distribution (a copy when a has ghost
// cells), else a copy fetched with Get, one per block of like (like's blocks lie inside a's
// bounds, as the shapes are equal).
func (a *Array[T]) alignedTo(ctx context.Context, like *Array[T]) ([]T, error) {
	n := like.d.LocalElems(like.me)
	if n == 0 {
		return nil, nil
	}
	if a.d.Equal(like.d) {
		return a.packedLocal(), nil
	}
	buf := make([]T, n)
	if !like.d.MultiBlock() {
		return buf, a.Get(ctx, like.lo, like.hi, buf, nil)
	}
	return buf, a.getInto(ctx, like, buf)
}

// Copy copies every element of a into dst (GA_Copy(g_a, g_b)); the arrays must have the same
// shape but may be distributed differently. Collective.
//
// Errors: ErrShape (different shapes), ErrDestroyed; rma errors.
func (a *Array[T]) Copy(ctx context.Context, dst *Array[T]) error {
	const call = "GA_Copy"
	if err := a.sameShape(call, dst); err != nil {
		return err
	}
	if err := a.pg.barrier(ctx); err != nil {
		return fmt.Errorf("ga: %s: %w", call, err)
	}
	if a != dst {
		src, err := a.alignedTo(ctx, dst)
		if err != nil {
			return fmt.Errorf("ga: %s: %w", call, err)
		}
		dst.interior(func(row []T, k int) { copy(row, src[k:]) })
	}
	if err := a.pg.barrier(ctx); err != nil {
		return fmt.Errorf("ga: %s: %w", call, err)
	}
	return nil
}

// Dot returns the sum over all elements of a·b, on every rank (GA_Ddot, GA_Idot, GA_Ldot,
// GA_Fdot; for complex arrays GA_Zdot, without conjugation). The arrays must have the same
// shape but may be distributed differently. Collective.
//
// Errors: ErrShape, ErrDestroyed; rma errors.
func (a *Array[T]) Dot(ctx context.Context, b *Array[T]) (T, error) {
	const call = "GA_Ddot"
	var sum T
	if err := a.sameShape(call, b); err != nil {
		return sum, err
	}
	if err := a.pg.barrier(ctx); err != nil {
		return sum, fmt.Errorf("ga: %s: %w", call, err)
	}
	av, err := a.alignedTo(ctx, b)
	if err != nil {
		return sum, fmt.Errorf("ga: %s: %w", call, err)
	}
	b.interior(func(row []T, k int) {
		for i, x := range row {
			sum += av[k+i] * x
		}
	})
	v := []T{sum}
	if err := a.pg.allReduce(ctx, a.typ, rma.ReduceSum, asBytes(v)); err != nil {
		return 0, fmt.Errorf("ga: %s: %w", call, err)
	}
	return v[0], nil
}

// Add computes c = alpha·a + beta·b element-wise (GA_Add(alpha, g_a, beta, g_b, g_c)). The
// three arrays must have the same shape; c may be a or b; they may be distributed differently.
// Collective.
//
// Errors: ErrShape, ErrDestroyed; rma errors.
func Add[T Elem](ctx context.Context, alpha T, a *Array[T], beta T, b *Array[T], c *Array[T]) error {
	const call = "GA_Add"
	if a == nil || b == nil || c == nil {
		return fmt.Errorf("ga: %s: nil array: %w", call, ErrShape)
	}
	if err := c.sameShape(call, a); err != nil {
		return err
	}
	if err := c.sameShape(call, b); err != nil {
		return err
	}
	if err := c.pg.barrier(ctx); err != nil {
		return fmt.Errorf("ga: %s: %w", call, err)
	}
	// Only c is written; a source with c's distribution is read locally, any other is fetched,
	// and a fetched source cannot be c, so no rank writes what another still reads.
	av, err := a.alignedTo(ctx, c)
	if err != nil {
		return fmt.Errorf("ga: %s: %w", call, err)
	}
	bv, err := b.alignedTo(ctx, c)
	if err != nil {
		return fmt.Errorf("ga: %s: %w", call, err)
	}
	c.interior(func(row []T, k int) {
		for i := range row {
			row[i] = alpha*av[k+i] + beta*bv[k+i]
		}
	})
	if err := c.pg.barrier(ctx); err != nil {
		return fmt.Errorf("ga: %s: %w", call, err)
	}
	return nil
}
