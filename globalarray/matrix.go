package globalarray

import (
	"context"
	"fmt"
	"math"
	"math/cmplx"

	"github.com/goarmci/goarmci/rma"
)

// Matrix operations on 2-dimensional arrays ([GA]: GA_Transpose, GA_Symmetrize,
// GA_Set_diagonal, GA_Add_diagonal, GA_Get_diag, GA_Norm1, GA_Norm_infinity). Collective: each
// rank works on the block it owns, fetching what it needs from the other arrays with Get,
// between barriers.

// matrix checks that a is a live 2-dimensional array and returns its dimensions.
func (a *Array[T]) matrix(call string) (rows, cols int, err error) {
	if a == nil {
		return 0, 0, fmt.Errorf("ga: %s: nil array: %w", call, ErrShape)
	}
	if err := a.alive(call); err != nil {
		return 0, 0, err
	}
	if a.d.NDim() != 2 {
		return 0, 0, fmt.Errorf("ga: %s %q: %d dimensions, a matrix has 2: %w", call, a.name, a.d.NDim(), ErrShape)
	}
	d := a.d.Dims()
	return d[0], d[1], nil
}

// Transpose sets b to the transpose of a (GA_Transpose): b[j][i] = a[i][j]; a is m×n, b n×m.
// Collective.
//
// Errors: ErrShape (not matrices, transposed shapes that differ, different runtimes),
// ErrDestroyed (nothing changed); rma errors.
func Transpose[T Elem](ctx context.Context, a, b *Array[T]) error {
	const call = "GA_Transpose"
	am, an, err := a.matrix(call)
	if err != nil {
		return err
	}
	bm, bn, err := b.matrix(call)
	if err != nil {
		return err
	}
	if am != bn || an != bm || !a.pg.same(b.pg) {
		return fmt.Errorf("ga: %s: %q is %d×%d, %q is %d×%d: %w", call, a.name, am, an, b.name, bm, bn, ErrShape)
	}
	return b.patchOp(ctx, call, []int{0, 0}, []int{bm - 1, bn - 1}, func(v *Array[T], olo, ohi []int) error {
		rows, cols := ohi[0]-olo[0]+1, ohi[1]-olo[1]+1
		src := make([]T, rows*cols) // a's patch, cols × rows
		if err := a.Get(ctx, []int{olo[1], olo[0]}, []int{ohi[1], ohi[0]}, src, nil); err != nil {
			return err
		}
		v.eachOwned(olo, ohi, func(i, k int) { v.local[i] = src[(k%cols)*rows+k/cols] })
		return nil
	})
}

// Symmetrize replaces the square matrix a by (a + aᵀ)/2 (GA_Symmetrize; integer elements
// divide with truncation). Collective.
//
// Errors: ErrShape (not a square matrix), ErrDestroyed, ErrUnsupportedDistribution (a
// block-cyclic or tiled array): nothing changed; rma errors.
func Symmetrize[T Elem](ctx context.Context, a *Array[T]) error {
	const call = "GA_Symmetrize"
	m, n, err := a.matrix(call)
	if err != nil {
		return err
	}
	if m != n {
		return fmt.Errorf("ga: %s %q: %d×%d is not square: %w", call, a.name, m, n, ErrShape)
	}
	if err := a.oneBlock(call); err != nil {
		return err
	}
	if err := a.pg.barrier(ctx); err != nil {
		return fmt.Errorf("ga: %s: %w", call, err)
	}
	// read the transposed part of my block first, write only after every rank has read
	var src []T
	var ferr error
	olo, ohi, ok := a.owned([]int{0, 0}, []int{m - 1, n - 1})
	if ok {
		rows, cols := ohi[0]-olo[0]+1, ohi[1]-olo[1]+1
		src = make([]T, rows*cols)
		ferr = a.Get(ctx, []int{olo[1], olo[0]}, []int{ohi[1], ohi[0]}, src, nil)
	}
	if err := a.pg.barrier(ctx); err != nil && ferr == nil {
		ferr = err
	}
	if ok && ferr == nil {
		rows, cols := ohi[0]-olo[0]+1, ohi[1]-olo[1]+1
		half := T(2)
		a.eachOwned(olo, ohi, func(i, k int) { a.local[i] = (a.local[i] + src[(k%cols)*rows+k/cols]) / half })
	}
	if err := a.pg.barrier(ctx); err != nil && ferr == nil {
		ferr = err
	}
	if ferr != nil {
		return fmt.Errorf("ga: %s %q: %w", call, a.name, ferr)
	}
	return nil
}

// diagonal runs fn on every diagonal element a[i][i] this rank owns, with the block view
// holding it and its index in the view's local, and the matching element of the 1-dimensional
// v (fetched with Get).
func diagonal[T Elem](ctx context.Context, call string, a, v *Array[T], fn func(p *Array[T], i int, x *T)) error {
	m, n, err := a.matrix(call)
	if err != nil {
		return err
	}
	if v == nil || v.d.NDim() != 1 || v.d.Dims()[0] != min(m, n) || !v.pg.same(a.pg) {
		return fmt.Errorf("ga: %s: the vector must have min(%d, %d) elements on the same runtime: %w", call, m, n, ErrShape)
	}
	if err := v.alive(call); err != nil {
		return err
	}
	return a.patchOp(ctx, call, []int{0, 0}, []int{m - 1, n - 1}, func(p *Array[T], olo, ohi []int) error {
		lo, hi := max(olo[0], olo[1]), min(ohi[0], ohi[1])
		if lo > hi {
			return nil // my block holds no diagonal element
		}
		vals := make([]T, hi-lo+1)
		if err := v.Get(ctx, []int{lo}, []int{hi}, vals, nil); err != nil {
			return err
		}
		for d := lo; d <= hi; d++ {
			i := (d-p.lo[0])*p.ld[0] + (d - p.lo[1])
			fn(p, i, &vals[d-lo])
		}
		return nil
	})
}

// SetDiagonal sets a[i][i] = v[i] (GA_Set_diagonal); v is 1-dimensional with min(m, n)
// elements. Collective.
//
// Errors: ErrShape, ErrDestroyed (nothing changed); rma errors.
func SetDiagonal[T Elem](ctx context.Context, a, v *Array[T]) error {
	return diagonal(ctx, "GA_Set_diagonal", a, v, func(p *Array[T], i int, x *T) { p.local[i] = *x })
}

// AddDiagonal adds v[i] to a[i][i] (GA_Add_diagonal). Collective.
//
// Errors: as SetDiagonal.
func AddDiagonal[T Elem](ctx context.Context, a, v *Array[T]) error {
	return diagonal(ctx, "GA_Add_diagonal", a, v, func(p *Array[T], i int, x *T) { p.local[i] += *x })
}

// GetDiagonal copies a's diagonal into v: v[i] = a[i][i] (GA_Get_diag). Collective.
//
// Errors: as SetDiagonal.
func GetDiagonal[T Elem](ctx context.Context, a, v *Array[T]) error {
	const call = "GA_Get_diag"
	m, n, err := a.matrix(call)
	if err != nil {
		return err
	}
	if v == nil || v.d.NDim() != 1 || v.d.Dims()[0] != min(m, n) || !v.pg.same(a.pg) {
		return fmt.Errorf("ga: %s: the vector must have min(%d, %d) elements on the same runtime: %w", call, m, n, ErrShape)
	}
	return v.patchOp(ctx, call, []int{0}, []int{min(m, n) - 1}, func(p *Array[T], olo, ohi []int) error {
		for d := olo[0]; d <= ohi[0]; d++ {
			var x [1]T
			if err := a.Get(ctx, []int{d, d}, []int{d, d}, x[:], nil); err != nil {
				return err
			}
			p.local[d-p.lo[0]] = x[0]
		}
		return nil
	})
}

// magnitudes returns the function giving |local[i]| as a float64 (the modulus of a complex
// element), chosen once for the element type.
func magnitudes[T Elem](local []T) func(i int) float64 {
	switch s := any(local).(type) {
	case []int32:
		return func(i int) float64 { return math.Abs(float64(s[i])) }
	case []int64:
		return func(i int) float64 { return math.Abs(float64(s[i])) }
	case []float32:
		return func(i int) float64 { return math.Abs(float64(s[i])) }
	case []float64:
		return func(i int) float64 { return math.Abs(s[i]) }
	case []complex64:
		return func(i int) float64 { return cmplx.Abs(complex128(s[i])) }
	case []complex128:
		return func(i int) float64 { return cmplx.Abs(s[i]) }
	}
	return func(int) float64 { return 0 }
}

// norm sums |a[i][j]| along dimension along (0: per column, 1: per row) and returns the
// largest sum, the same on every rank.
func norm[T Elem](ctx context.Context, call string, a *Array[T], along int) (float64, error) {
	m, n, err := a.matrix(call)
	if err != nil {
		return 0, err
	}
	sums := make([]float64, []int{n, m}[along])
	if err := a.pg.barrier(ctx); err != nil {
		return 0, fmt.Errorf("ga: %s: %w", call, err)
	}
	for _, p := range a.parts {
		olo, ohi, ok := p.owned([]int{0, 0}, []int{m - 1, n - 1})
		if !ok {
			continue
		}
		cols := ohi[1] - olo[1] + 1
		mag := magnitudes(p.local)
		p.eachOwned(olo, ohi, func(i, k int) {
			r, c := olo[0]+k/cols, olo[1]+k%cols
			sums[[]int{c, r}[along]] += mag(i)
		})
	}
	if err := gopOn(ctx, a.pg, "GA_Gop", rma.ReduceSum, sums); err != nil {
		return 0, fmt.Errorf("ga: %s: %w", call, err)
	}
	best := 0.0
	for _, s := range sums {
		best = max(best, s)
	}
	return best, nil
}

// Norm1 returns the 1-norm of the matrix a, the largest sum of magnitudes of a column
// (GA_Norm1), the same on every rank. Collective.
//
// Errors: ErrShape (not a matrix), ErrDestroyed; rma errors.
func Norm1[T Elem](ctx context.Context, a *Array[T]) (float64, error) {
	return norm(ctx, "GA_Norm1", a, 0)
}

// NormInfinity returns the infinity-norm of the matrix a, the largest sum of magnitudes of a
// row (GA_Norm_infinity), the same on every rank. Collective.
//
// Errors: as Norm1.
func NormInfinity[T Elem](ctx context.Context, a *Array[T]) (float64, error) {
	return norm(ctx, "GA_Norm_infinity", a, 1)
}
