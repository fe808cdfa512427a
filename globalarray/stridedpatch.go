package globalarray

import (
	"context"
	"fmt"
)

// StridedPut writes buf into every skip[d]-th element of the patch [lo, hi] along each dimension
// d (NGA_Strided_put): the elements lo + k·skip for k = 0, 1, ... while inside hi, packed in buf
// row-major with leading dimensions ld (len ndim-1, counted in strided elements; nil = packed).
// The elements go to their owners in one vector transfer per owner (ARMCI_NbPutV); the call
// returns when buf may be reused.
//
// Errors: ErrShape (bounds, skips or ld of the wrong length, a skip < 1, a buffer too small),
// ErrOutOfBounds, ErrDestroyed: nothing is written; rma transport errors.
func (a *Array[T]) StridedPut(ctx context.Context, lo, hi, skip []int, buf []T, ld []int) error {
	return a.strided(ctx, opPut, "NGA_Strided_put", lo, hi, skip, buf, ld, 0)
}

// StridedGet reads every skip[d]-th element of the patch [lo, hi] into buf (NGA_Strided_get),
// laid out as for StridedPut.
//
// Errors: as StridedPut; nothing is read.
func (a *Array[T]) StridedGet(ctx context.Context, lo, hi, skip []int, buf []T, ld []int) error {
	return a.strided(ctx, opGet, "NGA_Strided_get", lo, hi, skip, buf, ld, 0)
}

// StridedAcc adds alpha·buf into every skip[d]-th element of the patch [lo, hi]
// (NGA_Strided_acc), atomically per element as Acc.
//
// Errors: as StridedPut; nothing is changed.
func (a *Array[T]) StridedAcc(ctx context.Context, lo, hi, skip []int, buf []T, ld []int, alpha T) error {
	return a.strided(ctx, opAcc, "NGA_Strided_acc", lo, hi, skip, buf, ld, alpha)
}

// strided lists the strided elements and their places in buf, then runs them as a gather,
// scatter or scatter-accumulate (elements).
func (a *Array[T]) strided(ctx context.Context, o op, call string, lo, hi, skip []int, buf []T, ld []int, alpha T) error {
	if err := a.alive(call); err != nil {
		return err
	}
	n := a.d.NDim()
	if len(lo) != n || len(hi) != n || len(skip) != n {
		return fmt.Errorf("ga: %s %q: %d/%d/%d bounds and skips for %d dimensions: %w", call, a.name, len(lo), len(hi), len(skip), n, ErrShape)
	}
	if err := a.d.CheckPatch(lo, hi); err != nil {
		return fmt.Errorf("ga: %s %q: %w", call, a.name, err)
	}
	cnt := make([]int, n)
	total := 1
	for d := 0; d < n; d++ {
		if skip[d] < 1 {
			return fmt.Errorf("ga: %s %q: skip %d along dimension %d: %w", call, a.name, skip[d], d, ErrShape)
		}
		cnt[d] = (hi[d]-lo[d])/skip[d] + 1
		total *= cnt[d]
	}
	if ld == nil {
		ld = cnt[1:]
	}
	if len(ld) != n-1 {
		return fmt.Errorf("ga: %s %q: %d leading dimensions for %d dimensions: %w", call, a.name, len(ld), n, ErrShape)
	}
	stride := make([]int, n) // element strides of buf
	stride[n-1] = 1
	for d := n - 2; d >= 0; d-- {
		if ld[d] < cnt[d+1] {
			return fmt.Errorf("ga: %s %q: leading dimension %d < %d elements: %w", call, a.name, ld[d], cnt[d+1], ErrShape)
		}
		stride[d] = stride[d+1] * ld[d]
	}
	span := 1
	for d := 0; d < n; d++ {
		span += (cnt[d] - 1) * stride[d]
	}
	if span > len(buf) {
		return fmt.Errorf("ga: %s %q: buffer of %d elements for a span of %d: %w", call, a.name, len(buf), span, ErrShape)
	}
	subs := make([][]int, total)
	flat := make([]int, total*n)
	v := make([]T, total)
	at := make([]int, total) // each element's index in buf
	k := make([]int, n)
	for i := 0; i < total; i++ {
		s := flat[i*n : (i+1)*n : (i+1)*n]
		b := 0
		for d := 0; d < n; d++ {
			s[d] = lo[d] + k[d]*skip[d]
			b += k[d] * stride[d]
		}
		subs[i], at[i] = s, b
		if o != opGet {
			v[i] = buf[b]
		}
		for d := n - 1; d >= 0; d-- {
			if k[d]++; k[d] < cnt[d] {
				break
			}
			k[d] = 0
		}
	}
	if err := a.elements(ctx, o, call, subs, v, alpha); err != nil {
		return err
	}
	if o == opGet {
		for i, b := range at {
			buf[b] = v[i]
		}
	}
	return nil
}
