package globalarray

import (
	"context"
	"fmt"

	"github.com/goarmci/goarmci/globalarray/dist"
	"github.com/goarmci/goarmci/rma"
)

// Ghosts gives the array ghost cells (NGA_Create_ghosts, NGA_Create_ghosts_irreg with
// Irregular): widths[d] >= 0 extra elements on both sides of every block along dimension d,
// stored with the block (so Access's ld counts them) and filled from the neighbouring blocks by
// UpdateGhosts, periodically across the array's edges as in GA. One width per dimension, each at
// most the array's extent along it. Ghost cells are a local copy: Put, Get, Acc and every other
// call address the array proper only.
func Ghosts(widths ...int) Option {
	w := append([]int{}, widths...)
	return func(o *options) { o.ghosts = w }
}

// checkGhosts validates ghost widths against the extents.
func checkGhosts(dims, w []int) error {
	if len(w) != len(dims) {
		return fmt.Errorf("%w: %d ghost widths for %d dimensions", ErrShape, len(w), len(dims))
	}
	for d, x := range w {
		if x < 0 || x > dims[d] {
			return fmt.Errorf("%w: ghost width %d along dimension %d of extent %d", ErrShape, x, d, dims[d])
		}
	}
	return nil
}

// ghost is the ghost width along dimension k (0 without ghost cells).
func (a *Array[T]) ghost(k int) int {
	if a.gw == nil {
		return 0
	}
	return a.gw[k]
}

// ghosted reports whether the local storage holds ghost cells (some width is positive).
func (a *Array[T]) ghosted() bool {
	for _, w := range a.gw {
		if w > 0 {
			return true
		}
	}
	return false
}

// storageExtent is the extent of this rank's storage along dimension k, ghost cells included.
func (a *Array[T]) storageExtent(k int) int { return a.hi[k] - a.lo[k] + 1 + 2*a.ghost(k) }

// storage returns the bounds, in array indices, of the storage of the block [lo, hi]: the block
// widened by the ghost widths (the block itself without ghost cells). Remote offsets are
// computed against these bounds.
func (a *Array[T]) storage(lo, hi []int, slo, shi *[dist.MaxDims]int) ([]int, []int) {
	if !a.ghosted() {
		return lo, hi
	}
	n := len(lo)
	for d := 0; d < n; d++ {
		slo[d], shi[d] = lo[d]-a.gw[d], hi[d]+a.gw[d]
	}
	return slo[:n], shi[:n]
}

// offset returns the owner of the element at subscript and its element offset in the owner's
// storage (dist.Offset, ghost cells counted).
func (a *Array[T]) offset(sub []int) (rank, elem int, err error) {
	if !a.ghosted() {
		return a.d.Offset(sub)
	}
	rank, err = a.d.Locate(sub)
	if err != nil {
		return -1, 0, err
	}
	var lo, hi [dist.MaxDims]int
	n := a.d.NDim()
	a.d.BlockInto(rank, lo[:n], hi[:n])
	for d := 0; d < n; d++ {
		elem = elem*(hi[d]-lo[d]+1+2*a.gw[d]) + sub[d] - lo[d] + a.gw[d]
	}
	return rank, elem, nil
}

// interior calls fn for every row (the contiguous run along the last dimension) of this rank's
// block proper, in row-major order, with the row-major index k of its first element within the
// block; without ghost cells the whole block is one row.
func (a *Array[T]) interior(fn func(row []T, k int)) {
	count := a.d.LocalElems(a.me) // all of a multi-block rank's storage: no ghost cells there
	if count == 0 {
		return
	}
	if !a.ghosted() {
		fn(a.local[:count], 0)
		return
	}
	n := len(a.lo)
	rowLen := a.hi[n-1] - a.lo[n-1] + 1
	a.eachOwned(a.lo, a.rowStarts(), func(i, k int) { fn(a.local[i:i+rowLen], k*rowLen) })
}

// rowStarts is the upper corner of the block with the last dimension collapsed to its first
// index: eachOwned over [lo, rowStarts] visits the first element of every row.
func (a *Array[T]) rowStarts() []int {
	hi := append([]int(nil), a.hi...)
	hi[len(hi)-1] = a.lo[len(hi)-1]
	return hi
}

// packedLocal returns this rank's block proper as a packed row-major slice: the storage itself
// without ghost cells, else a copy.
func (a *Array[T]) packedLocal() []T {
	if !a.ghosted() {
		return a.local[:a.d.LocalElems(a.me)]
	}
	out := make([]T, a.d.BlockElems(a.me))
	a.interior(func(row []T, k int) { copy(out[k:], row) })
	return out
}

// HasGhosts reports whether the array was created with ghost cells (GA_Has_ghosts).
func (a *Array[T]) HasGhosts() bool { return a.gw != nil }

// GhostWidths returns a copy of the ghost widths per dimension, nil without ghost cells
// (the width array of NGA_Create_ghosts).
func (a *Array[T]) GhostWidths() []int {
	if a.gw == nil {
		return nil
	}
	return append([]int(nil), a.gw...)
}

// AccessGhosts returns this rank's storage in place, ghost cells included (NGA_Access_ghosts):
// dims are its extents (the block's plus twice the ghost widths), ld its leading dimensions
// (len ndim-1), and the element at array index (i0, ..., in-1) is data[((i0-lo0+w0)·ld[0] +
// i1-lo1+w1)·ld[1] + ...] where lo is the block's lower corner (Distribution) and w the widths.
// A rank that owns nothing gets an empty slice. Call Release when done.
//
// Errors: ErrDestroyed; ErrShape on an array without ghost cells.
func (a *Array[T]) AccessGhosts() (data []T, dims, ld []int, err error) {
	const call = "NGA_Access_ghosts"
	if err := a.alive(call); err != nil {
		return nil, nil, nil, err
	}
	if a.gw == nil {
		return nil, nil, nil, fmt.Errorf("ga: %s %q: %w: the array has no ghost cells", call, a.name, ErrShape)
	}
	n := a.d.NDim()
	dims = make([]int, n)
	if len(a.raw) > 0 {
		for k := 0; k < n; k++ {
			dims[k] = a.storageExtent(k)
		}
	}
	a.accessed.Add(1)
	return a.raw, dims, append([]int(nil), a.ld...), nil
}

// UpdateGhosts fills every rank's ghost cells, corners included, with the current values of the
// neighbouring blocks, wrapping periodically across the array's edges (GA_Update_ghosts).
// Collective: it synchronizes before reading (every rank's earlier writes are seen) and after
// (no rank writes a block another still reads). An array without ghost cells only synchronizes.
//
// Errors: ErrDestroyed; rma errors of the transfers and barriers.
func (a *Array[T]) UpdateGhosts(ctx context.Context) error {
	const call = "GA_Update_ghosts"
	if err := a.alive(call); err != nil {
		return err
	}
	if err := a.pg.barrier(ctx); err != nil {
		return fmt.Errorf("ga: %s %q: %w", call, a.name, err)
	}
	if a.ghosted() && len(a.raw) > 0 {
		n := a.d.NDim()
		mask := make([]int, n)
		for d := range mask {
			if a.gw[d] > 0 {
				mask[d] = -1
			}
		}
		var hs []*rma.Handle
		var err error
		// every direction in {-1, 0, 1}^n but 0, skipping those along a dimension without ghosts
		for first := true; err == nil; first = false {
			if !first && !nextMask(mask, a.gw) {
				break
			}
			if isZero(mask) {
				continue
			}
			var h *Handle
			h, err = a.ghostDir(ctx, call, mask)
			if h != nil {
				hs = append(hs, h.hs...)
			}
		}
		if werr := waitAll(ctx, hs); err == nil {
			err = werr
		}
		if err != nil {
			return fmt.Errorf("ga: %s %q: %w", call, a.name, err)
		}
	}
	if err := a.pg.barrier(ctx); err != nil {
		return fmt.Errorf("ga: %s %q: %w", call, a.name, err)
	}
	return nil
}

// NbGetGhostDir starts fetching the ghost cells of this rank in one direction
// (NGA_NbGet_ghost_dir): mask[d] is -1 (the cells below the block along d), 0 (the block's own
// range) or +1 (above); at least one entry is non-zero and only along dimensions with ghost
// cells. Indices wrap periodically as in UpdateGhosts. Not collective: the caller synchronizes
// with the writers of the neighbouring blocks. Wait on the handle before reading the cells.
//
// Errors: ErrShape (a mask of the wrong length or with entries outside {-1, 0, 1}, all zero, or
// non-zero along a dimension without ghost cells; an array without ghost cells), ErrDestroyed;
// rma errors.
func (a *Array[T]) NbGetGhostDir(ctx context.Context, mask []int) (*Handle, error) {
	const call = "NGA_NbGet_ghost_dir"
	if err := a.alive(call); err != nil {
		return nil, err
	}
	n := a.d.NDim()
	bad := a.gw == nil || len(mask) != n || isZero(mask)
	for d := 0; !bad && d < n; d++ {
		bad = mask[d] < -1 || mask[d] > 1 || (mask[d] != 0 && a.gw[d] == 0)
	}
	if bad {
		return nil, fmt.Errorf("ga: %s %q: direction %v with ghost widths %v: %w", call, a.name, mask, a.gw, ErrShape)
	}
	if len(a.raw) == 0 {
		return &Handle{}, nil
	}
	h, err := a.ghostDir(ctx, call, mask)
	if err != nil {
		return nil, fmt.Errorf("ga: %s %q: %w", call, a.name, err)
	}
	return h, nil
}

// ghostDir issues the non-blocking periodic Get of this rank's ghost region in direction mask
// into its storage.
func (a *Array[T]) ghostDir(ctx context.Context, call string, mask []int) (*Handle, error) {
	n := a.d.NDim()
	lo, hi := make([]int, n), make([]int, n)
	off := 0
	for d := 0; d < n; d++ {
		w, at := a.gw[d], a.gw[d]
		switch mask[d] {
		case -1:
			lo[d], hi[d], at = a.lo[d]-w, a.lo[d]-1, 0
		case 0:
			lo[d], hi[d] = a.lo[d], a.hi[d]
		case 1:
			lo[d], hi[d], at = a.hi[d]+1, a.hi[d]+w, w+a.hi[d]-a.lo[d]+1
		}
		off = off*a.storageExtent(d) + at
	}
	return a.periodic(ctx, opGet, call, lo, hi, a.raw[off:], a.ld, 0, false)
}

// nextMask advances mask to the next direction in {-1, 0, 1}^n (odometer order, starting from
// -1 everywhere), keeping 0 along dimensions of width 0; false after the last.
func nextMask(mask, gw []int) bool {
	for d := len(mask) - 1; d >= 0; d-- {
		if gw[d] == 0 {
			continue
		}
		if mask[d] < 1 {
			mask[d]++
			return true
		}
		mask[d] = -1
	}
	return false
}

func isZero(v []int) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}
