package globalarray

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
)

// setAll writes want into a from rank 0 and syncs.
func setAll[T Elem](ctx context.Context, t testing.TB, a *Array[T], want []T) {
	dims := a.Dims()
	lo, hi := make([]int, len(dims)), make([]int, len(dims))
	for d, e := range dims {
		hi[d] = e - 1
	}
	if a.me == 0 { // the first rank of the array's group
		require.NoError(t, a.Put(ctx, lo, hi, want, nil))
	}
	require.NoError(t, a.Sync(ctx))
}

// rowMajor is the row-major index of subscript s in dims.
func rowMajor(dims, s []int) int {
	x := 0
	for d, e := range dims {
		x = x*e + s[d]
	}
	return x
}

// eachIn calls fn for every subscript of the patch [lo, hi] in row-major order with its index
// k within the patch.
func eachIn(lo, hi []int, fn func(s []int, k int)) {
	s := append([]int(nil), lo...)
	for k := 0; ; k++ {
		fn(s, k)
		d := len(s) - 1
		for ; d >= 0 && s[d] == hi[d]; d-- {
			s[d] = lo[d]
		}
		if d < 0 {
			return
		}
		s[d]++
	}
}

// patchMath checks FillPatch, ZeroPatch, ScalePatch, CopyPatch (between differently distributed
// arrays), AddPatch (into one of its sources) and DotPatch against a serial model.
func patchMath[T Elem](ctx context.Context, t testing.TB, rt *rma.Runtime) {
	dims := []int{7, 9}
	a, err := Create[T](ctx, rt, "pa", dims)
	require.NoError(t, err)
	b, err := Create[T](ctx, rt, "pb", dims, Chunk(-1, 4)) // another distribution
	require.NoError(t, err)
	n := 7 * 9
	ma, mb := make([]T, n), make([]T, n)
	for i := range ma {
		ma[i], mb[i] = val[T](i+1), val[T](2*i-5)
	}
	setAll(ctx, t, a, ma)
	setAll(ctx, t, b, mb)

	lo, hi := []int{1, 2}, []int{5, 7}
	require.NoError(t, a.FillPatch(ctx, lo, hi, val[T](3)))
	eachIn(lo, hi, func(s []int, _ int) { ma[rowMajor(dims, s)] = val[T](3) })
	require.Equal(t, ma, getAll(ctx, t, a), "FillPatch")

	require.NoError(t, a.ScalePatch(ctx, []int{0, 0}, []int{3, 8}, val[T](2)))
	eachIn([]int{0, 0}, []int{3, 8}, func(s []int, _ int) { ma[rowMajor(dims, s)] *= val[T](2) })
	require.Equal(t, ma, getAll(ctx, t, a), "ScalePatch")

	require.NoError(t, b.ZeroPatch(ctx, []int{6, 0}, []int{6, 8}))
	eachIn([]int{6, 0}, []int{6, 8}, func(s []int, _ int) { mb[rowMajor(dims, s)] = 0 })
	require.Equal(t, mb, getAll(ctx, t, b), "ZeroPatch")

	// a[0..2, 0..3] → b[4..6, 5..8]
	alo, ahi, blo, bhi := []int{0, 0}, []int{2, 3}, []int{4, 5}, []int{6, 8}
	require.NoError(t, CopyPatch(ctx, a, alo, ahi, b, blo, bhi))
	src := make([]T, 0, 12)
	eachIn(alo, ahi, func(s []int, _ int) { src = append(src, ma[rowMajor(dims, s)]) })
	eachIn(blo, bhi, func(s []int, k int) { mb[rowMajor(dims, s)] = src[k] })
	require.Equal(t, mb, getAll(ctx, t, b), "CopyPatch")

	// b[1..3, 1..4] = 2·a[3..5, 4..7] − 1·b[1..3, 1..4]
	clo, chi, xlo, xhi := []int{1, 1}, []int{3, 4}, []int{3, 4}, []int{5, 7}
	require.NoError(t, AddPatch(ctx, val[T](2), a, xlo, xhi, val[T](-1), b, clo, chi, b, clo, chi))
	var av []T
	eachIn(xlo, xhi, func(s []int, _ int) { av = append(av, ma[rowMajor(dims, s)]) })
	eachIn(clo, chi, func(s []int, k int) {
		i := rowMajor(dims, s)
		mb[i] = val[T](2)*av[k] + val[T](-1)*mb[i]
	})
	require.Equal(t, mb, getAll(ctx, t, b), "AddPatch")

	var want T
	var bv []T
	eachIn(clo, chi, func(s []int, _ int) { bv = append(bv, mb[rowMajor(dims, s)]) })
	eachIn(xlo, xhi, func(s []int, k int) { want += ma[rowMajor(dims, s)] * bv[k] })
	got, err := DotPatch(ctx, a, xlo, xhi, b, clo, chi)
	require.NoError(t, err)
	require.Equal(t, want, got, "DotPatch")

	// bad input on every rank: nothing changes
	require.True(t, errors.Is(a.FillPatch(ctx, []int{0, 0}, []int{7, 0}, val[T](9)), ErrOutOfBounds))
	require.True(t, errors.Is(CopyPatch(ctx, a, []int{0, 0}, []int{1, 1}, b, []int{0, 0}, []int{1, 2}), ErrShape))
	require.True(t, errors.Is(AddPatch(ctx, val[T](1), a, []int{0, 0}, []int{1, 1}, val[T](1), b, []int{0}, []int{1}, b, []int{0, 0}, []int{1, 1}), ErrShape))
	_, err = DotPatch(ctx, a, []int{0, 0}, []int{2, 2}, b, []int{0, 0}, []int{2, 9})
	require.True(t, errors.Is(err, ErrOutOfBounds), "%v", err)
	require.NoError(t, a.Sync(ctx))
	require.Equal(t, ma, getAll(ctx, t, a), "bad input changed a")
	require.Equal(t, mb, getAll(ctx, t, b), "bad input changed b")
	require.NoError(t, a.Destroy(ctx))
	require.NoError(t, b.Destroy(ctx))
}

func TestPatchMath(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		patchMath[float64](ctx, t, rt)
		patchMath[int32](ctx, t, rt)
		patchMath[complex128](ctx, t, rt)
	})
}
