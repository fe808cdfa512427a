package globalarray

import (
	"context"
	"fmt"

	"github.com/goarmci/goarmci/globalarray/dist"
)

// PeriodicGet copies the patch [lo, hi] into buf, laid out as for Get, where lo and hi may lie
// outside the array: indices wrap around every dimension (NGA_Periodic_get), as on a torus. A
// patch may be at most one period long in every dimension. The patch is split at the array's
// edges into up to 2^ndim ordinary patches, each fetched as Get does.
//
// Errors: ErrShape (bounds of the wrong length, a bad ld or buffer), ErrOutOfBounds (hi < lo, or
// a patch longer than the array), ErrDestroyed: nothing is read; rma errors.
func (a *Array[T]) PeriodicGet(ctx context.Context, lo, hi []int, buf []T, ld []int) error {
	_, err := a.periodic(ctx, opGet, "NGA_Periodic_get", lo, hi, buf, ld, 0, true)
	return err
}

// PeriodicPut copies buf into the patch [lo, hi] with wrapped indices (NGA_Periodic_put).
//
// Errors: as PeriodicGet; nothing is written.
func (a *Array[T]) PeriodicPut(ctx context.Context, lo, hi []int, buf []T, ld []int) error {
	_, err := a.periodic(ctx, opPut, "NGA_Periodic_put", lo, hi, buf, ld, 0, true)
	return err
}

// PeriodicAcc adds alpha·buf into the patch [lo, hi] with wrapped indices (NGA_Periodic_acc),
// atomically per element as Acc.
//
// Errors: as PeriodicGet; nothing is changed.
func (a *Array[T]) PeriodicAcc(ctx context.Context, lo, hi []int, buf []T, ld []int, alpha T) error {
	_, err := a.periodic(ctx, opAcc, "NGA_Periodic_acc", lo, hi, buf, ld, alpha, true)
	return err
}

// wrapped is one piece of a periodic range along a dimension: the array indices [lo, hi] and
// the offset of lo within the patch.
type wrapped struct{ lo, hi, at int }

// periodic issues a wrapped patch transfer: blocking (block set; the handle is nil), or
// non-blocking with one handle for every piece (on an error, what was issued is waited for).
func (a *Array[T]) periodic(ctx context.Context, o op, call string, lo, hi []int, buf []T, ld []int, alpha T, block bool) (*Handle, error) {
	if err := a.alive(call); err != nil {
		return nil, err
	}
	n, dims := a.d.NDim(), a.d.Dims()
	if len(lo) != n || len(hi) != n {
		return nil, fmt.Errorf("ga: %s %q: bounds of %d/%d entries for %d dimensions: %w", call, a.name, len(lo), len(hi), n, ErrShape)
	}
	ext := make([]int, n)
	pieces := make([][]wrapped, n)
	for d := 0; d < n; d++ {
		ext[d] = hi[d] - lo[d] + 1
		if ext[d] < 1 || ext[d] > dims[d] {
			return nil, fmt.Errorf("ga: %s %q: dimension %d: [%d, %d] is empty or longer than the period %d: %w",
				call, a.name, d, lo[d], hi[d], dims[d], ErrOutOfBounds)
		}
		l := ((lo[d] % dims[d]) + dims[d]) % dims[d]
		if l+ext[d] <= dims[d] {
			pieces[d] = []wrapped{{l, l + ext[d] - 1, 0}}
		} else {
			pieces[d] = []wrapped{{l, dims[d] - 1, 0}, {0, ext[d] - (dims[d] - l) - 1, dims[d] - l}}
		}
	}
	if ld == nil {
		ld = ext[1:]
	}
	zero := make([]int, n)
	last := make([]int, n)
	for d := range last {
		last[d] = ext[d] - 1
	}
	var bs [dist.MaxDims]int
	if _, err := dist.BufStrides(zero, last, ld, len(buf), bs[:n]); err != nil {
		return nil, fmt.Errorf("ga: %s %q: %w", call, a.name, err)
	}
	var nb Handle
	// every combination of one piece per dimension is an ordinary patch
	idx := make([]int, n)
	slo, shi := make([]int, n), make([]int, n)
	for {
		off := 0
		for d := 0; d < n; d++ {
			p := pieces[d][idx[d]]
			slo[d], shi[d] = p.lo, p.hi
			off += p.at * bs[d]
		}
		h, err := a.patch(ctx, o, slo, shi, buf[off:], ld, alpha, block)
		if h != nil {
			nb.hs = append(nb.hs, h.hs...)
		}
		if err != nil {
			_ = waitAll(context.WithoutCancel(ctx), nb.hs)
			return nil, fmt.Errorf("ga: %s: %w", call, err)
		}
		d := n - 1
		for ; d >= 0; d-- {
			if idx[d]++; idx[d] < len(pieces[d]) {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			if block {
				return nil, nil
			}
			return &nb, nil
		}
	}
}
