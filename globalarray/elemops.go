package globalarray

import (
	"context"
	"fmt"
	"math"
	"math/cmplx"

	"github.com/goarmci/goarmci/rma"
)

// Element-wise operations on patches ([GA]: GA_Abs_value_patch, GA_Add_constant_patch,
// GA_Elem_multiply_patch, GA_Elem_divide_patch, GA_Elem_maximum_patch, GA_Elem_minimum_patch),
// collective like the patch math of patchmath.go: each rank works on the part of the destination
// patch it owns. Comparisons (maximum, minimum) are defined for integer and real elements only.

// ordered is an element type with an order.
type ordered interface {
	int32 | int64 | float32 | float64
}

// ownedIndexes lists, row-major, the indexes into a.local of the part of the patch [lo, hi]
// this rank owns, with each one's row-major index within that part (the same k as source uses).
func (a *Array[T]) ownedIndexes(olo, ohi []int) []int {
	var idx []int
	a.eachOwned(olo, ohi, func(i, _ int) { idx = append(idx, i) })
	return idx
}

// AbsPatch replaces every element of the patch [lo, hi] by its absolute value
// (GA_Abs_value_patch; a complex element becomes its modulus, imaginary part 0). Collective.
//
// Errors: ErrShape, ErrOutOfBounds, ErrDestroyed (nothing changed); rma errors of the barriers.
func (a *Array[T]) AbsPatch(ctx context.Context, lo, hi []int) error {
	const call = "GA_Abs_value_patch"
	if err := a.checkPatchOf(call, lo, hi, nil, nil); err != nil {
		return err
	}
	return a.patchOp(ctx, call, lo, hi, func(v *Array[T], olo, ohi []int) error {
		idx := v.ownedIndexes(olo, ohi)
		switch s := any(v.local).(type) {
		case []int32:
			absReal(s, idx)
		case []int64:
			absReal(s, idx)
		case []float32:
			absReal(s, idx)
		case []float64:
			absReal(s, idx)
		case []complex64:
			for _, i := range idx {
				s[i] = complex(float32(cmplx.Abs(complex128(s[i]))), 0)
			}
		case []complex128:
			for _, i := range idx {
				s[i] = complex(cmplx.Abs(s[i]), 0)
			}
		}
		return nil
	})
}

func absReal[R ordered](s []R, idx []int) {
	for _, i := range idx {
		if s[i] < 0 {
			s[i] = -s[i]
		}
	}
}

// AddConstantPatch adds v to every element of the patch [lo, hi] (GA_Add_constant_patch).
// Collective.
//
// Errors: as AbsPatch.
func (a *Array[T]) AddConstantPatch(ctx context.Context, lo, hi []int, v T) error {
	return a.inPlace(ctx, "GA_Add_constant_patch", lo, hi, func(x T) T { return x + v })
}

// ElemOp is an element-wise binary operation of ElemPatch.
type ElemOp uint8

const (
	ElemMultiply ElemOp = iota + 1 // GA_Elem_multiply_patch: c = a·b
	ElemDivide                     // GA_Elem_divide_patch: c = a/b (an integer divisor 0 is ErrDivideByZero)
	ElemMaximum                    // GA_Elem_maximum_patch: c = max(a, b), integer and real types
	ElemMinimum                    // GA_Elem_minimum_patch: c = min(a, b), integer and real types
)

var elemNames = [...]string{ElemMultiply: "GA_Elem_multiply_patch", ElemDivide: "GA_Elem_divide_patch",
	ElemMaximum: "GA_Elem_maximum_patch", ElemMinimum: "GA_Elem_minimum_patch"}

// ElemPatch computes c[clo..chi] = a[alo..ahi] op b[blo..bhi] element-wise (GA_Elem_*_patch).
// The patches have equal shapes; c may be a or b with the same patch. Collective.
//
// Errors: ErrType (maximum or minimum of complex elements; an unknown op), ErrDivideByZero (an
// integer division by 0: the ranks that found none still store their part; the caller's data is
// then partly updated, as GA's would be), and those of CopyPatch.
func ElemPatch[T Elem](ctx context.Context, op ElemOp, a *Array[T], alo, ahi []int, b *Array[T], blo, bhi []int, c *Array[T], clo, chi []int) error {
	if op < ElemMultiply || op > ElemMinimum {
		return fmt.Errorf("ga: element operation %d: %w", op, ErrType)
	}
	call := elemNames[op]
	if (op == ElemMaximum || op == ElemMinimum) && c != nil && isComplex(c.typ) {
		return fmt.Errorf("ga: %s of %v elements: %w", call, c.typ, ErrType)
	}
	return ternary(ctx, call, a, alo, ahi, b, blo, bhi, c, clo, chi, func(v *Array[T], olo, ohi []int, av, bv []T) error {
		idx := v.ownedIndexes(olo, ohi)
		switch s := any(v.local).(type) {
		case []int32:
			return elemInt(op, s, idx, any(av).([]int32), any(bv).([]int32))
		case []int64:
			return elemInt(op, s, idx, any(av).([]int64), any(bv).([]int64))
		case []float32:
			elemApply(op, s, idx, any(av).([]float32), any(bv).([]float32))
		case []float64:
			elemApply(op, s, idx, any(av).([]float64), any(bv).([]float64))
		default: // complex: multiply or divide
			for k, i := range idx {
				if op == ElemMultiply {
					v.local[i] = av[k] * bv[k]
				} else {
					v.local[i] = av[k] / bv[k]
				}
			}
		}
		return nil
	})
}

// elemApply sets s[idx[k]] = av[k] op bv[k] (max and min as the builtins: for floats those of
// math.Max and math.Min, NaN and signed zeros included).
func elemApply[R ordered](op ElemOp, s []R, idx []int, av, bv []R) {
	for k, i := range idx {
		switch op {
		case ElemMultiply:
			s[i] = av[k] * bv[k]
		case ElemDivide:
			s[i] = av[k] / bv[k]
		case ElemMaximum:
			s[i] = max(av[k], bv[k])
		default:
			s[i] = min(av[k], bv[k])
		}
	}
}

// elemInt is elemApply for integers: a divisor 0 anywhere in this rank's part is refused before
// any element of it changes.
func elemInt[R int32 | int64](op ElemOp, s []R, idx []int, av, bv []R) error {
	if op == ElemDivide {
		for k := range idx {
			if bv[k] == 0 {
				return fmt.Errorf("%w: element %d of the divisor patch", ErrDivideByZero, k)
			}
		}
	}
	elemApply(op, s, idx, av, bv)
	return nil
}

// SelectElem returns the largest (max true) or smallest element of the patch [lo, hi] and its
// subscript (NGA_Select_elem with "max" or "min"), the same on every rank; of equal elements, the
// first in row-major order. Integer and real types. Collective.
//
// Errors: ErrType for complex elements, those of AbsPatch.
func SelectElem[T ordered](ctx context.Context, a *Array[T], lo, hi []int, max bool) (T, []int, error) {
	const call = "NGA_Select_elem"
	var best T
	if err := a.checkPatchOf(call, lo, hi, nil, nil); err != nil {
		return best, nil, err
	}
	if err := a.pg.barrier(ctx); err != nil {
		return best, nil, fmt.Errorf("ga: %s: %w", call, err)
	}
	// (value, row-major position) of my candidate; a rank owning none of the patch offers the
	// worst value at the last position
	n := len(lo)
	dims := a.d.Dims()
	pos := math.MaxInt64
	found := false
	for _, part := range a.parts {
		olo, ohi, ok := part.owned(lo, hi)
		if !ok {
			continue
		}
		sub := append([]int(nil), olo...)
		part.eachOwned(olo, ohi, func(i, _ int) {
			v := part.local[i]
			p := 0
			for d := 0; d < n; d++ {
				p = p*dims[d] + sub[d]
			}
			if !found || (max && v > best) || (!max && v < best) || (v == best && p < pos) {
				best, pos, found = v, p, true
			}
			for d := n - 1; d >= 0; d-- { // next subscript of the box, row-major
				if sub[d] < ohi[d] {
					sub[d]++
					break
				}
				sub[d] = olo[d]
			}
		})
	}
	// everyone learns every candidate: two all-reductions of rank-indexed slots
	np := a.pg.Nnodes()
	vals := make([]float64, 2*np)
	if found {
		vals[2*a.me] = 1
		vals[2*a.me+1] = float64(pos)
	}
	cand := make([]T, np)
	cand[a.me] = best
	if err := gopOn(ctx, a.pg, "GA_Gop", rma.ReduceSum, vals); err != nil {
		return best, nil, fmt.Errorf("ga: %s: %w", call, err)
	}
	if err := gopOn(ctx, a.pg, "GA_Gop", rma.ReduceSum, cand); err != nil {
		return best, nil, fmt.Errorf("ga: %s: %w", call, err)
	}
	found = false
	for r := 0; r < np; r++ {
		if vals[2*r] == 0 {
			continue
		}
		v, p := cand[r], int(vals[2*r+1])
		if !found || (max && v > best) || (!max && v < best) || (v == best && p < pos) {
			best, pos, found = v, p, true
		}
	}
	sub := make([]int, n)
	for d := n - 1; d >= 0; d-- {
		sub[d] = pos % dims[d]
		pos /= dims[d]
	}
	return best, sub, nil
}
