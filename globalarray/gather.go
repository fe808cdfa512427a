package globalarray

import (
	"context"
	"fmt"

	"github.com/goarmci/goarmci/rma"
)

// Gather reads the elements at subs into v: v[i] = A[subs[i]] (NGA_Gather). Each subscript has
// one index per dimension (0-based); the elements are fetched with one vector transfer per owner
// (ARMCI_NbGetV), all owners at once. Returns when v holds them.
//
// Errors: ErrShape (len(v) ≠ len(subs), a subscript of the wrong length), ErrOutOfBounds,
// ErrDestroyed: nothing is read; rma transport errors.
func (a *Array[T]) Gather(ctx context.Context, subs [][]int, v []T) error {
	return a.elements(ctx, opGet, "NGA_Gather", subs, v, 0)
}

// Scatter writes v into the elements at subs: A[subs[i]] = v[i] (NGA_Scatter), with one vector
// transfer per owner (ARMCI_NbPutV). Returns when v may be reused; the data is at its owners after
// a Sync. Where a subscript appears twice, the later element of v lands last.
//
// Errors: ErrShape, ErrOutOfBounds, ErrDestroyed: nothing is written; rma transport errors.
func (a *Array[T]) Scatter(ctx context.Context, subs [][]int, v []T) error {
	return a.elements(ctx, opPut, "NGA_Scatter", subs, v, 0)
}

// ScatterAcc adds alpha·v[i] into the element at subs[i] (NGA_Scatter_acc), atomically per
// element with respect to other accumulates, with one vector accumulate per owner
// (ARMCI_NbAccV). A subscript that appears twice is added to twice.
//
// Errors: ErrShape, ErrOutOfBounds, ErrDestroyed: nothing is changed; rma transport errors.
func (a *Array[T]) ScatterAcc(ctx context.Context, subs [][]int, v []T, alpha T) error {
	return a.elements(ctx, opAcc, "NGA_Scatter_acc", subs, v, alpha)
}

// elements runs a gather, scatter or scatter-accumulate: every subscript is checked first, then
// the elements are grouped by owner (a counting sort: one Vec list, each owner's part contiguous
// and in subscript order) and one non-blocking vector transfer per owner is issued and waited
// for.
func (a *Array[T]) elements(ctx context.Context, o op, name string, subs [][]int, v []T, alpha T) error {
	if err := a.alive(name); err != nil {
		return err
	}
	if len(v) != len(subs) {
		return fmt.Errorf("ga: %s %q: %d values for %d subscripts: %w", name, a.name, len(v), len(subs), ErrShape)
	}
	if len(subs) == 0 {
		return nil
	}
	np := a.pg.Nnodes()
	owner := make([]int32, len(subs))
	offs := make([]int, len(subs))
	count := make([]int, np+1)
	for i, s := range subs {
		r, e, err := a.offset(s)
		if err != nil {
			return fmt.Errorf("ga: %s %q: subscript %d: %w", name, a.name, i, err)
		}
		owner[i], offs[i] = int32(r), e*a.es
		count[r+1]++
	}
	for r := 0; r < np; r++ {
		count[r+1] += count[r]
	}
	bytes := asBytes(v)
	vecs := make([]rma.Vec, len(subs))
	next := append([]int(nil), count[:np]...)
	for i, r := range owner {
		vecs[next[r]] = rma.Vec{Local: bytes[i*a.es : (i+1)*a.es], Off: offs[i]}
		next[r]++
	}
	var scale complex128
	if o == opAcc {
		scale = toScale(a.typ, alpha)
	}
	hs := make([]*rma.Handle, 0, np)
	var err error
	for r := 0; r < np && err == nil; r++ {
		part := vecs[count[r]:count[r+1]]
		if len(part) == 0 {
			continue
		}
		var h *rma.Handle
		switch o {
		case opGet:
			h, err = a.rt.NbGetV(ctx, part, a.seg, a.owner(r))
		case opPut:
			h, err = a.rt.NbPutV(ctx, part, a.seg, a.owner(r))
		default:
			h, err = a.rt.NbAccV(ctx, a.typ, scale, part, a.seg, a.owner(r))
		}
		if h != nil {
			hs = append(hs, h)
		}
	}
	if err != nil {
		_ = waitAll(context.WithoutCancel(ctx), hs) // no buffer stays in use
	} else {
		err = waitAll(ctx, hs)
	}
	if err != nil {
		return fmt.Errorf("ga: %s %q: %w", name, a.name, err)
	}
	return nil
}
