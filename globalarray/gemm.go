package globalarray

import (
	"context"
	"errors"
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/cblas128"
	"gonum.org/v1/gonum/blas/cblas64"
)

// Floating is an element type of Gemm (GA_Sgemm, GA_Dgemm, GA_Cgemm, GA_Zgemm).
type Floating interface {
	float32 | float64 | complex64 | complex128
}

// gemmPanel is the width (elements of the inner dimension) of the panels Gemm fetches at a time.
const gemmPanel = 256

// Gemm computes C = alpha·op(A)·op(B) + beta·C on matrices (GA_Dgemm and its kin; transA and
// transB select op(X) = Xᵀ, GA's 'T'; no conjugation): op(A) is m×k, op(B) k×n and C m×n.
// Each rank computes the block of C it owns ("owner computes"): it fetches the rows of op(A)
// and the columns of op(B) that block needs, a panel of the inner dimension at a time, the next
// panel arriving (non-blocking Gets) while the current one is multiplied by gonum's BLAS. C
// must not be A or B. On block-cyclic and tiled arrays (BlockCyclic, BlockCyclicGrid, Tiled)
// each rank computes each of its blocks of C the same way, A and B fetched by patch Gets
// (GA's SUMMA-style ScaLAPACK path is not reproduced). Collective.
//
// Errors: ErrShape (not matrices, shapes that do not multiply, C aliasing A or B, different
// runtimes), ErrDestroyed (nothing changed); rma errors.
func Gemm[T Floating](ctx context.Context, transA, transB bool, alpha T, a, b *Array[T], beta T, c *Array[T]) error {
	const call = "GA_Dgemm"
	ar, ac, err := a.matrix(call)
	if err != nil {
		return err
	}
	br, bc, err := b.matrix(call)
	if err != nil {
		return err
	}
	m, n, err := c.matrix(call)
	if err != nil {
		return err
	}
	am, ak := ar, ac
	if transA {
		am, ak = ac, ar
	}
	bk, bn := br, bc
	if transB {
		bk, bn = bc, br
	}
	switch {
	case am != m || bn != n || ak != bk:
		return fmt.Errorf("ga: %s: op(%q) is %d×%d, op(%q) %d×%d, %q %d×%d: %w", call, a.name, am, ak, b.name, bk, bn, c.name, m, n, ErrShape)
	case c == a || c == b:
		return fmt.Errorf("ga: %s: %q is both a factor and the product: %w", call, c.name, ErrShape)
	case !a.pg.same(c.pg) || !b.pg.same(c.pg):
		return fmt.Errorf("ga: %s: arrays of different runtimes or process groups: %w", call, ErrShape)
	}
	k := ak
	return c.patchOp(ctx, call, []int{0, 0}, []int{m - 1, n - 1}, func(v *Array[T], olo, ohi []int) error {
		rows, cols := ohi[0]-olo[0]+1, ohi[1]-olo[1]+1
		if rows == m && cols == n && a.ownsWhole() && b.ownsWhole() {
			// this rank holds all three matrices (one rank, or one owner of everything): one
			// product straight on the stored blocks, no panel copies
			gemmLocal(transA, transB, alpha, a.local[:ar*ac], b.local[:br*bc], beta, v.local, v.ld[0], rows, cols, k)
			return nil
		}
		var abuf, bbuf [2][]T
		for s := range abuf {
			abuf[s], bbuf[s] = make([]T, rows*min(k, gemmPanel)), make([]T, min(k, gemmPanel)*cols)
		}
		// fetch issues the Gets of the panel [p0, p0+w) of op(A)'s rows and op(B)'s columns
		fetch := func(p0, slot int) ([2]*Handle, int, error) {
			w := min(gemmPanel, k-p0)
			alo, ahi := []int{olo[0], p0}, []int{ohi[0], p0 + w - 1}
			if transA {
				alo, ahi = []int{p0, olo[0]}, []int{p0 + w - 1, ohi[0]}
			}
			blo, bhi := []int{p0, olo[1]}, []int{p0 + w - 1, ohi[1]}
			if transB {
				blo, bhi = []int{olo[1], p0}, []int{ohi[1], p0 + w - 1}
			}
			ha, err := a.NbGet(ctx, alo, ahi, abuf[slot][:rows*w], nil)
			if err != nil {
				return [2]*Handle{}, 0, err
			}
			hb, err := b.NbGet(ctx, blo, bhi, bbuf[slot][:w*cols], nil)
			if err != nil {
				return [2]*Handle{ha}, 0, err
			}
			return [2]*Handle{ha, hb}, w, nil
		}
		wait := func(hs [2]*Handle) error {
			return errors.Join(hs[0].Wait(context.WithoutCancel(ctx)), hs[1].Wait(context.WithoutCancel(ctx)))
		}
		hs, w, err := fetch(0, 0)
		if err != nil {
			return errors.Join(err, wait(hs))
		}
		scale := beta
		for p0, slot := 0, 0; p0 < k; p0, slot = p0+gemmPanel, 1-slot {
			if err := wait(hs); err != nil {
				return err
			}
			cw := w
			if next := p0 + gemmPanel; next < k {
				if hs, w, err = fetch(next, 1-slot); err != nil {
					return errors.Join(err, wait(hs))
				}
			}
			gemmLocal(transA, transB, alpha, abuf[slot][:rows*cw], bbuf[slot][:cw*cols], scale, v.local, v.ld[0], rows, cols, cw)
			scale = 1
		}
		return nil
	})
}

// ownsWhole reports whether this rank's block is the whole array, stored packed (no ghost
// cells), so a.local is the array row-major.
func (a *Array[T]) ownsWhole() bool {
	if a.ghosted() || a.d.BlockElems(a.me) != a.d.Elems() {
		return false
	}
	return len(a.local) >= a.d.Elems()
}

// gemmLocal computes the local block C (rows×cols, row stride ldc) = alpha·op(A)·op(B) +
// beta·C for a panel of width w: A is rows×w (w×rows when transA), B w×cols (cols×w when
// transB), both packed row-major.
// blasBackend names the BLAS of the local products ("gonum", or "openblas" with that build tag).
var blasBackend = "gonum"

// BLASBackend names the BLAS that computes Gemm's local block products: "gonum" (gonum's pure-Go
// BLAS, the default build, no cgo) or "openblas" (built with -tags openblas and cgo: OpenBLAS
// through gonum's netlib binding).
func BLASBackend() string { return blasBackend }

func gemmLocal[T Floating](transA, transB bool, alpha T, av, bv []T, beta T, cv []T, ldc, rows, cols, w int) {
	ta, tb := blas.NoTrans, blas.NoTrans
	ars, acs, brs, bcs := rows, w, w, cols
	if transA {
		ta, ars, acs = blas.Trans, w, rows
	}
	if transB {
		tb, brs, bcs = blas.Trans, cols, w
	}
	switch c := any(cv).(type) {
	case []float64:
		blas64.Gemm(ta, tb, any(alpha).(float64), blas64.General{Rows: ars, Cols: acs, Stride: acs, Data: any(av).([]float64)},
			blas64.General{Rows: brs, Cols: bcs, Stride: bcs, Data: any(bv).([]float64)}, any(beta).(float64),
			blas64.General{Rows: rows, Cols: cols, Stride: ldc, Data: c})
	case []float32:
		blas32.Gemm(ta, tb, any(alpha).(float32), blas32.General{Rows: ars, Cols: acs, Stride: acs, Data: any(av).([]float32)},
			blas32.General{Rows: brs, Cols: bcs, Stride: bcs, Data: any(bv).([]float32)}, any(beta).(float32),
			blas32.General{Rows: rows, Cols: cols, Stride: ldc, Data: c})
	case []complex128:
		cblas128.Gemm(ta, tb, any(alpha).(complex128), cblas128.General{Rows: ars, Cols: acs, Stride: acs, Data: any(av).([]complex128)},
			cblas128.General{Rows: brs, Cols: bcs, Stride: bcs, Data: any(bv).([]complex128)}, any(beta).(complex128),
			cblas128.General{Rows: rows, Cols: cols, Stride: ldc, Data: c})
	case []complex64:
		cblas64.Gemm(ta, tb, any(alpha).(complex64), cblas64.General{Rows: ars, Cols: acs, Stride: acs, Data: any(av).([]complex64)},
			cblas64.General{Rows: brs, Cols: bcs, Stride: bcs, Data: any(bv).([]complex64)}, any(beta).(complex64),
			cblas64.General{Rows: rows, Cols: cols, Stride: ldc, Data: c})
	}
}
