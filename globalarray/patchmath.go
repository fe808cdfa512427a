package globalarray

import (
	"cmp"
	"context"
	"fmt"

	"github.com/goarmci/goarmci/rma"
)

// Patch math: GA's collective operations on patches ([GA]: NGA_Fill_patch, NGA_Zero_patch,
// NGA_Scale_patch, NGA_Copy_patch, NGA_Add_patch, NGA_Ddot_patch). Each is collective: every rank
// waits for the operations issued before (a barrier), then works on the part of the destination
// patch it owns — in place — fetching the matching elements of the source patches with Get,
// then a barrier makes the results visible. Source and destination patches have equal shapes
// (the same extent in every dimension); element (i0, ..., in-1) of one patch, relative to its lo,
// meets element (i0, ..., in-1) of the other. Where a destination array is also a source, its
// two patches must be the same region. Bad input (bounds, shapes, a destroyed array, arrays of
// different runtimes) is refused on every rank before anything changes.

// owned is the part [lo, hi] of a's patch that this rank's block holds, and false when it holds
// none of it.
func (a *Array[T]) owned(plo, phi []int) (lo, hi []int, ok bool) {
	n := len(plo)
	if len(a.local) == 0 {
		return nil, nil, false
	}
	lo, hi = make([]int, n), make([]int, n)
	for d := 0; d < n; d++ {
		lo[d], hi[d] = max(plo[d], a.lo[d]), min(phi[d], a.hi[d])
		if lo[d] > hi[d] {
			return nil, nil, false
		}
	}
	return lo, hi, true
}

// eachOwned calls fn for every element of the box [lo, hi] (inside this rank's block), in
// row-major order, with its index in a.local and its row-major index k within the box.
func (a *Array[T]) eachOwned(lo, hi []int, fn func(i, k int)) {
	n := len(lo)
	stride := make([]int, n) // element strides of the local block
	stride[n-1] = 1
	for d := n - 2; d >= 0; d-- {
		stride[d] = stride[d+1] * a.ld[d]
	}
	idx := append([]int(nil), lo...)
	base := 0
	for d := 0; d < n; d++ {
		base += (lo[d] - a.lo[d]) * stride[d]
	}
	for k := 0; ; k++ {
		fn(base, k)
		d := n - 1
		for ; d >= 0; d-- {
			if idx[d] < hi[d] {
				idx[d]++
				base += stride[d]
				break
			}
			base -= (idx[d] - lo[d]) * stride[d]
			idx[d] = lo[d]
		}
		if d < 0 {
			return
		}
	}
}

// checkPatchOf validates a patch of a and that it has the shape of the reference patch (ref nil:
// no reference).
func (a *Array[T]) checkPatchOf(call string, lo, hi, reflo, refhi []int) error {
	if a == nil {
		return fmt.Errorf("ga: %s: nil array: %w", call, ErrShape)
	}
	if err := a.alive(call); err != nil {
		return err
	}
	if err := a.d.CheckPatch(lo, hi); err != nil {
		return fmt.Errorf("ga: %s %q: %w", call, a.name, err)
	}
	if reflo == nil {
		return nil
	}
	if len(lo) != len(reflo) {
		return fmt.Errorf("ga: %s %q: a %d-dimensional patch against a %d-dimensional one: %w", call, a.name, len(lo), len(reflo), ErrShape)
	}
	for d := range lo {
		if hi[d]-lo[d] != refhi[d]-reflo[d] {
			return fmt.Errorf("ga: %s %q: patch extent %d in dimension %d, the other patch has %d: %w",
				call, a.name, hi[d]-lo[d]+1, d, refhi[d]-reflo[d]+1, ErrShape)
		}
	}
	return nil
}

// source fetches the elements of src's patch that meet the box [olo, ohi] of the destination
// patch starting at dlo, row-major with the box's shape.
func (src *Array[T]) source(ctx context.Context, slo []int, dlo, olo, ohi []int) ([]T, error) {
	n := len(olo)
	lo, hi := make([]int, n), make([]int, n)
	count := 1
	for d := 0; d < n; d++ {
		lo[d] = slo[d] + olo[d] - dlo[d]
		hi[d] = slo[d] + ohi[d] - dlo[d]
		count *= ohi[d] - olo[d] + 1
	}
	buf := make([]T, count)
	if err := src.Get(ctx, lo, hi, buf, nil); err != nil {
		return nil, err
	}
	return buf, nil
}

// patchOp runs fn on this rank's part of dst's patch [lo, hi] between two barriers (the
// collective frame of every patch operation), once per block of this rank the patch meets, with
// v the block's view (a itself when the rank holds one block; see parts); fn's error is returned
// after the second barrier.
func (a *Array[T]) patchOp(ctx context.Context, call string, lo, hi []int, fn func(v *Array[T], olo, ohi []int) error) error {
	if err := a.pg.barrier(ctx); err != nil {
		return fmt.Errorf("ga: %s %q: %w", call, a.name, err)
	}
	var ferr error
	for _, v := range a.parts {
		if olo, ohi, ok := v.owned(lo, hi); ok && ferr == nil {
			ferr = fn(v, olo, ohi)
		}
	}
	// the closing barrier even after fn failed: the call stays collective on every rank
	if err := a.pg.barrier(ctx); err != nil && ferr == nil {
		ferr = err
	}
	if ferr != nil {
		return fmt.Errorf("ga: %s %q: %w", call, a.name, ferr)
	}
	return nil
}

// checkTernary validates the operands of c[clo..chi] = a[alo..ahi] op b[blo..bhi]: live arrays
// of one runtime, patches inside them, the sources' of the destination's shape.
func checkTernary[T Elem](call string, a *Array[T], alo, ahi []int, b *Array[T], blo, bhi []int, c *Array[T], clo, chi []int) error {
	if err := c.checkPatchOf(call, clo, chi, nil, nil); err != nil {
		return err
	}
	if err := a.checkPatchOf(call, alo, ahi, clo, chi); err != nil {
		return err
	}
	if err := b.checkPatchOf(call, blo, bhi, clo, chi); err != nil {
		return err
	}
	if !a.pg.same(c.pg) || !b.pg.same(c.pg) {
		return fmt.Errorf("ga: %s: arrays of different runtimes or process groups: %w", call, ErrShape)
	}
	return nil
}

// inPlace replaces every element x of the patch [lo, hi] by f(x), each rank on the part it owns
// (the patch checked first, on every rank). Collective.
func (a *Array[T]) inPlace(ctx context.Context, call string, lo, hi []int, f func(x T) T) error {
	if err := a.checkPatchOf(call, lo, hi, nil, nil); err != nil {
		return err
	}
	return a.patchOp(ctx, call, lo, hi, func(v *Array[T], olo, ohi []int) error {
		v.eachOwned(olo, ohi, func(i, _ int) { v.local[i] = f(v.local[i]) })
		return nil
	})
}

// FillPatch sets every element of the patch [lo, hi] to v (NGA_Fill_patch). Collective.
//
// Errors: ErrShape, ErrOutOfBounds, ErrDestroyed (nothing changed); rma errors of the barriers.
func (a *Array[T]) FillPatch(ctx context.Context, lo, hi []int, v T) error {
	return a.inPlace(ctx, "NGA_Fill_patch", lo, hi, func(T) T { return v })
}

// ZeroPatch sets every element of the patch [lo, hi] to 0 (NGA_Zero_patch). Collective.
//
// Errors: as FillPatch.
func (a *Array[T]) ZeroPatch(ctx context.Context, lo, hi []int) error {
	return a.inPlace(ctx, "NGA_Zero_patch", lo, hi, func(T) T { var zero T; return zero })
}

// ScalePatch multiplies every element of the patch [lo, hi] by s (NGA_Scale_patch). Collective.
//
// Errors: as FillPatch.
func (a *Array[T]) ScalePatch(ctx context.Context, lo, hi []int, s T) error {
	return a.inPlace(ctx, "NGA_Scale_patch", lo, hi, func(x T) T { return x * s })
}

// CopyPatch copies a's patch [alo, ahi] into b's patch [blo, bhi] (NGA_Copy_patch with trans
// 'N'). The patches have equal shapes; a and b may be distributed differently, and may be the
// same array with the same patch. Collective.
//
// Errors: ErrShape (different patch shapes, runtimes), ErrOutOfBounds, ErrDestroyed (nothing
// changed); rma errors.
func CopyPatch[T Elem](ctx context.Context, a *Array[T], alo, ahi []int, b *Array[T], blo, bhi []int) error {
	const call = "NGA_Copy_patch"
	if err := a.checkPatchOf(call, alo, ahi, nil, nil); err != nil {
		return err
	}
	if err := b.checkPatchOf(call, blo, bhi, alo, ahi); err != nil {
		return err
	}
	if !a.pg.same(b.pg) {
		return fmt.Errorf("ga: %s: %q and %q live on different runtimes or process groups: %w", call, a.name, b.name, ErrShape)
	}
	return b.patchOp(ctx, call, blo, bhi, func(v *Array[T], olo, ohi []int) error {
		src, err := a.source(ctx, alo, blo, olo, ohi)
		if err != nil {
			return err
		}
		v.eachOwned(olo, ohi, func(i, k int) { v.local[i] = src[k] })
		return nil
	})
}

// AddPatch computes c[clo..chi] = alpha·a[alo..ahi] + beta·b[blo..bhi] element-wise
// (NGA_Add_patch). The three patches have equal shapes; c may be a or b with the same patch.
// Collective.
//
// Errors: as CopyPatch.
func AddPatch[T Elem](ctx context.Context, alpha T, a *Array[T], alo, ahi []int, beta T, b *Array[T], blo, bhi []int, c *Array[T], clo, chi []int) error {
	return ternary(ctx, "NGA_Add_patch", a, alo, ahi, b, blo, bhi, c, clo, chi, func(v *Array[T], olo, ohi []int, av, bv []T) error {
		v.eachOwned(olo, ohi, func(i, k int) { v.local[i] = alpha*av[k] + beta*bv[k] })
		return nil
	})
}

// ternary runs c[clo..chi] = a[alo..ahi] op b[blo..bhi] (checkTernary's operands): each rank
// fetches the source elements that meet its part [olo, ohi] of c's patch, row-major with the
// part's shape, and fn stores the results into c's block.
func ternary[T Elem](ctx context.Context, call string, a *Array[T], alo, ahi []int, b *Array[T], blo, bhi []int, c *Array[T], clo, chi []int,
	fn func(v *Array[T], olo, ohi []int, av, bv []T) error) error {
	if err := checkTernary(call, a, alo, ahi, b, blo, bhi, c, clo, chi); err != nil {
		return err
	}
	return c.patchOp(ctx, call, clo, chi, func(v *Array[T], olo, ohi []int) error {
		av, err := a.source(ctx, alo, clo, olo, ohi)
		if err != nil {
			return err
		}
		bv, err := b.source(ctx, blo, clo, olo, ohi)
		if err != nil {
			return err
		}
		return fn(v, olo, ohi, av, bv)
	})
}

// DotPatch returns Σ a[i]·b[i] over the patches a[alo..ahi] and b[blo..bhi] of equal shapes
// (NGA_Ddot_patch, NGA_Idot_patch, NGA_Zdot_patch with trans 'N'; complex values are not
// conjugated), the same on every rank: each rank sums over the part of a's patch it owns, then
// the partial sums are added (GA_Dgop). Collective.
//
// Errors: as CopyPatch.
func DotPatch[T Elem](ctx context.Context, a *Array[T], alo, ahi []int, b *Array[T], blo, bhi []int) (T, error) {
	const call = "NGA_Ddot_patch"
	var sum T
	if err := a.checkPatchOf(call, alo, ahi, nil, nil); err != nil {
		return sum, err
	}
	if err := b.checkPatchOf(call, blo, bhi, alo, ahi); err != nil {
		return sum, err
	}
	if !a.pg.same(b.pg) {
		return sum, fmt.Errorf("ga: %s: %q and %q live on different runtimes or process groups: %w", call, a.name, b.name, ErrShape)
	}
	if err := a.pg.barrier(ctx); err != nil {
		return sum, fmt.Errorf("ga: %s: %w", call, err)
	}
	var serr error
	for _, v := range a.parts {
		if olo, ohi, ok := v.owned(alo, ahi); ok && serr == nil {
			var bv []T
			if bv, serr = b.source(ctx, blo, alo, olo, ohi); serr == nil {
				v.eachOwned(olo, ohi, func(i, k int) { sum += v.local[i] * bv[k] })
			}
		}
	}
	v := []T{sum}
	err := a.pg.allReduce(ctx, a.typ, rma.ReduceSum, asBytes(v)) // collective even after a failed Get
	if err = cmp.Or(serr, err); err != nil {
		return 0, fmt.Errorf("ga: %s: %w", call, err)
	}
	return v[0], nil
}
