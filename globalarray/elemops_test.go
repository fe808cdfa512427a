package globalarray

import (
	"context"
	"errors"
	"math/cmplx"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
)

// signed gives element i a value of both signs, exact in every type: (i−20)·(−1)^i.
func signed[T Elem](i int) T {
	v := i - 20
	if i%2 == 1 {
		v = -v
	}
	return val[T](v)
}

// elemOps checks AbsPatch, AddConstantPatch and ElemPatch (multiply, divide, and for ordered types
// maximum and minimum) against a serial model, c on a third distribution.
func elemOps[T Elem](ctx context.Context, t testing.TB, rt *rma.Runtime, ordered bool) {
	dims := []int{6, 8}
	n := 48
	a, err := Create[T](ctx, rt, "ea", dims)
	require.NoError(t, err)
	b, err := Create[T](ctx, rt, "eb", dims, Chunk(-1, 3))
	require.NoError(t, err)
	ma, mb := make([]T, n), make([]T, n)
	for i := range ma {
		ma[i], mb[i] = signed[T](i), val[T](i%7+1) // b has no zero: divisions are defined
	}
	setAll(ctx, t, a, ma)
	setAll(ctx, t, b, mb)

	lo, hi := []int{1, 1}, []int{4, 6}
	require.NoError(t, a.AbsPatch(ctx, lo, hi))
	eachIn(lo, hi, func(s []int, _ int) {
		i := rowMajor(dims, s)
		switch v := any(ma[i]).(type) {
		case complex128:
			ma[i] = any(complex(cmplx.Abs(v), 0)).(T)
		case complex64:
			ma[i] = any(complex(float32(cmplx.Abs(complex128(v))), 0)).(T)
		case int32:
			ma[i] = any(max(v, -v)).(T)
		case int64:
			ma[i] = any(max(v, -v)).(T)
		case float32:
			ma[i] = any(max(v, -v)).(T)
		case float64:
			ma[i] = any(max(v, -v)).(T)
		}
	})
	require.Equal(t, ma, getAll(ctx, t, a), "AbsPatch")

	require.NoError(t, a.AddConstantPatch(ctx, []int{0, 0}, []int{2, 7}, val[T](5)))
	eachIn([]int{0, 0}, []int{2, 7}, func(s []int, _ int) { ma[rowMajor(dims, s)] += val[T](5) })
	require.Equal(t, ma, getAll(ctx, t, a), "AddConstantPatch")

	ops := []ElemOp{ElemMultiply, ElemDivide}
	if ordered {
		ops = append(ops, ElemMaximum, ElemMinimum)
	}
	for _, op := range ops {
		// b[0..3, 2..7] = a[2..5, 0..5] op b[0..3, 2..7]
		alo, ahi, clo, chi := []int{2, 0}, []int{5, 5}, []int{0, 2}, []int{3, 7}
		require.NoError(t, ElemPatch(ctx, op, a, alo, ahi, b, clo, chi, b, clo, chi), "%v", op)
		var av []T
		eachIn(alo, ahi, func(s []int, _ int) { av = append(av, ma[rowMajor(dims, s)]) })
		eachIn(clo, chi, func(s []int, k int) {
			i := rowMajor(dims, s)
			switch op {
			case ElemMultiply:
				mb[i] = av[k] * mb[i]
			case ElemDivide:
				mb[i] = av[k] / mb[i]
			case ElemMaximum, ElemMinimum:
				x, y := any(av[k]), any(mb[i])
				if op == ElemMaximum && lessAny(y, x) || op == ElemMinimum && lessAny(x, y) {
					mb[i] = av[k]
				}
			}
		})
		require.Equal(t, mb, getAll(ctx, t, b), "ElemPatch %v", op)
		// keep b free of zeros for the next division
		require.NoError(t, b.AddConstantPatch(ctx, clo, chi, val[T](0)))
	}
	require.NoError(t, a.Destroy(ctx))
	require.NoError(t, b.Destroy(ctx))
}

// lessAny reports x < y for two values of one ordered element type.
func lessAny(x, y any) bool {
	switch v := x.(type) {
	case int32:
		return v < y.(int32)
	case int64:
		return v < y.(int64)
	case float32:
		return v < y.(float32)
	case float64:
		return v < y.(float64)
	}
	panic("unordered")
}

func TestElemOps(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		elemOps[float64](ctx, t, rt, true)
		elemOps[int64](ctx, t, rt, true)
		elemOps[complex128](ctx, t, rt, false)
		selectElem(ctx, t, rt)
		elemBadInput(ctx, t, rt)
	})
}

// selectElem: the maximum and the minimum of a patch with repeated extremes are found with the
// first subscript in row-major order.
func selectElem(ctx context.Context, t testing.TB, rt *rma.Runtime) {
	dims := []int{5, 6}
	a, err := Create[int32](ctx, rt, "sel", dims)
	require.NoError(t, err)
	m := make([]int32, 30)
	for i := range m {
		m[i] = int32((i * 7) % 11) // 0..10, each value several times
	}
	setAll(ctx, t, a, m)
	lo, hi := []int{1, 1}, []int{4, 4}
	for _, isMax := range []bool{true, false} {
		var best int32
		var at []int
		eachIn(lo, hi, func(s []int, _ int) {
			v := m[rowMajor(dims, s)]
			if at == nil || (isMax && v > best) || (!isMax && v < best) {
				best, at = v, append([]int(nil), s...)
			}
		})
		v, sub, err := SelectElem(ctx, a, lo, hi, isMax)
		require.NoError(t, err)
		require.Equal(t, best, v, "max %v", isMax)
		require.Equal(t, at, sub, "max %v", isMax)
	}
	require.NoError(t, a.Destroy(ctx))
}

// elemBadInput: bad patches, shapes, ops and an integer divisor 0 are refused.
func elemBadInput(ctx context.Context, t testing.TB, rt *rma.Runtime) {
	a, err := Create[int64](ctx, rt, "bad", []int{4, 4})
	require.NoError(t, err)
	require.NoError(t, a.Fill(ctx, 3))
	require.True(t, errors.Is(a.AbsPatch(ctx, []int{0, 0}, []int{4, 3}), ErrOutOfBounds))
	require.True(t, errors.Is(ElemPatch(ctx, ElemMultiply, a, []int{0, 0}, []int{1, 1}, a, []int{0, 0}, []int{1, 2}, a, []int{0, 0}, []int{1, 1}), ErrShape))
	require.True(t, errors.Is(ElemPatch(ctx, ElemOp(9), a, []int{0, 0}, []int{1, 1}, a, []int{0, 0}, []int{1, 1}, a, []int{0, 0}, []int{1, 1}), ErrType))
	z, err := Create[complex128](ctx, rt, "badz", []int{4})
	require.NoError(t, err)
	require.True(t, errors.Is(ElemPatch(ctx, ElemMaximum, z, []int{0}, []int{1}, z, []int{0}, []int{1}, z, []int{2}, []int{3}), ErrType))
	zero, err := Create[int64](ctx, rt, "zero", []int{4, 4})
	require.NoError(t, err)
	require.NoError(t, zero.Zero(ctx))
	err = ElemPatch(ctx, ElemDivide, a, []int{0, 0}, []int{3, 3}, zero, []int{0, 0}, []int{3, 3}, a, []int{0, 0}, []int{3, 3})
	if rt.Size() == 1 || a.lo[0] <= a.hi[0] { // every rank owning part of the patch sees the 0
		require.True(t, errors.Is(err, ErrDivideByZero), "%v", err)
	}
	require.NoError(t, a.Sync(ctx))
	for _, x := range getAll(ctx, t, a) {
		require.Equal(t, int64(3), x, "a division by zero changed the array")
	}
	for _, arr := range []interface{ Destroy(context.Context) error }{a, z, zero} {
		require.NoError(t, arr.Destroy(ctx))
	}
}
